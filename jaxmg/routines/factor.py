"""Factor once, solve many: cho_factor / cho_solve and lu_factor / lu_solve(factor, b).

A factor is a pytree of sharded arrays (the factored matrix in a's sharding, never gathered, and
for LU the pivots) with its plan as static data: it can be returned from one jitted function
and passed to another. Solving with it repeats no factorization (csrc/routines/factor.h).
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import inv as _inv
from jaxmg.routines import lu_policy as _lu_policy
from jaxmg.routines import mixed as _mixed
from jaxmg.routines import potri as _potri


@dataclass(frozen=True)
class FactorPlan:
    """How a factor lies: the engine's placement of the factored matrix (aᵀ's when the engine
    was handed aᵀ), the user's placement (of a, b and x), the tile and padding."""

    placement: _placement.MatrixPlacement
    user: _placement.MatrixPlacement
    tile: int
    pad: bool
    n: int  # the order of A (the factor's matrix is larger where the engine padded)

    def kept(self, pivots=None) -> _routine.KeptFactor:
        """The factor as the solving routines take it (`routine.call(..., kept=...)`)."""
        return _routine.KeptFactor(self.placement, self.user, self.tile, self.pad, pivots, self.n)


# The factors whose matrix was handed out by unpacking (`c, lower = factor`, `lu, piv = factor`),
# by id of that matrix: a weak reference to it and the factor without it. `unpacked_factor`
# finds the factor back from the unpacked pieces, as long as the matrix lives.
_UNPACKED: dict[int, tuple[weakref.ref, object]] = {}


def _remember(factor) -> None:
    matrix = factor.matrix
    key = id(matrix)
    entry = _UNPACKED.get(key)
    if entry is not None and entry[0]() is matrix:
        return

    def forget(ref, key=key):
        if _UNPACKED.get(key, (None,))[0] is ref:
            del _UNPACKED[key]

    try:
        ref = weakref.ref(matrix, forget)
    except TypeError:  # not weakly referenceable: it cannot be found back
        return
    _UNPACKED[key] = (ref, dataclasses.replace(factor, matrix=None))


def unpacked_factor(matrix, second, kind):
    """The `kind` factor (CholeskyFactor or LUFactor) whose unpacking gave `matrix` (and the
    pivots or `lower`, `second`), or None when `matrix` did not come from one."""
    entry = _UNPACKED.get(id(matrix))
    if entry is None or entry[0]() is not matrix or not isinstance(entry[1], kind):
        return None
    if kind is LUFactor:
        return dataclasses.replace(entry[1], matrix=matrix, pivots=second)
    return dataclasses.replace(entry[1], matrix=matrix)


class _Unpacks:
    """Unpacks as the 2-tuple of `jax.scipy.linalg`'s factor routines: (matrix, second)."""

    def _pair(self):
        raise NotImplementedError

    def __len__(self):
        return 2

    def __iter__(self):
        _remember(self)
        return iter(self._pair())

    def __getitem__(self, index):
        _remember(self)
        return self._pair()[index]


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class CholeskyFactor(_Unpacks):
    """A distributed Cholesky factor (from `cho_factor`).

    Unpacks as `jax.scipy.linalg.cho_factor`'s result, `c, lower = factor`: the factor's
    matrix (the engine's, in its layout: SciPy's c only where the engine neither relabels nor
    pads; `jaxmg.linalg.cho_factor` says what it holds) and `lower` (as the caller asked;
    the engine keeps one form). `jaxmg.linalg.cho_solve((c, lower), b)` finds the factor back.

    matrix: the factor, in the engine's layout (do not read it as L; larger than A where the
    engine pads); logdet: log det A;
    status: 0, or k > 0 (not positive definite), -1 (not Hermitian): then matrix is NaN;
    a: the matrix factored (the same array, no copy; None with donate=True), through which
    solves and logdet differentiate with respect to A. A low-precision factor (`cho_factor`'s
    factor_dtype) keeps the original A here, in its own wider dtype: solves refine against it.
    """

    matrix: jax.Array
    logdet: jax.Array
    status: jax.Array
    plan: FactorPlan
    a: jax.Array | None = None
    lower: bool = False

    def _pair(self):
        return self.matrix, self.lower

    def tree_flatten(self):
        return (self.matrix, self.logdet, self.status, self.a), (self.plan, self.lower)

    @classmethod
    def tree_unflatten(cls, aux, children):
        matrix, logdet, status, a = children
        plan, lower = aux
        return cls(matrix, logdet, status, plan, a, lower)


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class LUFactor(_Unpacks):
    """A distributed pivoted LU factor (from `lu_factor`).

    Unpacks as `jax.scipy.linalg.lu_factor`'s result, `lu, piv = factor`: the factors' matrix
    and the pivots, both the engine's (`jaxmg.linalg.lu_factor` says what they hold).
    `jaxmg.linalg.lu_solve((lu, piv), b)` finds the factor back.

    matrix: the factors, in the engine's layout; pivots: int32, one per engine row, replicated;
    sign, logabsdet: of det A (as `slogdet`); status: 0, or k > 0 (singular or not finite): then
    matrix is NaN; a: the matrix factored (None with donate=True), for derivatives; for a
    low-precision factor (`lu_factor`'s factor_dtype) the original A, which solves refine
    against.
    """

    matrix: jax.Array
    pivots: jax.Array
    sign: jax.Array
    logabsdet: jax.Array
    status: jax.Array
    plan: FactorPlan
    a: jax.Array | None = None

    def _pair(self):
        return self.matrix, self.pivots

    def tree_flatten(self):
        children = (self.matrix, self.pivots, self.sign, self.logabsdet, self.status, self.a)
        return children, self.plan

    @classmethod
    def tree_unflatten(cls, plan, children):
        *arrays, a = children
        return cls(*arrays, plan, a)


