"""Derivative rules of the solve routines, built from jaxmg's own distributed routines.

A solve x = A⁻¹ b has dx = A⁻¹ (db − dA x): one factorization and its solves, through
`lax.custom_linear_solve`, so that reverse mode transposes it into the solve with Aᵀ from the
same factor. log |det A| has d = Re tr(A⁻¹ dA) = Re Σ (A⁻ᵀ ⊙ dA): the routines provide A⁻ᵀ in
a's sharding, so the sum is elementwise and the matrix is never moved (the only collectives
are of vector size: the matrix-vector product dA x).

Each rule runs inside `jax.jit`, so that its inner functions close over tracers and not over
arrays that span other processes' devices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import placement as _placement
from jaxmg._core import product as _product
from jaxmg._core import routine as _routine


@dataclass(frozen=True)
class Options:
    """A routine's keyword arguments other than the arrays (static under differentiation)."""

    items: tuple

    def kwargs(self) -> dict:
        return dict(self.items)


def options(**kwargs) -> Options:
    hashable = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return Options(tuple(sorted(hashable.items())))


@dataclass(frozen=True)
class SolveRule:
    """How a solve routine differentiates.

    primal(a, b, donate, **kw) -> (x, logdet, status): the routine itself.
    factor(a, **kw) -> f; solve(f, r) = A⁻¹ r; solve_t(f, r) = A⁻ᵀ r; logdet(f) -> (logdet,
    status) of the factorization; placement(f): a's placement (for dA x).
    inverse_t(a, **kw) -> A⁻ᵀ in a's sharding (for the log-determinant's derivative; only
    with it).
    matvec(placement, m, v, tangent, **kw) -> the routine's matrix made of m, times v (A is
    the one made of a: e.g. one triangle of a, transposed); with tangent, m is a direction dA
    and the product is the matrix's derivative in it (linear in m: without a constant part,
    such as a unit diagonal); None: m @ v either way (`matvec`).
    """

    primal: Callable
    factor: Callable
    solve: Callable
    solve_t: Callable
    logdet: Callable
    placement: Callable
    inverse_t: Callable | None = None
    matvec: Callable | None = None


def differentiable_solve(rule: SolveRule, with_logdet: bool):
    """fn(opts, donate, a, b) -> (x, logdet, status) with forward- and reverse-mode rules.
    Without logdet its tangent is not computed (it would cost an inverse) and is zero: the
    routine does not return it then."""

    def primal(opts, donate, a, b):
        return rule.primal(a, b, donate, **opts.kwargs())

    fn = jax.custom_jvp(primal, nondiff_argnums=(0, 1))

    @fn.defjvp
    def _jvp(opts, donate, primals, tangents):
        return _solve_jvp(rule, opts, with_logdet)(*primals, *tangents)

    def call(opts, donate, a, b):
        # Concrete arrays: nothing to differentiate, none of custom_jvp's cost.
        return fn(opts, donate, a, b) if _routine.traced(a, b) else primal(opts, donate, a, b)

    return call


@functools.cache
def _solve_jvp(rule: SolveRule, opts: Options, with_logdet: bool):
    """The rule. Every output it returns is itself differentiable, so the rule can be
    differentiated again (second and higher orders): the factorization is made of a with its
    derivative stopped and is used only as the solver of `custom_linear_solve`, whose
    derivatives come from its matrix-vector product with a itself; log |det A| is
    `_logdet_at(a, value)`, whose derivative is Re tr(A⁻¹ dA) through a differentiable A⁻ᵀ."""

    @jax.jit
    def jvp(a, b, da, db):
        kw = opts.kwargs()
        f = rule.factor(jax.lax.stop_gradient(a), **kw)
        placement = rule.placement(f)

        def mv(m, v, tangent=False):
            if rule.matvec is None:
                return matvec(placement, m, v)
            return rule.matvec(placement, m, v, tangent=tangent, **kw)

        def solve(r):
            return jax.lax.custom_linear_solve(
                lambda v: mv(a, v),
                r,
                solve=lambda _, r: rule.solve(f, r),
                transpose_solve=lambda _, r: rule.solve_t(f, r),
            )

        x = solve(b)
        dx = solve(db - mv(da, x, tangent=True))
        value, status = rule.logdet(f)
        if with_logdet:
            inverse_t = _inverse_t_fn(rule, opts, rule.placement(f))
            logdet = _logdet_fn(inverse_t)(a, jax.lax.stop_gradient(value))
            dlogdet = jnp.real(trace_inverse(inverse_t(a), da)).astype(value.dtype)
        else:
            logdet, dlogdet = value, jnp.zeros_like(value)
        return (x, logdet, status), (dx, dlogdet, float0())

    return jvp


