"""Cases of inv, slogdet and factor once / solve many (cho_factor + cho_solve, lu_factor +
lu_solve(factor, b)), shared by the CPU and GPU workers; each returns a record with "ok".

Matrices are the same NumPy arrays on every process; results are gathered and compared with
NumPy in complex128 with tolerances scaled by n * eps of the dtype.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import PartitionSpec as P
from linalg_cases import (
    A_SPEC,
    B_SPEC,
    DTYPES,
    engine_path,
    gather,
    general,
    local_scalars,
    measure,
    place,
    rhs,
    spd,
)

ROUTINES = ("inv", "slogdet", "cho", "lu")


def signed_general(n, dtype, seed):
    """A general nonsingular matrix whose determinant has a nontrivial sign (phase): general()
    with its rows permuted by a random permutation, one row negated and, for complex dtypes,
    one row turned by a phase."""
    a = general(n, dtype, seed)
    rng = np.random.default_rng(seed + 11)
    a = a[rng.permutation(n)]
    a[n // 3] *= -1
    if np.issubdtype(dtype, np.complexfloating):
        a[n // 2] *= np.exp(0.7j)
    return a


def factor_name(routine, dtype_name, n, tile, variant=""):
    return f"{routine}/{dtype_name}/n{n}/T{tile}" + (f"/{variant}" if variant else "")


def _platform(mesh):
    return mesh.devices.flat[0].platform.replace("gpu", "cuda")


def _slogdet_errors(sign, logabsdet, a):
    ref_sign, ref_log = np.linalg.slogdet(a.astype(np.complex128))
    n = a.shape[0]
    return (
        abs(complex(sign) - complex(ref_sign)),
        abs(float(np.real(logabsdet)) - ref_log),
        (max(1.0, abs(ref_log) / n)),
    )


def factor_case(mesh, routine, dtype_name, n, tile, variant=""):
    """One routine on one dtype and tile; variant: "jit" (inside a user's jit; for factors the
    factor crosses from one jitted function to another), "donate", "transposed" (lu: the engine
    is handed aᵀ), "blocked" (inv: cpu_inverses=blocked, the blocked LU inverse on CPUs,
    and A⁻ᵀ, jaxmg.routines.inv.inverse_transposed, from it too)."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    rec = dict(case=factor_name(routine, dtype_name, n, tile, variant), n=n, eps=eps)
    tol = 20 * n * eps
    donate = variant == "donate"
    jit = variant == "jit"
    if routine == "inv":
        a = signed_general(n, dtype, n)
        ap = place(a, mesh, A_SPEC)
        sharding = ap.sharding
        fn = lambda m: jaxmg.inv(m, T_A=tile, donate=donate, return_status=True)  # noqa: E731
        blocked = variant == "blocked"
        with jaxmg.config.override(**({"cpu_inverses": "blocked"} if blocked else {})):
            x, status = jax.jit(fn)(ap) if jit else fn(ap)
            if blocked:
                from jaxmg.routines.inv import inverse_transposed

                xt = gather(inverse_transposed(ap, T_A=tile)).astype(np.complex128)
        xg = gather(x).astype(np.complex128)
        a64 = a.astype(np.complex128)
        scale = np.linalg.norm(a64, 2) * np.linalg.norm(xg, 2)
        rec["residual"] = float(np.abs(a64 @ xg - np.eye(n)).max() / scale)
        rec["residual_tol"] = tol
        rec["same_sharding"] = bool(x.sharding.is_equivalent_to(sharding, 2))
        per_rank = local_scalars(status)
        rec["status"] = int(np.real(per_rank[0][0]))
        rec["ranks_agree"] = bool(np.all(per_rank == per_rank[0]))
        rec["ok"] = (
            rec["residual"] <= tol and rec["same_sharding"] and rec["status"] == 0
        ) and rec["ranks_agree"]
        if blocked:  # A⁻ᵀ: the transpose, not the adjoint
            rec["transposed_error"] = float(np.abs(xt - xg.T).max() / np.abs(xg).max())
            rec["ok"] = rec["ok"] and rec["transposed_error"] <= tol
        return rec
    if routine == "slogdet":
        a = signed_general(n, dtype, n)
        fn = lambda m: jaxmg.slogdet(m, T_A=tile, donate=donate, return_status=True)  # noqa: E731
        path = "transposed" if variant == "transposed" else "default"
        with engine_path("lu_solve", path, _platform(mesh)):
            ap = place(a, mesh, A_SPEC)
            sign, logabsdet, status = jax.jit(fn)(ap) if jit else fn(ap)
        per_rank = local_scalars(sign, logabsdet, status)
        sign_err, log_err, scale = _slogdet_errors(per_rank[0][0], per_rank[0][1], a)
        rec.update(sign_error=sign_err, logdet_err=log_err, logdet_tol=tol * scale)
        rec["status"] = int(np.real(per_rank[0][2]))
        rec["ranks_agree"] = bool(np.all(per_rank == per_rank[0]))
        rec["ok"] = (
            sign_err <= tol and log_err <= rec["logdet_tol"] and rec["status"] == 0
        ) and rec["ranks_agree"]
        return rec
    # Factor once, solve many: a matrix b and a vector b with one factor.
    a = spd(n, dtype, n) if routine == "cho" else signed_general(n, dtype, n)
    b1, b2 = rhs(n, 3, dtype, n), rhs(n, 0, dtype, n + 1)
    factor_fn = jaxmg.cho_factor if routine == "cho" else jaxmg.lu_factor
    solve_fn = jaxmg.cho_solve if routine == "cho" else jaxmg.lu_solve
    path = "transposed" if variant == "transposed" else "default"
    with engine_path("lu_solve", path, _platform(mesh)):
        ap = place(a, mesh, A_SPEC)
        factor = lambda m: factor_fn(m, T_A=tile, donate=donate)  # noqa: E731
        f = jax.jit(factor)(ap) if jit else factor(ap)
        solve = jax.jit(solve_fn) if jit else solve_fn
        x1 = solve(f, place(b1, mesh, B_SPEC))
        x2 = solve(f, place(b2, mesh, P("pr")))
    assert x1.shape == b1.shape and x2.shape == b2.shape, (x1.shape, x2.shape)
    r1 = measure("", a, b1, gather(x1))
    r2 = measure("", a, b2, gather(x2))
    rec.update(residual=max(r1["residual"], r2["residual"]), residual_tol=r1["residual_tol"])
    if routine == "cho":
        per_rank = local_scalars(f.logdet, f.status)
        ref = float(np.linalg.slogdet(a.astype(np.complex128))[1])
        rec.update(logdet_err=abs(float(np.real(per_rank[0][0])) - ref))
        rec["logdet_tol"] = tol * max(1.0, abs(ref) / n)
        sign_ok = True
        status = per_rank[0][1]
    else:
        per_rank = local_scalars(f.sign, f.logabsdet, f.status)
        sign_err, log_err, scale = _slogdet_errors(per_rank[0][0], per_rank[0][1], a)
        rec.update(sign_error=sign_err, logdet_err=log_err, logdet_tol=tol * scale)
        sign_ok = sign_err <= tol
        status = per_rank[0][2]
    rec["status"] = int(np.real(status))
    rec["ranks_agree"] = bool(np.all(per_rank == per_rank[0]))
    rec["ok"] = (r1["ok"] and r2["ok"] and sign_ok and rec["logdet_err"] <= rec["logdet_tol"]) and (
        rec["status"] == 0 and rec["ranks_agree"]
    )
    return rec


