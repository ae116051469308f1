"""solve_triangular: op(A) x = b for a distributed triangular A (p?trsm, cublasMpTrsm)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The engine redistributes the matrix (no relabeling: a permuted triangle is not triangular),
# and reads b's rows split like a's rows (ROWS) or b sharded like a (MATRIX;
# csrc/routines/solve_triangular.h).
_COMMON = dict(symmetric=False, hand_transpose=_routine.never_transpose, redistribute=True)
ROWS = _routine.EngineRoutine(name="solve_triangular", **_COMMON)
MATRIX = _routine.EngineRoutine(name="solve_triangular_matrix", rhs_like_a=True, **_COMMON)

_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def solve_triangular(
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    debug=None,
    check_finite=True,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    in_specs=None,
    return_status=False,
    pad=True,
):
    """Solves op(A) x = b for a triangular A sharded over a mesh (the call of
    `jax.scipy.linalg.solve_triangular`).

    Only the triangle named by `lower` is read (with unit_diagonal, not its diagonal either):
    the other may hold anything. The engine copies A into block-cyclic tiles (p?gemr2d on
    CPUs, jaxmg's exchange on GPUs) and solves there with ScaLAPACK's p?trsm or cuBLASMp's Trsm;
    nothing is gathered.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh.
      b: (N,) or (N, K) array of a's dtype. A matrix b sharded like a (its columns over a's
        column axis: its known sharding, or in_specs' second entry) stays so: the engine
        solves from the right with Bᵀ's tiles, and x comes back sharded like a (scales with
        K). Otherwise b's rows are split like a's rows and the engine reads the whole of b on
        every device (b is small: a vector or a few columns).
      trans: 0 or "N": A x = b; 1 or "T": Aᵀ x = b; 2 or "C": Aᴴ x = b.
      lower: read A's lower triangle (default: the upper one).
      unit_diagonal: take A's diagonal as ones (not read).
      overwrite_b, debug, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: as for `jaxmg.potrs` (the engine redistributes: a tile
        that does not divide N leaves a partial last tile, nothing is padded).
      in_specs: (spec of a, spec of b), as in JAXMg 1.x; b's spec chooses its layout as above.
      return_status: also return an int32 status: 0 on success, k > 0 when A[k-1, k-1] is zero
        or not finite (without unit_diagonal); the same on every device.

    Returns:
      x with b's shape and dtype, in b's own sharding where it is known (else rows over a's
      row axis, or a's sharding for a matrix b sharded like a); (x, status) with
      return_status. When A is singular, x is NaN on every device.

    Differentiation: forward and reverse mode with respect to a and b, any order (x through
    `lax.custom_linear_solve`: dx = op(A)⁻¹ (db − op(dA) x), dA restricted to the triangle
    read; the solves are jaxmg's, the products XLA's: vector-sized collectives for a b split
    by rows, products of b's size for a b sharded like a).

    Raises:
      TypeError: a flag that is not a Python bool; b's dtype differing from a's.
      ValueError: trans not 0, 1, 2, "N", "T" or "C"; bad shapes, specs, meshes or tiles,
        before any work.
    """
    del overwrite_b, debug, check_finite
    _placement.check_flags(
        lower=lower, unit_diagonal=unit_diagonal, return_status=return_status, pad=pad
    )
    _placement.warn_if_replicated(a=a, b=b)
    trans = _trans(trans)
    _routine.check_operands(a, b)
    placement = _placement.resolve_placement(a, mesh, _routine._matrix_spec(matrix_specs, in_specs))
    # The derivative rule's static options: the call's keywords (`_call`).
    opts = _rules.options(
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=bool(pad),
        trans=trans,
        lower=bool(lower),
        unit_diagonal=bool(unit_diagonal),
        matrix_rhs=_like_a(b, placement, in_specs),
    )
    x, _, status = _DIFFERENTIABLE(opts, False, a, b)
    return (x, status) if return_status else x


def _trans(trans) -> int:
    if isinstance(trans, bool | np.bool_) or not isinstance(trans, int | str | np.integer):
        raise ValueError(f'trans must be 0, 1, 2, "N", "T" or "C", got {trans!r}')
    key = trans if isinstance(trans, str) else int(trans)
    if key not in _TRANS:
        raise ValueError(f'trans must be 0, 1, 2, "N", "T" or "C", got {trans!r}')
    return _TRANS[key]


def _like_a(b, placement, in_specs) -> bool:
    """Whether b is a matrix sharded like a, over a's column axis too (given by in_specs'
    second entry, else by b's known sharding): then it stays so."""
    if b.ndim != 2 or placement.mesh_cols == 1 or b.shape[1] % placement.mesh_cols:
        return False
    spec = None
    if isinstance(in_specs, tuple | list) and len(in_specs) > 1:
        spec = in_specs[1]
    if spec is None:
        spec = _placement.known_spec(b)
    if not isinstance(spec, P):
        return False
    sizes = dict(zip(placement.mesh.axis_names, placement.mesh.axis_sizes, strict=True))
    entries = tuple(spec) + (None,) * (2 - len(spec))

    def axes(entry):
        names = entry if isinstance(entry, tuple) else (entry,)
        return tuple(x for x in names if x is not None and sizes.get(x, 1) > 1)

    return axes(entries[0]) == axes(placement.row_axis) and axes(entries[1]) == axes(
        placement.col_axis
    )


def _call(a, b, donate=False, *, trans, lower, unit_diagonal, matrix_rhs, **placement):
    """The engine's call: (x, log det (unused, 0), status), x in b's own sharding where it is
    known (on Explicit mesh axes the derivative rule's solves must give their input's type).
    placement: T_A, mesh, matrix_specs, in_specs, pad."""
    r = _routine.call(
        MATRIX if matrix_rhs else ROWS,
        a,
        b,
        donate=donate,
        triangular=_routine.Triangular(bool(lower), int(trans), bool(unit_diagonal)),
        **placement,
    )
    return _placement.place_like(r.x, b, r.user.mesh), r.logdet, r.status


def _solve(a, b, trans, **kw):
    """The call with another op (the derivative rule's solves)."""
    return _call(a, b, **dict(kw, trans=trans))


@dataclass(frozen=True)
class _Operand:
    """The derivative rule's "factor": a triangular solve needs none, only A (its derivative
    stopped), the call's options, and a's placement."""

    a: object
    kw: dict
    placement: _placement.MatrixPlacement


def _factor(a, **kw):
    spec = _routine._matrix_spec(kw.get("matrix_specs"), kw.get("in_specs"))
    return _Operand(a, kw, _placement.resolve_placement(a, kw.get("mesh"), spec))


def _solve_t(f, r):
    """op(A)⁻ᵀ r (custom_linear_solve's transposed solve): op(A)ᵀ is Aᵀ, A, conj(A) for
    op N, T, C."""
    kw = dict(f.kw)
    trans = kw.pop("trans")
    if trans == 2 and jnp.iscomplexobj(r):
        return jnp.conj(_solve(f.a, jnp.conj(r), 0, **kw)[0])
    return _solve(f.a, r, 1 if trans == 0 else 0, **kw)[0]


def _status(f):
    """The routine's status from the diagonal, as the engine computes it: 1 + the first
    diagonal entry that is zero or not finite (0 with unit_diagonal)."""
    real = np.finfo(f.a.dtype).dtype
    if f.kw["unit_diagonal"]:
        return jnp.zeros((), real), jnp.zeros((), jnp.int32)
    pl = f.placement
    i = jax.lax.broadcasted_iota(jnp.int32, f.a.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, f.a.shape, 1)
    diagonal = _placement.constrain(jnp.sum(jnp.where(i == j, f.a, 0), axis=0), pl.mesh, P())
    magnitude = jnp.abs(diagonal)
    bad = ~(magnitude > 0) | ~jnp.isfinite(magnitude)
    status = jnp.where(jnp.any(bad), jnp.argmax(bad) + 1, 0).astype(jnp.int32)
    return jnp.zeros((), real), status


def _triangle(placement, m, lower, unit_diagonal, tangent):
    """The triangle of m that the solve reads, its diagonal ones with unit_diagonal (zeros for
    a direction dA, `tangent`), in a's sharding (the rest masked, never multiplied: it may hold
    NaN)."""
    i = jax.lax.broadcasted_iota(jnp.int32, m.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, m.shape, 1)
    keep = i >= j if lower else i <= j
    if unit_diagonal:
        t = jnp.where(keep & (i != j), m, 0)
        if not tangent:
            t = t + (i == j).astype(m.dtype)
    else:
        t = jnp.where(keep, m, 0)
    return _placement.constrain(t, placement.mesh, placement.matrix_spec)


def _matvec(placement, m, v, *, tangent, trans, lower, unit_diagonal, matrix_rhs, **_):
    """op(T) v for the triangle T of m: vector-sized collectives for v split by rows, XLA's
    product for v sharded like a."""
    t = _triangle(placement, m, lower, unit_diagonal, tangent)
    op = "NTC"[trans]
    if not matrix_rhs:
        return _placement.place_like(_rules.matvec(placement, t, v, op), v, placement.mesh)
    if op != "N":
        t = _adjoint_mod.transpose(t, conjugate=op == "C")
    return _placement.place_like(_rules.product(placement, t, v), v, placement.mesh)


# The derivative rule (`rules.differentiable_solve`): x through `lax.custom_linear_solve`, the
# solves this routine's, the products op(T) v of `_matvec`.
_DIFFERENTIABLE = _rules.differentiable_solve(
    _rules.SolveRule(
        primal=lambda a, b, donate, **kw: _call(a, b, donate, **kw),
        factor=_factor,
        solve=lambda f, r: _solve(f.a, r, **f.kw)[0],
        solve_t=_solve_t,
        logdet=_status,
        placement=lambda f: f.placement,
        matvec=_matvec,
    ),
    with_logdet=False,
)
