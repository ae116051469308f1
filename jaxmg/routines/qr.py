"""qr and least_squares: Householder QR of a distributed tall matrix, and least squares by it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The engine is handed aᵀ (a transpose local to each device), so it holds A itself, and factors
# it where it lies: the rows relabeled, the columns in their order (on one device column; a
# matrix whose columns are split over devices is redistributed). csrc/routines/qr.h.
QR = _routine.EngineRoutine(
    name="qr",
    symmetric=False,
    hand_transpose=_routine.never_transpose,  # (rectangular routines are always handed aᵀ)
    returns_matrix=True,
    takes_rhs=False,
    rectangular=True,
    solution_cols=lambda n, nrhs: n,  # R: N x N
)
LEAST_SQUARES = _routine.EngineRoutine(
    name="least_squares",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    rectangular=True,
    solution_cols=lambda n, nrhs: nrhs,  # x: N x K
)


def qr(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    pad=True,
    donate=False,
):
    """The reduced QR factorization A = Q R of an M x N matrix (M >= N) sharded over a mesh.

    Householder QR where the matrix lies (cuSOLVERMp on GPUs, ScaLAPACK on CPUs); nothing is
    gathered. Works inside and outside `jax.jit`, on every 1-D and 2-D mesh.

    Args:
      a: (M, N) float32, float64, complex64 or complex128 array, M >= N, sharded over a 1-D or
        2-D mesh (rows over one mesh axis, columns over another or replicated). Columns split
        over devices are redistributed to the engine's tiles (one more copy of the matrix).
      T_A: block-cyclic tile size. None picks one that avoids padding.
      mesh, matrix_specs, in_specs, pad: as for `jaxmg.potrs`.
      return_status: also return an int32 status: 0 on success, k > 0 when column k - 1 of the
        factorization met a NaN or an infinity.
      donate: let jaxmg reuse a's buffer.

    Returns:
      (Q, R), or (Q, R, status) with return_status. Q is M x N with orthonormal columns, in a's
      sharding; R is N x N upper triangular (its lower triangle exact zeros) with a real,
      nonnegative diagonal (so Q and R of a full-rank A are the same on every mesh), in a's
      matrix spec where N divides over the mesh (rows over a's row axis otherwise, or whole on
      every device when they do not divide either); both replicated when a is. A
      rank-deficient A is factored all the
      same (R then has zeros on its diagonal); with NaN or Inf in A, Q and R are NaN on every
      device.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes (M < N), dtypes, specs, meshes or tiles, before
        any work.
    """
    return QR_API.public(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_status=return_status,
        pad=pad,
        donate=donate,
    )


def _unpack(r, n):
    """(Q, R, status) of a QR call's result. R: exact zeros below the diagonal (the engine
    leaves its Householder vectors there), all NaN when the factorization failed, and its
    diagonal real and nonnegative: each column of Q and row of R scaled by the diagonal entry's
    phase (1 where it is zero or NaN). Householder QR's signs depend on where the rows lie
    (cuSOLVERMp, ScaLAPACK and the 1-D QR relabel them differently); so scaled, Q and R of a
    full-rank A are unique, the same on every mesh and engine (A = [diag(d); 0] with d > 0 gives
    R = diag(d), as JAXMg's examples check)."""
    rows = jax.lax.broadcasted_iota(jnp.int32, r.x.shape, 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, r.x.shape, 1)
    upper = jnp.where((rows > cols) & (r.status == 0), jnp.zeros((), r.x.dtype), r.x)
    # (a masked sum, not jnp.diagonal: its gather is refused on Explicit mesh axes)
    diagonal = jnp.sum(jnp.where(rows == cols, upper, 0), axis=0)
    magnitude = jnp.abs(diagonal)
    phase = jnp.where(magnitude > 0, diagonal / jnp.where(magnitude > 0, magnitude, 1), 1)
    phase = _placement.constrain(phase.astype(upper.dtype), r.user.mesh, P())
    # (the diagonal set to its magnitude: exactly real, where the product leaves rounding)
    upper = jnp.where(rows == cols, magnitude.astype(upper.dtype), jnp.conj(phase)[:, None] * upper)
    return r.matrix * phase[None, :], _place_r(upper, r.user, n), r.status


def _place_r(m, user, n):
    if n % user.mesh_rows == 0 and n % user.mesh_cols == 0:
        return _placement.constrain(m, user.mesh, user.matrix_spec)
    return m


def _right_solve(pl, r, m):
    """m R⁻¹ for the upper triangular R (replicated: N x N), each device its own rows of m (a
    shard_map, so that the transpose stays local too: XLA's partitioning of the triangular
    solve's transpose gathered the whole of m)."""
    rows = _rules.factor_rows_spec(pl)
    r = _placement.constrain(r, pl.mesh, P())
    m = _placement.constrain(m, pl.mesh, rows)
    solve = jax.shard_map(
        lambda r, m: jax.lax.linalg.triangular_solve(r, m, left_side=False, lower=False),
        mesh=pl.mesh,
        in_specs=(P(), rows),
        out_specs=rows,
    )
    return solve(r, m)


def _qr_tangent(variant, opts, pl, primals, out, tangents):
    """As jax.numpy.linalg.qr's (M >= N): with C = Qᴴ dA R⁻¹ and Ω = L − Lᴴ (+ i Im diag C) for
    L its strictly lower part, dQ = Q (Ω − C) + dA R⁻¹ and dR = (C − Ω) R."""
    (da,), (q, r, _) = tangents, out
    n = r.shape[0]
    rep = P()
    spec = _rules.factor_spec(pl)  # (a's, except on 1 x P meshes: rows split)
    da_rinv = _placement.constrain(_right_solve(pl, r, da), pl.mesh, spec)
    q_f = _placement.constrain(q, pl.mesh, spec)
    c = _rules.product(pl, _rules.adjoint(pl, q_f, _rules.factor_adjoint_spec(pl)), da_rinv, rep)
    lower = jnp.tril(c, -1)
    omega = lower - _adjoint_mod.transpose(lower)
    omega = omega + jnp.eye(n, dtype=c.dtype) * (c - jnp.real(c).astype(c.dtype))
    dq = _rules.tall_product(pl, q_f, omega - c) + _placement.constrain(
        da_rinv, pl.mesh, pl.matrix_spec
    )
    dr = jnp.matmul(c - omega, _placement.constrain(r, pl.mesh, rep))
    return dq, _place_r(dr, pl, n), _rules.float0()


def _mode(args) -> dict:
    mode, a = args["mode"], args["a"]
    if mode not in ("reduced", "r", "complete", "raw"):
        raise ValueError(f"mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    if mode == "raw" or (mode == "complete" and a.shape[-2] != a.shape[-1]):
        raise NotImplementedError(
            f"mode={mode!r} is not provided for a {a.shape[-2]} x {a.shape[-1]} matrix: use "
            "mode='reduced' (Q with N orthonormal columns), or jax.numpy.linalg.qr on the "
            "gathered matrix"
        )
    return {}


def _by_mode(out, args):
    return out[1] if args["mode"] == "r" else out


QR_API = _factory.Routine(
    _factory.Declaration(
        routine=QR,
        outputs=(
            _factory.Output("Q", place="replicated"),
            _factory.Output("R", place="replicated"),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=lambda r, kw, b: _unpack(r, kw["a"].shape[1]),
        tangent=_qr_tangent,
        check_operands=False,
        context_work=False,  # Q takes a's place
        context_replicated=True,  # on Explicit axes: JAXMg's examples' Qᴴ Q, diag(R)
        # jaxmg.linalg.qr: mode "reduced" (Q, R), "r" (R alone), "complete" for a square a.
        linalg=_factory.Alias(qr, keywords=_mode, result=_by_mode),
    )
)


def least_squares(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    pad=True,
    donate=False,
):
    """The least-squares solution x = argmin ‖A x − b‖₂ for an M x N matrix A (M >= N).

    One distributed QR factorization and the solve with R (cuSOLVERMp's or ScaLAPACK's gels);
    the matrix is never gathered. Any number of right-hand-side columns.

    Args:
      a: (M, N) array, M >= N, sharded as for `jaxmg.qr`.
      b: (M,) or (M, K) array of a's dtype; its rows are read in a's row sharding.
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.qr`.
      return_status: also return an int32 status: 0 on success, k > 0 when A is rank deficient
        (R[k-1, k-1] exactly zero) or column k - 1 met a NaN or an infinity.

    Returns:
      x, (N,) or (N, K) as b, in b's own sharding where its extents divide over it (replicated
      when b is; else rows over a's row axis where N divides over them, or whole on every
      device); (x, status) with return_status. When the status is not 0, x is NaN on
      every device.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes (M < N, b's rows not M), dtypes, specs, meshes or
        tiles, before any work.
    """
    return LEAST_SQUARES_API.public(
        a=a,
        b=b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_status=return_status,
        pad=pad,
        donate=donate,
    )


def _lstsq_tangent(variant, opts, pl, primals, out, tangents):
    """x = (AᴴA)⁻¹ Aᴴ b: dx = R⁻¹ R⁻ᴴ (dAᴴ (b − A x) + Aᴴ (db − dA x)) with R of A's QR (one
    more distributed factorization), two triangular solves of N x K."""
    (a, b), (da, db), (x, _) = primals, tangents, out
    rep = P()
    vector = b.ndim == 1
    b2, db2, x2 = (m[:, None] if vector else m for m in (b, db, x))
    x2 = _placement.constrain(x2, pl.mesh, rep)
    _, r, _ = QR_API.differentiable()(opts, False, a)
    r = _placement.constrain(r, pl.mesh, rep)
    rows, spec, adj = (
        _rules.factor_rows_spec(pl),
        _rules.factor_spec(pl),
        _rules.factor_adjoint_spec(pl),
    )
    a, da = (_placement.constrain(m, pl.mesh, spec) for m in (a, da))
    b2, db2 = (_placement.constrain(m, pl.mesh, rows) for m in (b2, db2))
    resid = b2 - _rules.product(pl, a, x2, rows)
    rhs = _rules.product(pl, _rules.adjoint(pl, da, adj), resid, rep)
    dres = db2 - _rules.product(pl, da, x2, rows)
    rhs = rhs + _rules.product(pl, _rules.adjoint(pl, a, adj), dres, rep)
    y = jax.lax.linalg.triangular_solve(
        r, rhs, left_side=True, lower=False, conjugate_a=True, transpose_a=True
    )
    dx = jax.lax.linalg.triangular_solve(r, y, left_side=True, lower=False)
    n = a.shape[1]
    spec = pl.rhs_spec if n % pl.mesh_rows == 0 else rep
    dx = _placement.constrain(dx[:, 0] if vector else dx, pl.mesh, P(spec[0]) if vector else spec)
    return dx, _rules.float0()


def _b_work(args):
    """The context form's b_work (JAXMg 1.4.1's overwritten b): x in its first N rows, zeros
    below, in b's shape and sharding."""
    m, n = args["a"].shape

    def finish(outputs):
        if "work" in outputs:
            x = outputs["x"]
            outputs["b_work"] = jnp.pad(x, ((0, m - n),) + ((0, 0),) * (x.ndim - 1))
        return outputs

    return args, finish


class _LeastSquares(_factory.Routine):
    """least_squares' forms: the context form also returns b_work (`_b_work`)."""

    def around(self, args):
        return _b_work(args)


LEAST_SQUARES_API = _LeastSquares(
    _factory.Declaration(
        routine=LEAST_SQUARES,
        outputs=(
            _factory.Output("b_work", place="rhs", context=True),
            _factory.Output("x", place="rhs"),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=lambda r, kw, b: (r.x, r.status),
        tangent=_lstsq_tangent,
        check_operands=False,
    )
)