@functools.cache
def _inverse_t_fn(rule: SolveRule, opts: Options, placement):
    """A⁻ᵀ in a's sharding, differentiable to any order: d(A⁻ᵀ) = −A⁻ᵀ dAᵀ A⁻ᵀ (two matrix
    products: their collectives, of matrix size, appear only in second and higher
    derivatives)."""

    @jax.custom_jvp
    def inverse_t(a):
        return rule.inverse_t(a, **opts.kwargs())

    @inverse_t.defjvp
    def _jvp(primals, tangents):
        (a,), (da,) = primals, tangents
        x = inverse_t(a)
        return x, -matmat(placement, matmat(placement, x, da.T), x)

    return inverse_t


@functools.cache
def _logdet_fn(inverse_t):
    """log |det A| given its value (computed by the factorization): the value, with the
    derivative Re tr(A⁻¹ dA) = Re Σ (A⁻ᵀ ⊙ dA), itself differentiable through `inverse_t`."""

    @jax.custom_jvp
    def logdet_at(a, value):
        return value

    @logdet_at.defjvp
    def _jvp(primals, tangents):
        (a, value), (da, _) = primals, tangents
        d = jnp.real(trace_inverse(inverse_t(a), da)).astype(value.dtype)
        return logdet_at(a, value), d

    return logdet_at


def trace_inverse(inverse_t, da):
    """tr(A⁻¹ dA) = Σ A⁻ᵀ ⊙ dA, both in a's sharding (a reduction to a scalar)."""
    return jnp.sum(inverse_t * da)


def float0():
    """The tangent of an integer output (a status)."""
    return np.zeros((), dtype=jax.dtypes.float0)


def matmat(placement, m1, m2):
    """m1 @ m2 for two matrices sharded like a, the product sharded like a (XLA moves what it
    needs: used by second derivatives only)."""
    mesh, spec = placement.mesh, placement.matrix_spec
    if AxisType.Explicit in tuple(mesh.axis_types):
        return jnp.matmul(m1, m2, out_sharding=NamedSharding(mesh, spec))
    return _placement.constrain(jnp.matmul(m1, m2), mesh, spec)


def matvec(placement, m, v, op="N"):
    """op(m) @ v for m sharded like a and v (rows) like b (op "N": m, "T": mᵀ, "C": mᴴ): v's
    rows are moved to the axis of m the product contracts first (a collective of vector size;
    explicit mesh axes need it said), the result's rows lie like b's. (mᵀ is the same shards
    read the other way: no distributed transpose.)"""
    mesh = placement.mesh
    v = _placement.constrain(v, mesh, P(placement.col_axis if op == "N" else placement.row_axis))
    if op != "N":
        m = _adjoint_mod.transpose(m, conjugate=op == "C")
    out = P(placement.row_axis, *([None] * (v.ndim - 1)))
    if AxisType.Explicit in tuple(mesh.axis_types):
        return jnp.matmul(m, v, out_sharding=NamedSharding(mesh, out))
    return _placement.constrain(jnp.matmul(m, v), mesh, out)


