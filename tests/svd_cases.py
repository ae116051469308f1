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


def svd_subset_case(mesh, dtype_name, m, n, tile, lo, hi, form=""):
    """gesvd's subset_by_index=(lo, hi) of an m x n matrix: the triplets lo <= i < hi counted
    from the smallest singular value, as jax.lax.linalg.svd's, returned descending. Forms: ""
    (U, s, Vh), "values", "u" (U alone), "jit", "wide" (the n x m matrix), "linalg"
    (jaxmg.linalg.svd), "context" (gesvd_shardmap_ctx in a jit), "derivatives" (the kept
    singular values' jvp against Re diag(Uᴴ dA V) of NumPy's kept triplets, the jvp and the
    gradient of a loss of the rank-k part U diag(s) Vh against JAX's SVD on one device).
    Checked: s within 10 max(M, N) eps ‖A‖ of NumPy's, U M x k and Vh k x N orthonormal,
    ‖A Vhᴴ − U diag(s)‖ (U alone: ‖Aᴴ U‖'s column norms against s) within the same, U and
    Vh in a's spec where k divides over the mesh."""
    import jax.numpy as jnp

    import jaxmg

    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    a = _matrix(m, n, dtype, "wide" if form == "wide" else "")
    mm, nn = a.shape
    kk, k = min(mm, nn), hi - lo
    start, stop = kk - hi, kk - lo  # the kept positions in the descending singular values
    tol = 10 * max(mm, nn) * eps
    ap = place(a, mesh, A_SPEC)
    spec = ap.sharding.spec
    a64 = a.astype(np.complex128)
    norm = np.linalg.norm(a64, 2)
    u_ref, s_ref, vh_ref = np.linalg.svd(a64, full_matrices=False)
    rec = dict(m=mm, n=nn, lo=lo, hi=hi, tol=tol)
    vectors = form != "values"
    cv = vectors and form != "u"
    kw = dict(T_A=tile, subset_by_index=(lo, hi))

    def fn(x):
        return jaxmg.gesvd(x, compute_u=vectors, compute_vh=cv, return_status=True, **kw)

    status = None
    if form == "linalg":
        out = list(jaxmg.linalg.svd(ap, full_matrices=False, **kw))
    elif form == "context":
        _, *out = jax.jit(lambda x: jaxmg.gesvd_shardmap_ctx(x, tile, subset_by_index=(lo, hi)))(ap)
        status = out.pop()
    else:
        out = list(jax.jit(fn)(ap) if form == "jit" else fn(ap))
        status = out.pop()
    u = out.pop(0) if vectors else None
    s = out.pop(0)
    vh = out.pop(0) if cv else None
    sg = gather(s).astype(np.float64)
    rec["value_error"] = float(np.abs(sg - s_ref[start:stop]).max() / norm)
    ok = list(s.shape) == [k] and rec["value_error"] <= tol
    divides = mm % mesh.shape["pr"] == 0 and k % mesh.shape["pc"] == 0
    if vectors:
        ug = gather(u).astype(np.complex128)
        rec["u_orthogonality"] = float(np.linalg.norm(ug.conj().T @ ug - np.eye(k)))
        rec["u_spec"] = str(u.sharding.spec)
        ok = ok and list(u.shape) == [mm, k] and rec["u_orthogonality"] <= tol
        ok = ok and (u.sharding.spec == spec or not divides)
        if not cv:  # ‖Aᴴ u_j‖ = s_j
            norms = np.linalg.norm(a64.conj().T @ ug, axis=0)
            rec["projection"] = float(np.abs(norms - sg).max() / norm)
            ok = ok and rec["projection"] <= tol
    if cv:
        vg = gather(vh).astype(np.complex128)
        rec["vh_orthogonality"] = float(np.linalg.norm(vg @ vg.conj().T - np.eye(k)))
        rec["vh_spec"] = str(vh.sharding.spec)
        ok = ok and list(vh.shape) == [k, nn] and rec["vh_orthogonality"] <= tol
        rec["kept_residual"] = float(np.linalg.norm(a64 @ vg.conj().T - ug * sg) / norm)
        ok = ok and rec["kept_residual"] <= tol
    if form == "derivatives":
        da = tall(m, n, dtype, 77)
        dap = place(da, mesh, A_SPEC)
        ours = jax.jit(lambda x: jaxmg.gesvd(x, **kw))

        def reference(x):  # JAX's SVD of the whole matrix on one device, kept
            uu, ss, vv = jnp.linalg.svd(x, full_matrices=False)
            return uu[:, start:stop], ss[start:stop], vv[start:stop]

        def rank_k(svd, whole=lambda x: x):
            def f(x):  # (the factors whole on every device: a's mesh has Explicit axes)
                uu, ss, vv = (whole(y) for y in svd(x))
                return jnp.real(jnp.sum(jnp.sin((uu * ss.astype(uu.dtype)) @ vv)))

            return f

        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        ours_k = rank_k(ours, lambda y: jax.reshard(y, replicated))

        _, ds = jax.jvp(lambda x: ours(x)[1], (ap,), (dap,))
        ds_ref = np.real(np.einsum("ij,ik,kj->j", u_ref.conj(), da, vh_ref.conj().T))
        rec["ds_error"] = float(np.abs(gather(ds) - ds_ref[start:stop]).max() / norm)
        a_one, da_one = jnp.asarray(a), jnp.asarray(da)
        _, dl = jax.jvp(ours_k, (ap,), (dap,))
        _, dl_ref = jax.jvp(rank_k(reference), (a_one,), (da_one,))
        scale = max(abs(float(dl_ref)), 1.0)
        rec["rank_k_jvp_error"] = abs(float(local_scalars(dl)[0][0]) - float(dl_ref)) / scale
        with jax.set_mesh(mesh):
            g = gather(jax.jit(jax.grad(ours_k))(ap))
        g_ref = np.asarray(jax.grad(rank_k(reference))(a_one))
        rec["rank_k_grad_error"] = float(np.abs(g - g_ref).max() / max(np.abs(g_ref).max(), 1.0))
        # (the rank-k part's derivative divides by the gaps s_i - s_j: a few digits fewer)
        ok = ok and rec["ds_error"] <= tol
        ok = ok and max(rec["rank_k_jvp_error"], rec["rank_k_grad_error"]) <= 1e3 * tol
    if status is not None:
        statuses = [int(np.real(x)) for x in local_scalars(status)[:, 0]]
        rec["statuses"] = statuses
        ok = ok and statuses == [0] * len(statuses)
    rec["ok"] = bool(ok)
    return rec