CHO_FACTOR = _routine.EngineRoutine(
    name="cho_factor",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
)
CHO_SOLVE = _routine.EngineRoutine(
    name="cho_solve",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
)
LU_FACTOR = _routine.EngineRoutine(
    name="lu_factor",
    symmetric=False,
    hand_transpose=_lu_policy.HAND_TRANSPOSE,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
    pivots_out=True,
)
LU_SOLVE = _routine.EngineRoutine(
    name="lu_solve_factored",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
    pivots_in=True,
)


LU_SOLVE_T = _routine.EngineRoutine(
    name="lu_solve_factored_t",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
    pivots_in=True,
)


def cho_factor(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
    donate=False,
    check_symmetry=True,
    factor_dtype=None,
) -> CholeskyFactor:
    """The Cholesky factorization of a symmetric (Hermitian) positive-definite A sharded over a
    mesh, kept for `cho_solve`.

    Args: as for `jaxmg.potrs` (without b). With donate=True the factor takes a's buffers.
      factor_dtype: jnp.float32 for a float64 A, jnp.complex64 for complex128 (or their
        names): factor A.astype(factor_dtype) and keep A itself for refinement
        (docs/mixed_precision.md); not with donate=True.

    Returns:
      A `CholeskyFactor`: a pytree (pass it to and from jitted functions) holding the factor in
      a's sharding, log det A and the status. Nothing is gathered. `cho_solve`'s x and the
      factor's logdet differentiate with respect to a (kept in the factor; not with
      donate=True) and b, as potrs's. With factor_dtype, the factor is the low-precision one
      (its logdet and status those of A.astype(factor_dtype), logdet not differentiable) and
      `cho_solve` refines against A in A's dtype.
    """
    _placement.warn_if_replicated(a=a)
    kw = dict(T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=pad)
    if factor_dtype is not None:
        a_lo = _low_precision(a, factor_dtype, donate)
        r = _routine.call(CHO_FACTOR, a_lo, None, check_symmetry=check_symmetry, **kw)
        plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
        return CholeskyFactor(r.matrix, r.logdet, r.status, plan, a)
    traced = _routine.traced(a)
    r = _routine.call(
        CHO_FACTOR,
        jax.lax.stop_gradient(a) if traced else a,  # derivatives go through `a` (the rules)
        None,
        donate=donate,
        check_symmetry=check_symmetry,
        **kw,
    )
    plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
    logdet = r.logdet
    if traced and not donate:
        opts = _rules.options(**kw, check_symmetry=bool(check_symmetry))
        logdet = _rules._logdet_fn(_cholesky_inverse_t(opts))(a, jax.lax.stop_gradient(logdet))
    return CholeskyFactor(r.matrix, logdet, r.status, plan, None if donate else a)