def differentiable(primal: Callable, tangent: Callable):
    """A routine with a forward-mode rule (reverse mode by JAX's transposition of it):
    call(opts, donate, *arrays) -> primal(opts, donate, *arrays), a tuple of outputs.

    tangent(opts, placement, primals, outputs, tangents) -> the outputs' tangents: linear in the
    tangents and made of XLA operations (products, triangular solves, elementwise), so that
    JAX can transpose it; the outputs come from the routine itself, differentiable again
    (second and higher derivatives). `placement` is a's (static). The rule runs inside jax.jit.
    """

    def base(opts, donate, placement, *arrays):
        return primal(opts, donate, *arrays)

    fn = jax.custom_jvp(base, nondiff_argnums=(0, 1, 2))

    @fn.defjvp
    def _jvp(opts, donate, placement, primals, tangents):
        return _tangent_jit(fn, tangent, opts, placement)(tuple(primals), tuple(tangents))

    def call(opts, donate, *arrays):
        """opts: the routine's keywords (`options`; mesh, matrix_specs and in_specs among
        them); arrays[0] is a."""
        kw = opts.kwargs()
        # Under another context mesh, the routine's operations run with a's mesh as the
        # context mesh (placement.mesh_scope).
        with _placement.scope_of(arrays[0], kw.get("mesh")):
            if not _routine.traced(*arrays):
                return primal(opts, donate, *arrays)  # concrete arrays: nothing to differentiate
            spec = _routine._matrix_spec(kw.get("matrix_specs"), kw.get("in_specs"))
            placement = _placement.resolve_placement(arrays[0], kw.get("mesh"), spec)
            return fn(opts, donate, placement, *arrays)

    return call


@functools.cache
def _tangent_jit(fn, tangent, opts: Options, placement):
    @jax.jit
    def jvp(primals, tangents):
        out = fn(opts, False, placement, *primals)
        return out, tuple(tangent(opts, placement, primals, out, tangents))

    return jvp


def product(placement, m1, m2, spec=None):
    """m1 @ m2 by XLA (its collectives move what they need), the product placed with `spec`
    (default: a's matrix spec; P() replicated)."""
    mesh = placement.mesh
    spec = placement.matrix_spec if spec is None else spec
    if AxisType.Explicit in tuple(mesh.axis_types):
        return jnp.matmul(m1, m2, out_sharding=NamedSharding(mesh, spec))
    return _placement.constrain(jnp.matmul(m1, m2), mesh, spec)


def engine_product(placement, m1, m2, adjoint_1=False, adjoint_2=False):
    """op(m1) op(m2) for two N x N matrices sharded like a, by the engine (p?gemm, cuBLASMp's
    Gemm; jaxmg/_core/product.py): no XLA collective, nothing gathered; differentiable and
    transposable to any order. op(m) = mᴴ when adjoint_m (not both)."""
    opts = options(mesh=placement.mesh, matrix_specs=placement.matrix_spec)
    return _product.product(m1, m2, adjoint_1, adjoint_2, opts=opts)


def factor_product(placement, m1, m2, adjoint_1=False, adjoint_2=False):
    """op(m1) op(m2) for the factors of a (M x N, M >= N) and N x N matrices in a's matrix
    spec: the engine's product when a is square (`engine_product`, nothing moves through
    XLA), else XLA's, with a tall factor in `factor_spec` and its adjoint taken in the spec that
    moves nothing (`factor_adjoint_spec`): a product Uᴴ X then sums N x N partial products over
    the rows, the largest collective besides a 1 x P mesh's all-to-all of the factor."""
    if m1.shape[0] == m1.shape[1] and m2.shape[0] == m2.shape[1] and m1.shape == m2.shape:
        if not (adjoint_1 and adjoint_2):
            return engine_product(placement, m1, m2, adjoint_1, adjoint_2)

    def op(m, adjoint_m):
        tall = m.shape[0] > m.shape[1]
        if tall:
            m = _placement.constrain(m, placement.mesh, factor_spec(placement))
        if not adjoint_m:
            return m
        return adjoint(placement, m, factor_adjoint_spec(placement) if tall else None)

    return tall_product(placement, op(m1, adjoint_1), op(m2, adjoint_2))


def tall_product(placement, m1, m2):
    """m1 @ m2 by XLA in a's matrix spec; a tall product computed in `factor_spec` first (on a
    1 x P mesh its rows split, so that the transposed product's cotangent arrives split like
    the factor instead of being gathered)."""
    if m1.shape[0] > m2.shape[1] and one_device_row(placement):
        out = product(placement, m1, m2, factor_spec(placement))
        return _placement.constrain(out, placement.mesh, placement.matrix_spec)
    return product(placement, m1, m2)


