"""Cases of qr and least_squares, shared by the CPU and GPU workers; each returns a record with
"ok".

Matrices are the same NumPy arrays on every process; results are gathered and compared in
complex128 with tolerances scaled by m * eps of the dtype: reconstruction ‖QR − A‖ / ‖A‖,
orthogonality ‖QᴴQ − I‖, exact zeros below R's diagonal, and for least squares the residual
of the normal equations ‖Aᴴ(A x − b)‖ / (‖A‖ (‖A‖ ‖x‖ + ‖b‖)), which a backward-stable solve
keeps at a few eps whatever the conditioning.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import PartitionSpec as P
from linalg_cases import A_SPEC, B_SPEC, DTYPES, gather, local_scalars, place, rhs


def qr_name(routine, dtype_name, m, n, tile, k=None, variant=""):
    name = f"{routine}/{dtype_name}/{m}x{n}/T{tile}" + ("" if k is None else f"/k{k}")
    return name + (f"/{variant}" if variant else "")


def tall(m, n, dtype, seed, zero_column=None):
    """Gaussian m x n entries (complex for complex dtypes); optionally one column exactly 0."""
    rng = np.random.default_rng(seed + 17)
    x = rng.standard_normal((m, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((m, n))
    if zero_column is not None:
        x[:, zero_column] = 0
    return x.astype(dtype)


def _tolerance(m, dtype):
    return 10 * m * float(np.finfo(dtype).eps)


def qr_case(mesh, routine, dtype_name, m, n, tile, k=3, variant=""):
    """qr: reconstruction, orthogonality, R upper triangular with a real nonnegative diagonal, Q
    in a's sharding; least_squares: normal-equation residual, x's shape. variant: "jit" (inside
    a user's jit), "donate", "rank-deficient" (qr of a matrix with a zero column: still a valid
    factorization), "chunked" (R and x gathered in chunks of 5 rows), "scalapack" (the CPU
    engine's p?geqrf and p?orgqr where its 1-D QR is the default: 1 x P grids)."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    tol = _tolerance(m, dtype)
    rec = dict(n=n, m=m, eps=float(np.finfo(dtype).eps), tol=tol)
    if variant == "chunked":  # R's rows gathered 5 at a time (several chunks per block)
        from jaxmg._core.testing import hooks

        with hooks(rows_per_chunk=5):
            return qr_case(mesh, routine, dtype_name, m, n, tile, k)
    if variant == "scalapack":
        with jaxmg.config.override(cpu_qr="scalapack"):
            return qr_case(mesh, routine, dtype_name, m, n, tile, k)
    donate = variant == "donate"
    a = tall(m, n, dtype, m + n, zero_column=n // 2 if variant == "rank-deficient" else None)
    ap = place(a, mesh, A_SPEC)
    spec = ap.sharding.spec
    a64 = a.astype(np.complex128)
    if routine == "qr":

        def fn(x):
            return jaxmg.qr(x, T_A=tile, donate=donate, return_status=True)

        q, r, status = jax.jit(fn)(ap) if variant == "jit" else fn(ap)
        qg, rg = gather(q).astype(np.complex128), gather(r).astype(np.complex128)
        rec.update(
            reconstruction=float(np.linalg.norm(qg @ rg - a64) / np.linalg.norm(a64)),
            orthogonality=float(np.linalg.norm(qg.conj().T @ qg - np.eye(n))),
            below_diagonal=float(np.abs(np.tril(rg, -1)).max()),
            # R's diagonal real and nonnegative (Q and R the same on every mesh)
            diagonal_real_nonnegative=bool(
                np.all(np.diag(rg).real >= 0) and np.all(np.diag(rg).imag == 0)
            ),
            q_spec=str(q.sharding.spec),
            shapes=[list(q.shape), list(r.shape)],
        )
        statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
        rec["statuses"] = statuses
        rec["ok"] = bool(
            rec["reconstruction"] <= tol
            and rec["orthogonality"] <= tol
            and rec["below_diagonal"] == 0.0
            and rec["diagonal_real_nonnegative"]
            and q.sharding.spec == spec
            and rec["shapes"] == [[m, n], [n, n]]
            and statuses == [0] * len(statuses)
        )
        return rec
    b = rhs(m, k, dtype, m)
    bp = place(b, mesh, B_SPEC if k else P(B_SPEC[0]))

    def solve(x, y):
        return jaxmg.least_squares(x, y, T_A=tile, donate=donate, return_status=True)

    x, status = jax.jit(solve)(ap, bp) if variant == "jit" else solve(ap, bp)
    xg = gather(x).astype(np.complex128)
    b64 = b.astype(np.complex128)
    xm, bm = xg.reshape(n, -1), b64.reshape(m, -1)
    norm_a = np.linalg.norm(a64, 2)
    normal = np.linalg.norm(a64.conj().T @ (a64 @ xm - bm)) / (
        norm_a * (norm_a * np.linalg.norm(xm) + np.linalg.norm(bm))
    )
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec.update(normal_residual=float(normal), shape=list(x.shape), statuses=statuses)
    rec["ok"] = bool(
        normal <= tol and rec["shape"] == ([n, k] if k else [n]) and statuses == [0] * len(statuses)
    )
    return rec


def qr_failure_case(mesh, routine, kind, m, n, tile):
    """kind: "nan" (NaN in A: status > 0 and NaN outputs on every rank), "rank-deficient"
    (least squares with a zero column: status > 0, NaN x everywhere), "wide" (M < N) and
    "bad-b" (b's rows are not M): the same ValueError on every rank, before any work."""
    import jaxmg

    a = tall(m, n, np.float64, 5, zero_column=n // 3 if kind == "rank-deficient" else None)
    if kind == "nan":
        a[m // 2, n // 2] = np.nan
    b = rhs(m, 2, np.float64, 5)
    rec = dict(kind=kind)
    if kind in ("wide", "bad-b"):
        try:
            if kind == "wide":
                jaxmg.qr(place(a.T.copy(), mesh, A_SPEC), T_A=tile)
            else:
                short = b[: m - 12]  # still divisible over 1 to 4 devices
                jaxmg.least_squares(place(a, mesh, A_SPEC), place(short, mesh, B_SPEC))
        except ValueError as e:
            rec["message"] = str(e)
        rec["ok"] = "message" in rec and ("M >= N" in rec["message"] or "b must" in rec["message"])
        return rec
    ap = place(a, mesh, A_SPEC)
    if routine == "qr":
        q, r, status = jaxmg.qr(ap, T_A=tile, return_status=True)
        outputs = [gather(q), gather(r)]
    else:
        x, status = jaxmg.least_squares(ap, place(b, mesh, B_SPEC), T_A=tile, return_status=True)
        outputs = [gather(x)]
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec.update(
        statuses=statuses,
        all_nan=bool(all(np.all(np.isnan(o)) for o in outputs)),
    )
    rec["ok"] = rec["all_nan"] and statuses[0] > 0 and len(set(statuses)) == 1
    return rec


def qr_plan(m, tiles=(None, 4, 5), lstsq_tiles=(None, 5)):
    """[(name, kind, params)]: qr on m x m/2 over four dtypes and tiles (automatic, dividing,
    padding), a square matrix, a user's jit, donation, a zero column; least_squares over four
    dtypes, a vector b, one right-hand side, a square matrix, a user's jit; failures."""
    from solve_plan import DTYPE_NAMES

    n = m // 2
    plan = []

    def add(routine, dtype_name, mm, nn, tile, k=None, variant=""):
        params = dict(
            routine=routine, dtype_name=dtype_name, m=mm, n=nn, tile=tile, variant=variant
        )
        if k is not None:
            params["k"] = k
        plan.append((qr_name(routine, dtype_name, mm, nn, tile, k, variant), "qr", params))

    for dtype_name in DTYPE_NAMES:
        for tile in tiles:
            add("qr", dtype_name, m, n, tile)
        for tile in lstsq_tiles:
            add("lstsq", dtype_name, m, n, tile, k=3)
    add("qr", "float64", m, m, 5)
    add("qr", "complex128", m, m, None)
    for variant in ("jit", "donate", "rank-deficient", "chunked", "scalapack"):
        add("qr", "float64", m, n, 4, variant=variant)
    add("lstsq", "complex128", m, n, 5, k=3, variant="chunked")
    add("lstsq", "float64", m, n, 4, k=0)
    add("lstsq", "complex128", m, n, 4, k=1)
    add("lstsq", "float64", m, m, 5, k=2)
    add("lstsq", "float64", m, n, 4, k=3, variant="jit")
    for routine, kind in (
        ("qr", "nan"),
        ("lstsq", "nan"),
        ("lstsq", "rank-deficient"),
        ("qr", "wide"),
        ("lstsq", "bad-b"),
    ):
        params = dict(routine=routine, kind=kind, m=m, n=n, tile=4)
        plan.append((f"{routine}/{kind}", "qr-failure", params))
    return plan