def _low_precision(a, factor_dtype, donate):
    """A.astype(factor_dtype) after the checks of a mixed precision factorization (ValueError
    before any work); no derivative flows through it (solves differentiate through A)."""
    low = _mixed.check_factor_dtype(a, factor_dtype)
    _mixed.check_mixed_flags(donate=donate, return_logdet=False)
    return jax.lax.stop_gradient(a).astype(low)


def is_mixed(factor) -> bool:
    """Whether a factor is a low-precision one kept with its matrix for refinement."""
    return factor.a is not None and factor.a.dtype != factor.matrix.dtype


def mixed_precision_solve(make_factor, a, b, factor_dtype, **flags):
    """potrs's and lu_solve's mixed-precision path (docs/mixed_precision.md): the checks of the
    routine's flags (by name, in its signature's order), of factor_dtype and of the operands,
    then `make_factor()` (the routine's factorization of a in factor_dtype) and the refined
    solve. Returns x, with the status and the `MixedInfo` after it as the flags ask."""
    _placement.check_flags(**flags)
    _mixed.check_factor_dtype(a, factor_dtype)
    _mixed.check_mixed_flags(donate=flags["donate"], return_logdet=flags["return_logdet"])
    _routine.check_operands(a, b)
    _placement.warn_if_replicated(a=a, b=b)
    x, status, info = solve_mixed(make_factor(), b)
    out = (x,) + ((status,) if flags["return_status"] else ())
    out += (info,) if flags["return_info"] else ()
    return out[0] if len(out) == 1 else out


def solve_mixed(factor, b):
    """(x, status, info) of A x = b refined with a low-precision factor (`jaxmg.routines.mixed`);
    x in b's own sharding where it is known. The status is the factor's, or the float64
    factorization's where the solve fell back to it."""
    _routine.check_operands(factor.a, b)
    lu = isinstance(factor, LUFactor)
    pivots = factor.pivots if lu else jnp.zeros((1,), jnp.int32)
    x, status, info = _mixed_solve(factor.plan, lu)(
        factor.matrix, pivots, factor.status, factor.a, b
    )
    if _placement.known_spec(b) is not None:
        x = _placement.place_like(x, b, factor.plan.user.mesh)
    return x, status, info


@functools.cache
def _refined_solve(plan, lu: bool, transpose: bool):
    """fn(matrix, pivots, lo_status, a, b2) -> (x, status, info): op(A) x = b2 (op: Aᵀ with
    transpose; b2 (N, K)) refined with the low-precision factor (matrix, pivots) of `a`
    (`mixed.refine`), falling back to the float64 factorization (its Cholesky factorization
    checks no symmetry: the low-precision one did where asked, and a matrix found not
    symmetric there does not fall back)."""
    user = plan.user

    def low_solve(matrix, pivots, r, t):
        """A_lo⁻¹ r, or A_loᵀ⁻¹ r with t."""
        if lu:
            f = LUFactor(matrix, pivots, None, None, None, plan)
            return lu_solve_transposed(f, r) if t else lu_solve_factored(f, r)
        if t:  # Aᵀ = conj(A) for Hermitian A
            return jnp.conj(_cho_solve_raw(plan, matrix, jnp.conj(r)))
        return _cho_solve_raw(plan, matrix, r)

    def high_solve(a, b2):
        kw = dict(T_A=plan.tile, mesh=user.mesh, matrix_specs=user.matrix_spec, pad=plan.pad)
        if lu:
            f = lu_factor(a, **kw)
            x = lu_solve_transposed(f, b2) if transpose else lu_solve_factored(f, b2)
            return x, f.status
        f = cho_factor(a, check_symmetry=False, **kw)
        if transpose:
            return jnp.conj(_cho_solve_raw(f.plan, f.matrix, jnp.conj(b2))), f.status
        return _cho_solve_raw(f.plan, f.matrix, b2), f.status

    @jax.jit
    def solve(matrix, pivots, lo_status, a, b2):
        a = jax.lax.stop_gradient(a)

        def precise_solver():
            """r -> op(A_lo)⁻¹ r in A's dtype: the factor widened once."""
            wide = matrix.astype(b2.dtype)
            return lambda r: low_solve(wide, pivots, r, transpose)

        return _mixed.refine(
            user,
            a,
            b2,
            lo_status,
            lambda r: low_solve(matrix, pivots, r, transpose),
            lambda r: jnp.conj(low_solve(matrix, pivots, jnp.conj(r), not transpose)),
            precise_solver,
            lambda: high_solve(a, b2),
            transpose,
            hermitian=not lu,
        )

    return solve