def one_device_row(placement):
    """A mesh of one device row whose columns are split (1 x P)."""
    return placement.mesh_rows == 1 and placement.mesh_cols > 1


def factor_spec(placement):
    """The spec of a tall M x N factor in XLA's products: a's matrix spec, except on a mesh of
    one device row (1 x P), where it would split the factor's columns, and a product of two
    such factors over their rows would gather one of them whole: there its rows are split over
    the column axis instead (one all-to-all of the factor, nothing gathered)."""
    if one_device_row(placement):
        return P(placement.col_axis, None)
    return placement.matrix_spec


def factor_rows_spec(placement):
    """The spec that splits a tall factor's (or a right-hand side's) rows: over a's row axis,
    or on a mesh of one device row over its column axis (`factor_spec`)."""
    return P(placement.col_axis if one_device_row(placement) else placement.row_axis, None)


def factor_adjoint_spec(placement):
    """The spec of mᴴ for a factor m in `factor_spec` that moves nothing."""
    if one_device_row(placement):
        return P(None, placement.col_axis)
    return free_transpose_spec(placement)


def adjoint(placement, m, spec=None):
    """mᴴ (mᵀ for real m) placed with `spec` (default: a's matrix spec): a distributed
    transpose (XLA's all-to-all)."""
    mh = _adjoint_mod.transpose(m)
    return _placement.constrain(mh, placement.mesh, placement.matrix_spec if spec is None else spec)


def free_transpose_spec(placement):
    """The spec of mᴴ for m in a's matrix spec that moves nothing: its rows over a's column
    axis and its columns over a's row axis (for a tall M x N factor, whose adjoint in a's own
    spec would be an all-to-all of the whole factor)."""
    return P(placement.col_axis, placement.row_axis)


def transpose(placement, m):
    """mᵀ (not conjugated) in a's matrix spec: a distributed transpose."""
    return _placement.constrain(m.T, placement.mesh, placement.matrix_spec)


def diagonal(placement, m):
    """The diagonal of a square m in a's matrix spec, replicated (a reduction, no gather); of an
    m whose order does not divide over the mesh (a subset's k x k), XLA's own."""
    n = m.shape[0]
    if n % placement.mesh_rows or n % placement.mesh_cols:
        return _placement.constrain(jnp.diagonal(m), placement.mesh, P())
    eye = _placement.constrain(
        jnp.eye(m.shape[0], dtype=m.dtype), placement.mesh, placement.matrix_spec
    )
    return _placement.constrain(jnp.sum(m * eye, axis=0), placement.mesh, P())


def place(placement, m):
    """m (a matrix computed from replicated values) in a's matrix spec."""
    return _placement.constrain(m, placement.mesh, placement.matrix_spec)


def eigen_tangent(placement, w, v, da, db=None):
    """(dw, dV) of A V = B V diag(w), Vᴴ B V = I (B = I without db): with C = Vᴴ dA V and
    D = Vᴴ dB V, dw = Re diag(C) − w Re diag(D) and dV = V M, M_ij = (C_ij − w_j D_ij) /
    (w_j − w_i) off the diagonal, M_ii = −D_ii / 2. The products are the engine's
    (`engine_product`); the rest is elementwise or a sum over rows."""
    pl = placement

    def sandwich(m):  # Vᴴ m V
        return engine_product(pl, v, engine_product(pl, m, v), adjoint_1=True)

    c = sandwich(da)
    n = w.shape[0]
    eye = jnp.eye(n, dtype=w.dtype)
    f = place(pl, 1 / (eye + w[None, :] - w[:, None]) - eye).astype(c.dtype)  # 1 / (w_j − w_i)
    dw = jnp.real(diagonal(pl, c))
    if db is None:
        return dw.astype(w.dtype), engine_product(pl, v, f * c)
    d = sandwich(db)
    dw = dw - w * jnp.real(diagonal(pl, d))
    w_row = place(pl, jnp.broadcast_to(w[None, :], (n, n))).astype(c.dtype)
    m = f * (c - w_row * d) - 0.5 * place(pl, eye).astype(c.dtype) * d
    return dw.astype(w.dtype), engine_product(pl, v, m)