def factor_failure_case(mesh, routine, kind, n, tile):
    """routine on a singular (exactly: a zero row and column), not positive definite, or
    non-finite matrix: NaN (or NumPy's 0, -inf for slogdet of a singular matrix) and the same
    status > 0 on every rank."""
    import jaxmg

    if routine == "cho":
        a = spd(n, np.float64, 9)
        a[n // 2, n // 2] = -10.0 * n
    else:
        a = signed_general(n, np.float64, 9)
        if kind == "singular":
            a[n // 3, :] = 0.0
            a[:, n // 2] = 0.0
        else:
            a[n // 4, n // 5] = np.nan
    ap = place(a, mesh, A_SPEC)
    rec = dict(case=f"{routine}/{kind}")
    if routine == "inv":
        x, status = jaxmg.inv(ap, T_A=tile, return_status=True)
        values, scalars = gather(x), local_scalars(status)
        rec["all_nan"] = bool(np.all(np.isnan(values)))
    elif routine == "slogdet":
        sign, logabsdet, status = jaxmg.slogdet(ap, T_A=tile, return_status=True)
        scalars = local_scalars(sign, logabsdet, status)
        s, ld = scalars[0][0], np.real(scalars[0][1])
        rec.update(sign=str(s), logabsdet=str(ld))
        if kind == "singular":
            rec["numpy_convention"] = bool(s == 0 and ld == -np.inf)
        else:
            rec["numpy_convention"] = bool(np.isnan(s) and np.isnan(ld))
    else:
        factor_fn = jaxmg.cho_factor if routine == "cho" else jaxmg.lu_factor
        solve_fn = jaxmg.cho_solve if routine == "cho" else jaxmg.lu_solve
        f = factor_fn(ap, T_A=tile)
        x = solve_fn(f, place(rhs(n, 2, np.float64, 1), mesh, B_SPEC))
        values, scalars = gather(x), local_scalars(f.status)
        rec["all_nan"] = bool(np.all(np.isnan(values)))
    statuses = [int(np.real(s)) for s in scalars[:, -1]]
    rec["status_all_ranks"] = statuses
    rec["ranks_agree"] = bool(np.all(np.isnan(scalars) == np.isnan(scalars[0])))
    rec["ok"] = (
        len(set(statuses)) == 1
        and statuses[0] > 0
        and rec.get("all_nan", True)
        and rec.get("numpy_convention", True)
        and rec["ranks_agree"]
    )
    return rec