@functools.cache
def _mixed_solve(plan, lu: bool):
    """fn(matrix, pivots, lo_status, a, b) -> (x, status, info): x = A⁻¹ b refined with a
    low-precision factor, differentiable with respect to a and b through
    `lax.custom_linear_solve` (the matrix-vector product A v in A's dtype, the solver the
    refined solve, with Aᵀ for the transpose)."""
    user = plan.user
    forward = _refined_solve(plan, lu, False)
    backward = _refined_solve(plan, lu, True)

    @jax.jit
    def solve(matrix, pivots, lo_status, a, b):
        vector = b.ndim == 1
        b2 = b.reshape(-1, 1) if vector else b
        b2 = _placement.constrain(b2, user.mesh, P(user.row_axis, None))

        def matvec(v):
            return _rules.matvec(user, a, v)

        def solve_n(_, r):
            x, status, info = forward(matrix, pivots, lo_status, a, r)
            return x, (status, info)

        def solve_t(_, r):
            x, status, info = backward(matrix, pivots, lo_status, a, r)
            return x, (status, info)

        # A real symmetric A is its own transpose; a complex Hermitian one is not (Aᵀ = conj A).
        symmetric = not lu and not jnp.iscomplexobj(a)
        x, (status, info) = jax.lax.custom_linear_solve(
            matvec,
            b2,
            solve=solve_n,
            transpose_solve=None if symmetric else solve_t,
            symmetric=symmetric,
            has_aux=True,
        )
        if vector:
            x = x.reshape(-1)
            info = info._replace(backward_error=info.backward_error[0])
        return x, status, info

    return solve


@functools.cache
def _cholesky_inverse_t(opts):
    """A⁻ᵀ = conj(A⁻¹) of a Hermitian A, differentiable (potri's rule)."""

    return lambda a: jnp.conj(_potri.potri(a, **opts.kwargs()))


def cho_solve(factor: CholeskyFactor, b, *, return_info=False):
    """Solves A x = b with a kept Cholesky factor (no refactorization).

    Args:
      factor: the `CholeskyFactor` of `jaxmg.cho_factor`.
      b: (N,) or (N, K) array of a's dtype.
      return_info: (a factor made with factor_dtype) also return the `MixedInfo` of the
        refinement (its path, steps and backward error).

    Returns:
      x with b's shape; NaN when the factorization failed (see factor.status). (x, info) with
      return_info. A low-precision factor's x is refined against A (docs/mixed_precision.md).
    """
    if not isinstance(factor, CholeskyFactor):
        raise TypeError(
            f"cho_solve takes the CholeskyFactor of jaxmg.cho_factor, got {type(factor).__name__}"
        )
    _placement.check_flags(return_info=return_info)
    if is_mixed(factor):
        x, _, info = solve_mixed(factor, b)
        return (x, info) if return_info else x
    if return_info:
        raise ValueError("return_info needs a factor made with factor_dtype")
    if factor.a is not None and _routine.traced(factor.a, b):
        return _kept_solve(factor.plan, False)(factor.matrix, None, factor.a, b)
    return _cho_solve_raw(factor.plan, factor.matrix, b)


def _cho_solve_raw(p, matrix, b):
    return _routine.call(CHO_SOLVE, matrix, b, kept=p.kept()).x


@functools.cache
def _kept_solve(plan, lu):
    """x = A⁻¹ b with a kept factor, differentiable with respect to A (the factor's `a`) and b:
    as potrs's and lu_solve's rules, dx = A⁻¹ (db − dA x) through `lax.custom_linear_solve`
    with the kept factor as its solver (no refactorization)."""

    def solve_with(matrix, pivots, r):
        if lu:
            return lu_solve_factored(LUFactor(matrix, pivots, None, None, None, plan), r)
        return _cho_solve_raw(plan, matrix, r)

    def solve_t_with(matrix, pivots, r):
        if lu:
            return lu_solve_transposed(LUFactor(matrix, pivots, None, None, None, plan), r)
        return jnp.conj(_cho_solve_raw(plan, matrix, jnp.conj(r)))  # A⁻ᵀ = conj(A⁻¹)

    @jax.jit
    def solve(matrix, pivots, a, b):
        user = plan.user
        b = _placement.constrain(b, user.mesh, P(user.row_axis, *([None] * (b.ndim - 1))))

        def linear(r):
            return jax.lax.custom_linear_solve(
                lambda v: _rules.matvec(plan.user, a, v),
                r,
                solve=lambda _, r: solve_with(matrix, pivots, r),
                transpose_solve=lambda _, r: solve_t_with(matrix, pivots, r),
            )

        return linear(b)

    return solve


