"""Cases of gesvd and polar, shared by the CPU and GPU workers; each returns a record with "ok".

Matrices are the same NumPy arrays on every process; results are gathered and compared in
complex128 with tolerances scaled by max(M, N) * eps of the dtype: singular values against
numpy.linalg.svd, reconstruction ‖U diag(s) Vh − A‖ / ‖A‖ and ‖Up H − A‖ / ‖A‖, orthogonality
‖UᴴU − I‖, ‖Vh Vhᴴ − I‖, ‖UpᴴUp − I‖, H Hermitian positive semi-definite and equal to
(AᴴA)^½ from NumPy's SVD.
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np
from linalg_cases import A_SPEC, DTYPES, gather, local_scalars, place
from qr_cases import tall


def svd_name(routine, dtype_name, m, n, tile, variant=""):
    return f"{routine}/{dtype_name}/{m}x{n}/T{tile}" + (f"/{variant}" if variant else "")


def _matrix(m, n, dtype, variant):
    if variant in ("wide", "context-wide"):
        return tall(m, n, dtype, m + n).T.copy()
    zero = n // 2 if variant.endswith("rank-deficient") else None
    a = tall(m, n, dtype, m + n, zero_column=zero)
    if variant == "ill-conditioned":  # singular values from 1 down to 1e-10 (float64)
        u, _, vh = np.linalg.svd(a.astype(np.complex128), full_matrices=False)
        s = np.logspace(0, -10, n)
        return ((u * s) @ vh).real.astype(dtype)
    if variant == "clustered":  # singular values 1 + 1e-9 k
        u, _, vh = np.linalg.svd(a.astype(np.complex128), full_matrices=False)
        s = 1 + 1e-9 * np.arange(n)
        a = (
            ((u * s) @ vh).astype(dtype)
            if np.iscomplexobj(a)
            else ((u * s) @ vh).real.astype(dtype)
        )
    return a


def svd_case(mesh, routine, dtype_name, m, n, tile, variant=""):
    """gesvd variants: "values", "u", "vh" (what is computed), "jit", "donate", "wide" (an
    n x m matrix), "context-wide" (gesvd_shardmap_ctx of a wide matrix with full_matrices: the
    work array in a's shape, Vh N x N orthonormal), "rank-deficient" (a zero column),
    "values-rank-deficient", "clustered"; polar: "", "up" (no H), "jit",
    "rank-deficient" (H still positive semi-definite, Up H = A), "ill-conditioned" (κ = 1e10:
    no bound on the smallest singular value, QDWH's full schedule and Halley's steps)."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    a = _matrix(m, n, dtype, variant)
    mm, nn = a.shape
    tol = 10 * max(mm, nn) * eps
    rec = dict(m=mm, n=nn, eps=eps, tol=tol)
    ap = place(a, mesh, A_SPEC)
    spec = ap.sharding.spec
    a64 = a.astype(np.complex128)
    norm = np.linalg.norm(a64, 2)
    u_ref, s_ref, vh_ref = np.linalg.svd(a64, full_matrices=False)
    ok = True
    if routine == "gesvd":
        values = variant.startswith("values")
        cu = not values and variant != "vh"
        cv = not values and variant != "u"

        def fn(x):
            return jaxmg.gesvd(
                x,
                T_A=tile,
                compute_u=cu,
                compute_vh=cv,
                return_status=True,
                donate=variant == "donate",
            )

        def context(x):  # the context form, full Vh of a wide matrix
            return jaxmg.gesvd_shardmap_ctx(x, tile, full_matrices=True)

        if variant == "context-wide":
            work, *out = jax.jit(context)(ap)
            rec["work_shape"] = list(work.shape)
        else:
            out = list(jax.jit(fn)(ap) if variant == "jit" else fn(ap))
        status = out.pop()
        u = out.pop(0) if cu else None
        s = out.pop(0)
        vh = out.pop(0) if cv else None
        sg = gather(s).astype(np.float64)
        k = min(mm, nn)
        rec["s_shape"] = list(s.shape)
        rec["value_error"] = float(np.abs(sg - s_ref).max() / norm)
        ok = rec["s_shape"] == [k] and rec["value_error"] <= tol
        ok = ok and bool(np.all(np.diff(sg) <= tol * norm))  # descending, up to rounding
        full_rank = variant != "rank-deficient"
        if cu:
            ug = gather(u).astype(np.complex128)
            rec["u_orthogonality"] = float(np.linalg.norm(ug.conj().T @ ug - np.eye(k)))
            rec["u_spec"] = str(u.sharding.spec)
            ok = ok and list(u.shape) == [mm, k] and rec["u_orthogonality"] <= tol
            if mm >= nn:
                ok = ok and u.sharding.spec == spec
            if not cv and full_rank and variant != "clustered":  # U Uᴴ A = A
                rec["projection"] = float(np.linalg.norm(ug @ (ug.conj().T @ a64) - a64) / norm)
                ok = ok and rec["projection"] <= tol
        if cv:
            vg = gather(vh).astype(np.complex128)
            rows = k
            if variant == "context-wide":  # Vh: N x N, its first K rows those of a = U s Vh
                rec["vh_full_orthogonality"] = float(np.linalg.norm(vg @ vg.conj().T - np.eye(nn)))
                ok = ok and rec["work_shape"] == [mm, nn] and rec["vh_full_orthogonality"] <= tol
                vg, rows = vg[:k], nn
            rec["vh_orthogonality"] = float(np.linalg.norm(vg @ vg.conj().T - np.eye(k)))
            ok = ok and list(vh.shape) == [rows, nn] and rec["vh_orthogonality"] <= tol
        if cu and cv:
            rec["reconstruction"] = float(np.linalg.norm((ug * sg) @ vg - a64) / norm)
            ok = ok and rec["reconstruction"] <= tol
    else:
        ch = variant != "up"

        def fn(x):
            return jaxmg.polar(x, T_A=tile, compute_h=ch, return_status=True)

        out = list(jax.jit(fn)(ap) if variant == "jit" else fn(ap))
        status = out.pop()
        up = out[0]
        upg = gather(up).astype(np.complex128)
        rec["up_spec"] = str(up.sharding.spec)
        ok = list(up.shape) == [mm, nn] and up.sharding.spec == spec
        if variant != "rank-deficient":
            rec["up_error"] = float(np.linalg.norm(upg - u_ref @ vh_ref) / np.sqrt(nn))
            rec["orthogonality"] = float(np.linalg.norm(upg.conj().T @ upg - np.eye(nn)))
            ok = ok and rec["orthogonality"] <= tol and rec["up_error"] <= tol * np.linalg.cond(a64)
        if ch:
            hg = gather(out[1]).astype(np.complex128)
            h_ref = (vh_ref.conj().T * s_ref) @ vh_ref
            rec["reconstruction"] = float(np.linalg.norm(upg @ hg - a64) / norm)
            rec["hermitian"] = float(np.linalg.norm(hg - hg.conj().T) / norm)
            rec["h_error"] = float(np.linalg.norm(hg - h_ref) / norm)
            rec["h_min_eig"] = float(np.linalg.eigvalsh((hg + hg.conj().T) / 2).min() / norm)
            ok = ok and list(out[1].shape) == [nn, nn]
            ok = ok and rec["reconstruction"] <= tol and rec["hermitian"] <= tol
            ok = ok and rec["h_error"] <= tol and rec["h_min_eig"] >= -tol
    statuses = [int(np.real(x)) for x in local_scalars(status)[:, 0]]
    rec["statuses"] = statuses
    rec["ok"] = bool(ok and statuses == [0] * len(statuses))
    return rec


def svd_failure_case(mesh, routine, kind, m, n, tile):
    """kind: "nan" (status > 0 and NaN outputs on every rank); "wide" (polar of M < N): a
    ValueError before any work; "full" (gesvd full_matrices of a non-square matrix): U is
    M x M unitary, its first N columns those of the reduced decomposition (A = U[:, :N] s Vh)."""
    import jaxmg

    a = tall(m, n, np.float64, 11)
    rec = dict(kind=kind)
    if kind == "full":  # on the mesh, then inside jax.set_mesh of its Explicit-axes twin
        from jax.sharding import AxisType, Mesh

        explicit = Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Explicit,) * 2)
        tol = 20 * m * np.finfo(np.float64).eps
        rec["ok"] = True
        for label, grid in (("", mesh), ("explicit_", explicit)):
            with jax.set_mesh(grid) if label else contextlib.nullcontext():
                out = jaxmg.gesvd(place(a, grid, A_SPEC), T_A=tile, full_matrices=True)
                u, s, vh = (gather(x) for x in out)
            orthogonality = float(np.abs(u.T @ u - np.eye(m)).max())
            residual = float(np.abs((u[:, :n] * s) @ vh - a).max() / max(s.max(), 1.0))
            rec.update({f"{label}orthogonality": orthogonality, f"{label}residual": residual})
            rec["ok"] &= bool(u.shape == (m, m) and max(orthogonality, residual) <= tol)
        return rec
    if kind == "wide":
        try:
            jaxmg.polar(place(a.T.copy(), mesh, A_SPEC), T_A=tile)
        except ValueError as e:
            rec["message"] = str(e)
        rec["ok"] = "message" in rec and "M >= N" in rec["message"]
        return rec
    a[m // 2, n // 3] = np.nan
    ap = place(a, mesh, A_SPEC)
    if routine == "gesvd":
        *outputs, status = jaxmg.gesvd(ap, T_A=tile, return_status=True)
    else:
        *outputs, status = jaxmg.polar(ap, T_A=tile, return_status=True)
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec.update(statuses=statuses, all_nan=bool(all(np.all(np.isnan(gather(o))) for o in outputs)))
    rec["ok"] = rec["all_nan"] and statuses[0] > 0 and len(set(statuses)) == 1
    return rec


def svd_plan(m, tiles=(None, 4, 5)):
    """[(name, kind, params)]: gesvd and polar on m x m/2 over four dtypes and tiles, square
    matrices; gesvd's values-only, U-only and Vh-only paths, a wide matrix, a zero column,
    clustered singular values, a user's jit, donation; polar without H, rank deficient, ill
    conditioned;
    failures."""
    from solve_plan import DTYPE_NAMES

    n = m // 2
    plan = []

    def add(routine, dtype_name, mm, nn, tile, variant=""):
        params = dict(
            routine=routine, dtype_name=dtype_name, m=mm, n=nn, tile=tile, variant=variant
        )
        plan.append((svd_name(routine, dtype_name, mm, nn, tile, variant), "svd", params))

    for dtype_name in DTYPE_NAMES:
        for tile in tiles:
            add("gesvd", dtype_name, m, n, tile)
        add("polar", dtype_name, m, n, tiles[-1])
    add("gesvd", "float64", m, m, 5)
    # The singular values alone (QDWH and H's eigenvalues): every dtype, a square matrix, a
    # zero column.
    for dtype_name in DTYPE_NAMES:
        add("gesvd", dtype_name, m, n, 5, "values")
    add("gesvd", "complex128", m, m, 4, "values")
    add("gesvd", "float64", m, n, 4, "values-rank-deficient")
    add("gesvd", "float64", 648, 324, 300, "values")  # GPU: H into tiles of 256 for Syevd
    add("polar", "complex128", m, m, 4)
    for variant in ("values", "u", "vh", "wide", "rank-deficient", "clustered", "jit", "donate"):
        add("gesvd", "float64", m, n, 4, variant)
    add("gesvd", "complex128", m, n, 5, "wide")
    add("gesvd", "complex128", m, n, 4, "context-wide")
    for variant in ("up", "jit", "rank-deficient", "ill-conditioned"):
        add("polar", "float64", m, n, 4, variant)
    for routine, kind in (("gesvd", "nan"), ("polar", "nan"), ("polar", "wide"), ("gesvd", "full")):
        params = dict(routine=routine, kind=kind, m=m, n=n, tile=4)
        plan.append((f"{routine}/{kind}", "svd-failure", params))
    return plan