def svd_plan(m, tiles=(None, 4, 5), derivatives=True):
    """[(name, kind, params)]: gesvd and polar on m x m/2 over four dtypes and tiles, square
    matrices; gesvd's values-only, U-only and Vh-only paths, a wide matrix, a zero column,
    clustered singular values, a user's jit, donation; polar without H, rank deficient, ill
    conditioned; gesvd's subset_by_index (k triplets) in each form, with `derivatives` its
    derivatives; failures."""
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
    # subset_by_index: the k largest, the smallest, a middle window; k that divides and not
    for dtype_name, tile, lo, hi, form in (
        ("float64", 4, n - 4, n, ""),
        ("complex128", 5, 0, 3, ""),
        ("float32", 4, n // 2 - 2, n // 2 + 3, ""),
        ("complex64", 5, n - 4, n, "values"),
        ("float64", 4, n - 8, n, "u"),
        ("float64", 5, n - 4, n, "jit"),
        ("complex128", 4, n - 4, n, "wide"),
        ("float64", 4, n - 6, n - 2, "linalg"),
        ("complex128", 4, n - 4, n, "context"),
    ) + ((("float64", 4, n - 4, n, "derivatives"),) if derivatives else ()):
        params = dict(dtype_name=dtype_name, m=m, n=n, tile=tile, lo=lo, hi=hi, form=form)
        window = f"{lo}:{hi}" + (form and "/" + form)
        name = svd_name("gesvd-subset", dtype_name, m, n, tile, window)
        plan.append((name, "svd-subset", params))
    for routine, kind in (("gesvd", "nan"), ("polar", "nan"), ("polar", "wide"), ("gesvd", "full")):
        params = dict(routine=routine, kind=kind, m=m, n=n, tile=4)
        plan.append((f"{routine}/{kind}", "svd-failure", params))
    return plan