def lu_factor(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
    donate=False,
    factor_dtype=None,
) -> LUFactor:
    """The pivoted LU factorization of a general A sharded over a mesh, kept for
    `jaxmg.lu_solve(factor, b)`.

    Args: as for `jaxmg.lu_solve` (without b). With donate=True the factor takes a's buffers.
      factor_dtype: jnp.float32 for a float64 A, jnp.complex64 for complex128 (or their
        names): factor A.astype(factor_dtype) and keep A itself for refinement
        (docs/mixed_precision.md); not with donate=True.

    Returns:
      An `LUFactor`: a pytree holding the factors in a's sharding (aᵀ's where the engine is
      handed aᵀ), the pivots, sign and log |det A| (as `slogdet`) and the status. Solves with it
      and its logabsdet differentiate with respect to a (kept in the factor; not with
      donate=True) and b, as lu_solve's (the sign's derivative is not provided: zero, exact for
      real matrices). With factor_dtype, the factors are the low-precision ones (sign,
      logabsdet and status those of A.astype(factor_dtype), not differentiable) and solves
      refine against A in A's dtype.
    """
    _placement.warn_if_replicated(a=a)
    if factor_dtype is not None:
        a_lo = _low_precision(a, factor_dtype, donate)
        r = _routine.call(
            LU_FACTOR,
            a_lo,
            None,
            T_A=T_A,
            mesh=mesh,
            matrix_specs=matrix_specs,
            in_specs=in_specs,
            pad=pad,
        )
        plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
        return LUFactor(r.matrix, r.pivots, r.sign, r.logdet, r.status, plan, a)
    traced = _routine.traced(a)
    r = _routine.call(
        LU_FACTOR,
        jax.lax.stop_gradient(a) if traced else a,  # derivatives go through `a` (the rules)
        None,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=pad,
        donate=donate,
    )
    plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
    logabsdet = r.logdet
    if traced and not donate:  # d log |det A| = Re tr(A⁻¹ dA), as slogdet's
        opts = _rules.options(T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs)
        logabsdet = _rules._logdet_fn(_general_inverse_t(opts))(a, jax.lax.stop_gradient(logabsdet))
    return LUFactor(r.matrix, r.pivots, r.sign, logabsdet, r.status, plan, None if donate else a)


@functools.cache
def _general_inverse_t(opts):
    """A⁻ᵀ of a general A in a's sharding, differentiable (inv's rule)."""

    def inverse_t(a):
        kw = opts.kwargs()
        spec = _routine._matrix_spec(kw["matrix_specs"], kw["in_specs"])
        placement = _placement.resolve_placement(a, kw["mesh"], spec)
        return _rules.transpose(placement, _inv.inv(a, **kw))

    return inverse_t


def lu_solve_factored(factor: LUFactor, b):
    """Solves A x = b with a kept LU factor (no refactorization); `jaxmg.lu_solve(factor, b)`.
    A low-precision factor's x is refined against A (`solve_mixed`)."""
    if not isinstance(factor, LUFactor):
        raise TypeError(f"expected the LUFactor of jaxmg.lu_factor, got {type(factor).__name__}")
    if is_mixed(factor):
        return solve_mixed(factor, b)[0]
    if factor.a is not None and _routine.traced(factor.a, b):
        return _kept_solve(factor.plan, True)(factor.matrix, factor.pivots, factor.a, b)
    return _routine.call(LU_SOLVE, factor.matrix, b, kept=factor.plan.kept(factor.pivots)).x


def lu_solve_transposed(factor: LUFactor, b):
    """Solves Aᵀ x = b (not conjugated) with a kept LU factor (derivative rules use it)."""
    return _routine.call(LU_SOLVE_T, factor.matrix, b, kept=factor.plan.kept(factor.pivots)).x
