"""Mixed precision solves: a float64 (complex128) answer from a float32 (complex64) factor.

The matrix is factored in the low precision with the engine's own routine (`cho_factor`,
`lu_factor` on A.astype(factor_dtype)); the first solution comes from that factor, and is then
refined in float64: r = b − A x (a sharded product of XLA's: the matrix is never gathered) and
a correction from the low-precision factor. Classical refinement first; where it stalls (the
backward error of a column falls by less than `STALL` in a step, or too slowly to converge
within `MAX_STEPS`), each further step solves the correction equation A d = r by GMRES in
float64 preconditioned by the low-precision factor, applied in float64 (`RESTART` iterations,
one cycle a step: GMRES-IR, as HPL-MxP does). Each right-hand side column stops when its
normwise backward error

    ‖r‖∞ / (‖A‖∞ ‖x‖∞ + ‖b‖∞) ≤ max(c N, TOLERANCE_FLOOR) · ε(float64),  c = TOLERANCE_FACTOR.

When the low-precision factorization fails, refinement has not converged after `MAX_STEPS`
steps or a GMRES-IR step shows it will not (`SLOW`), the solve falls back by itself to the
float64 factorization (`lax.cond`, one branch on every process: the predicate is made of
replicated norms), so it never returns a worse answer than the float64 solve. Every step runs
inside one `jax.jit`, in `lax.while_loop` and `lax.cond`.

Derivatives: the refined solve is the solver of `lax.custom_linear_solve` whose matrix-vector
product is A x in float64, so that jax.grad and jax.jvp with respect to A and b go through
the same refined solves (with Aᵀ for the transpose).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The accepted factor dtype of each input dtype.
LOW_PRECISION = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}
# Stop a column at backward error ≤ max(c N, TOLERANCE_FLOOR) · ε(float64), c =
# TOLERANCE_FACTOR (`tolerance`). A backward-stable float64 solve reaches about ε, and so does
# refinement, to within the rounding of the residual's sums (at most N ε, typically far less).
# The forward error is about κ times the backward error: c = 1/64 keeps it near the float64
# solve's (at N = 600, κ = 1e7, c = 1/2 left it 100 times larger, c = 1/64 within a few times,
# one or two more O(N²) steps); the floor of 4 ε keeps small matrices, where c N is below the
# rounding of x itself, from falling back for nothing. (HPL-MxP accepts 16 N ε.)
TOLERANCE_FACTOR = 1 / 64
TOLERANCE_FLOOR = 4
# Refinement steps before the fallback (classical steps and GMRES cycles together).
MAX_STEPS = 10
# A classical step that reduces the worst unconverged column's backward error by less than
# this factor, or at a pace that would not converge within MAX_STEPS, switches the remaining
# steps to GMRES-IR.
STALL = 0.5
# GMRES iterations per cycle (one cycle per GMRES-IR step).
RESTART = 10
# A GMRES-IR step whose reduction of the worst unconverged column's backward error, kept up,
# would need more than SLOW * MAX_STEPS steps in all ends refinement: the solve falls back at
# once instead of after the steps left (a TF32 factor at κ = 1e4, N = 32768 on one H100 took
# its 10 steps and then the fallback: 0.52 s against the float64 solve's 0.33 s). GMRES-IR
# often speeds up after its first cycles, hence the margin.
SLOW = 2
# Refinement is not tried where the condition number estimated from the low-precision factor,
# κ₁ ≈ ‖A‖₁ ‖A_lo⁻¹‖₁, times ε of the factor's dtype exceeds this: there classical refinement
# diverges and GMRES-IR needs far more than MAX_STEPS cycles (the contraction ‖I − A_lo⁻¹A‖
# is about κ₁ ε / 20), so the solve falls back to the float64 factorization at once instead of
# after MAX_STEPS steps that cost up to 20 float64 solves (float32, N = 1024, one CPU process:
# κ₂ = 1e8 gives κ₁ ε ≈ 3e3 and never converged; at N = 24, κ₁ ε ≈ 40 and GMRES-IR converges).
HOPELESS = 512.0


def tolerance(n: int) -> float:
    """The backward error at which refinement stops, for a matrix of order n."""
    return max(TOLERANCE_FACTOR * n, TOLERANCE_FLOOR) * float(np.finfo(np.float64).eps)


# The paths a mixed solve reports (`MixedInfo.path`).
PATHS = ("mixed", "gmres", "fallback")
MIXED, GMRES, FALLBACK = 0, 1, 2


class MixedInfo(NamedTuple):
    """How a mixed precision solve went (`return_info=True`).

    path: int32 scalar, replicated: 0 "mixed" (classical refinement converged), 1 "gmres"
      (GMRES-IR converged after classical refinement stalled), 2 "fallback" (the float64
      factorization ran: the low-precision one failed, or refinement did not converge within
      `MAX_STEPS` or stopped at a pace too slow to, `SLOW`); `info.path_name()` gives the
      name of a concrete value. A matrix that the low-precision Cholesky factorization finds
      not symmetric (status -1) reports 0: no fallback runs for it.
    iterations: int32 scalar: the refinement steps taken (a GMRES-IR step is one cycle of
      `RESTART` GMRES iterations); 0 where the estimate below ruled refinement out.
    backward_error: float64, one per right-hand side column (a scalar for a vector b): the
      normwise backward error ‖b − A x‖∞ / (‖A‖∞ ‖x‖∞ + ‖b‖∞) of the x returned.
    condition_estimate: float64 scalar, replicated: κ₁(A) ≈ ‖A‖₁ ‖A_lo⁻¹‖₁, from the
      low-precision factor A_lo (Hager's and Higham's estimates of ‖A_lo⁻¹‖₁, three solves of
      one or two columns; a lower bound, usually within a factor of 3). Past about 1 / ε of the
      factor's dtype the factor no longer resolves A and the estimate stops growing; where it
      exceeds `HOPELESS` / ε the solve falls back without refinement. NaN where the
      low-precision factorization failed.
    """

    path: jax.Array
    iterations: jax.Array
    backward_error: jax.Array
    condition_estimate: jax.Array

    def path_name(self) -> str:
        """The name of the path (outside jit): "mixed", "gmres" or "fallback"."""
        path = self.path
        if isinstance(path, jax.Array):  # (replicated: this process's copy)
            path = path.addressable_data(0)
        return PATHS[int(np.asarray(path))]


def check_factor_dtype(a, factor_dtype) -> np.dtype:
    """The low-precision dtype to factor `a` in: float32 for float64 input, complex64 for
    complex128 (a dtype or its name). ValueError for anything else, before any work."""
    given = np.dtype(a.dtype)
    want = LOW_PRECISION.get(given)
    try:
        asked = np.dtype(factor_dtype)
    except TypeError:
        asked = None
    if want is None:
        raise ValueError(
            f"factor_dtype needs a float64 or complex128 matrix, got {given}: mixed precision "
            "factors in float32 (complex64) and refines in float64 (complex128); pass "
            "factor_dtype=None for a matrix of this dtype"
        )
    if asked != want:
        raise ValueError(
            f"factor_dtype={factor_dtype!r} is not available for a {given} matrix: pass "
            f"factor_dtype=jnp.{want.name} (or {want.name!r}), or None for the {given} "
            "factorization"
        )
    return want


def check_mixed_flags(*, donate, return_logdet) -> None:
    """The flags a mixed precision solve refuses, before any work."""
    if donate:
        raise ValueError(
            "donate=True cannot be combined with factor_dtype: refinement reads the original "
            "matrix (pass donate=False)"
        )
    if return_logdet:
        raise ValueError(
            "return_logdet=True cannot be combined with factor_dtype: the low-precision factor "
            "gives log det A only to float32 accuracy; call without factor_dtype for it"
        )


def backward_error(x, b, r, a_norm):
    """‖r‖∞ / (‖A‖∞ ‖x‖∞ + ‖b‖∞) per column of (N, K) arrays, replicated."""

    def col_max(v):
        return jnp.max(jnp.abs(v), axis=0)

    num, den = col_max(r), a_norm * col_max(x) + col_max(b)
    # b = 0 has the exact answer x = 0 (0 / 0 here): backward error 0.
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.where(num > 0, jnp.inf, 0.0))


def _inf_norm(a, transpose):
    """‖op(A)‖∞ (the largest row sum of |A|, of |Aᵀ| with transpose): a reduction, replicated."""
    return jnp.max(jnp.sum(jnp.abs(a), axis=0 if transpose else 1))


def refine(
    user,
    a,
    b2,
    lo_status,
    low_solve,
    low_solve_adjoint,
    precise_solver,
    high_solve,
    transpose: bool,
    hermitian: bool = False,
):
    """(x, status, info) of op(A) x = b2 (op: Aᵀ with transpose; b2 (N, K) of A's dtype),
    refined with a low-precision factor, inside the caller's jit.

    user: a's placement; a: A itself (its derivative stopped); lo_status: the low-precision
    factorization's status; low_solve(r) -> op(A_lo)⁻¹ r and low_solve_adjoint(r) ->
    op(A_lo)ᴴ⁻¹ r for r in the factor's dtype (the results in any dtype); precise_solver() ->
    a function r -> op(A_lo)⁻¹ r for r in A's dtype, the factor's entries widened to it once
    per GMRES cycle, where precise_solver is called (GMRES-IR's preconditioner: applied in the
    low precision, its rounding error, about κ ε(low) relative, is as large as the factor's
    own, and GMRES stalls where κ ε(low) passes 1); high_solve() ->
    (x, status) of the float64 factorization (the fallback, under `lax.cond`: run only when
    taken); hermitian: A is (‖A‖₁ = ‖A‖∞, one reduction fewer over A).
    """
    tol = tolerance(a.shape[0])
    rows = P(user.row_axis, None)
    op = "T" if transpose else "N"

    def constrain_rows(v):
        return _placement.constrain(v, user.mesh, rows)

    def precondition(r):
        """op(A_lo)⁻¹ r in r's dtype, each column scaled to the unit ∞-norm in between (the
        residuals are small: no underflow in the low precision)."""
        scale = jnp.max(jnp.abs(r), axis=0)
        scale = jnp.where(scale > 0, scale, 1.0).astype(r.dtype)
        y = low_solve((r / scale).astype(LOW_PRECISION[np.dtype(r.dtype)]))
        return constrain_rows(y.astype(r.dtype) * scale)

    b2 = constrain_rows(b2)
    a_norm = _inf_norm(a, transpose)
    low = LOW_PRECISION[np.dtype(b2.dtype)]
    kappa = (a_norm if hermitian else _inf_norm(a, not transpose)) * _inverse_one_norm(
        a.shape[0],
        b2.dtype,
        lambda r: low_solve(r.astype(low)).astype(r.dtype),
        lambda r: low_solve_adjoint(r.astype(low)).astype(r.dtype),
        constrain_rows,
    )
    kappa = jnp.where(lo_status == 0, kappa, jnp.nan)  # (no estimate from a failed factor)
    hopeless = kappa * float(np.finfo(low).eps) > HOPELESS

    def residual(x):
        return constrain_rows(b2 - _rules.matvec(user, a, x, op))

    def berr(x, r):
        return backward_error(x, b2, r, a_norm)

    x0 = precondition(b2)
    r0 = residual(x0)
    e0 = berr(x0, r0)

    def classical(x, r, e):
        x_new = x + precondition(r)
        r_new = residual(x_new)
        return x_new, r_new, berr(x_new, r_new)

    def gmres(x, r, e):
        # The correction equation A d = r, preconditioned: A_lo⁻¹ A d = A_lo⁻¹ r, A_lo⁻¹ applied
        # in A's precision (Carson and Higham's GMRES-IR), with the factor widened here, not in
        # each of the cycle's iterations.
        precise_solve = precise_solver()

        def precondition_precisely(r):
            return constrain_rows(precise_solve(r))

        d = _gmres_cycle(
            lambda v: precondition_precisely(constrain_rows(_rules.matvec(user, a, v, op))),
            precondition_precisely(r),
            constrain_rows,
        )
        x_new = x + d
        r_new = residual(x_new)
        return x_new, r_new, berr(x_new, r_new)

    def running(state):
        x, r, e, steps, mode, slow = state
        unconverged = jnp.any(~(e <= tol))
        return (
            (lo_status == 0)
            & ~hopeless
            & ~slow
            & unconverged
            & (steps < MAX_STEPS)
            & jnp.all(jnp.isfinite(e))
        )

    def step(state):
        x, r, e, steps, mode, slow = state
        x_new, r_new, e_new = jax.lax.cond(mode == MIXED, classical, gmres, x, r, e)
        done = e <= tol
        better = (e_new < e) & ~done
        # Keep each column's better answer (a diverging step is not taken).
        x_kept = jnp.where(better[None, :], x_new, x)
        r_kept = jnp.where(better[None, :], r_new, r)
        e_kept = jnp.where(better, e_new, e)
        ratio = jnp.max(jnp.where(done, 0.0, e_new / jnp.where(e > 0, e, 1.0)))
        # The steps in all that this step's pace would need: a classical step that would not
        # converge within MAX_STEPS counts as stalled (GMRES-IR takes over), a GMRES-IR step
        # that would need more than SLOW times MAX_STEPS ends refinement (the solve falls back
        # now rather than after the steps left).
        worst = jnp.max(jnp.where(e_kept <= tol, 0.0, e_kept))
        needed = steps + 1 + jnp.log(tol / worst) / jnp.log(jnp.clip(ratio, 1e-300, None))
        unpromising = (worst > tol) & (ratio >= 1)
        slow = (mode == GMRES) & (unpromising | ((worst > tol) & (needed > SLOW * MAX_STEPS)))
        late = (worst > tol) & (needed > MAX_STEPS)
        stalled = ~(ratio <= STALL) | late  # (NaN: stalled)
        mode = jnp.where((mode == MIXED) & stalled, GMRES, mode)
        return x_kept, r_kept, e_kept, steps + 1, mode, slow

    state = (x0, r0, e0, jnp.int32(0), jnp.int32(MIXED), jnp.bool_(False))
    x, r, e, steps, mode, slow = jax.lax.while_loop(running, step, state)
    converged = (lo_status == 0) & jnp.all(e <= tol)
    # A matrix found not symmetric stays reported so (NaN and the status), without fallback.
    fall_back = ~converged & (lo_status != _routine.NOT_SYMMETRIC)

    def fallback(x, status, e):
        x, status = high_solve()
        x = constrain_rows(x)
        return x, status, berr(x, residual(x))

    def keep(x, status, e):
        return x, status, e  # (e is x's: each step keeps a column with its residual)

    x, status, e = jax.lax.cond(fall_back, fallback, keep, x, lo_status, e)
    path = jnp.where(fall_back, FALLBACK, jnp.where(mode == GMRES, GMRES, MIXED))
    info = MixedInfo(path.astype(jnp.int32), steps.astype(jnp.int32), e, kappa)
    return x, status, info


def _inverse_one_norm(n, dtype, solve, solve_adjoint, constrain_rows):
    """An estimate of ‖B‖₁ (a lower bound) for B given by its products: solve(v) = B v and
    solve_adjoint(v) = Bᴴ v for v (N, K) in `dtype`, each a sharded solve. Hager's estimate
    (Higham's LAPACK xLACON) carried one step: ‖B x‖₁ for x = 1/N, then for the unit vector of
    the largest entry of Bᴴ sign(B x), with Higham's alternating vector, whose image is large
    where Hager's misses (N ≥ 2): three solves in all, the first of two columns. Replicated."""
    real = jnp.finfo(dtype).dtype
    i = jnp.arange(n, dtype=real)
    x = jnp.full((n,), 1.0 / n, real)
    alternating = jnp.where(i % 2 == 0, 1.0, -1.0) * (1 + i / max(n - 1, 1))
    y = solve(constrain_rows(jnp.stack([x, alternating], axis=1).astype(dtype)))
    column_norms = jnp.sum(jnp.abs(y), axis=0)
    magnitude = jnp.abs(y[:, :1])
    sign = jnp.where(magnitude > 0, y[:, :1] / jnp.where(magnitude > 0, magnitude, 1), 1)
    z = solve_adjoint(constrain_rows(sign.astype(dtype)))
    j = jnp.argmax(jnp.abs(z[:, 0]))
    unit = constrain_rows((jnp.arange(n) == j).astype(dtype)[:, None])
    second = jnp.sum(jnp.abs(solve(unit)))
    estimate = jnp.maximum(jnp.maximum(column_norms[0], second), 2 * column_norms[1] / (3 * n))
    return estimate.astype(jnp.float64 if real == jnp.float64 else real)


def _gmres_cycle(operator, z, constrain_rows):
    """One cycle of `RESTART` GMRES iterations on operator(d) = z from d = 0, for each column of
    z (N, K) independently: the Krylov basis orthogonalized by classical Gram-Schmidt twice
    (the inner products are sums over the sharded rows: replicated), the small least-squares
    problem solved on every device (a pseudo-inverse of the Hessenberg matrix, robust where a
    column's basis breaks down early). Returns the correction d (N, K)."""
    n, k = z.shape
    m = RESTART
    real = jnp.finfo(z.dtype).dtype
    tiny = jnp.finfo(real).tiny

    def norm(v):
        return jnp.sqrt(jnp.sum(jnp.abs(v) ** 2, axis=0))

    beta = norm(z)
    v0 = z / jnp.where(beta > 0, beta, 1.0).astype(z.dtype)
    # The basis (m + 1, N, K), its rows sharded as z's; updated through masks, not scatters
    # (a scatter into a sharded array needs its output sharding said on Explicit mesh axes).
    slots = jnp.arange(m + 1)

    def one_hot(j):
        return (slots == j).astype(z.dtype)

    basis = one_hot(0)[:, None, None] * v0[None]
    hessenberg = jnp.zeros((m + 1, m, k), z.dtype)

    def arnoldi(j, carry):
        basis, hessenberg = carry
        w = operator(jnp.sum(basis * one_hot(j)[:, None, None], axis=0))
        w_norm = norm(w)
        mask = (slots <= j)[:, None].astype(z.dtype)
        h = jnp.zeros((m + 1, k), z.dtype)
        for _ in range(2):  # classical Gram-Schmidt, twice
            c = jnp.sum(jnp.conj(basis) * w[None], axis=1) * mask
            w = constrain_rows(w - jnp.sum(basis * c[:, None, :], axis=0))
            h = h + c
        h_next = norm(w)
        # A column whose new direction vanishes (breakdown) adds a zero vector.
        alive = h_next > 1e-14 * jnp.maximum(w_norm, tiny)
        v_next = jnp.where(alive[None, :], w / jnp.where(alive, h_next, 1.0).astype(z.dtype), 0)
        h = h + one_hot(j + 1)[:, None] * jnp.where(alive, h_next, 0).astype(z.dtype)[None, :]
        basis = basis + one_hot(j + 1)[:, None, None] * v_next[None]
        column = (jnp.arange(m) == j).astype(z.dtype)
        hessenberg = hessenberg + h[:, None, :] * column[None, :, None]
        return basis, hessenberg

    basis, hessenberg = jax.lax.fori_loop(0, m, arnoldi, (basis, hessenberg))
    g = beta.astype(z.dtype)[:, None] * one_hot(0)[None, :]  # β e₁ per column
    h_batch = jnp.transpose(hessenberg, (2, 0, 1))  # (K, m + 1, m)
    y = jnp.einsum("kij,kj->ki", jnp.linalg.pinv(h_batch), g)  # (K, m)
    d = jnp.sum(basis[:m] * jnp.transpose(y)[:, None, :], axis=0)
    return constrain_rows(d)
