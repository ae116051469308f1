"""Cases of syevd (eigenvalues and eigenvectors of a Hermitian matrix) and of the generalized
problem (jaxmg.eigh(a, b)), shared by the CPU and GPU
workers; each returns a record with "ok".

Matrices are the same NumPy arrays on every process; results are gathered and compared in
complex128 with tolerances scaled by n * eps * ‖A‖: eigenvalues against numpy.linalg.eigvalsh,
the residual ‖A V − V diag(w)‖, orthogonality ‖VᴴV − I‖, on random, clustered and degenerate
spectra.
"""

from __future__ import annotations

import jax
import numpy as np
from linalg_cases import A_SPEC, DTYPES, gather, local_scalars, place


def eigh_name(dtype_name, n, tile, variant=""):
    return f"syevd/{dtype_name}/n{n}/T{tile}" + (f"/{variant}" if variant else "")


def hermitian(n, dtype, seed, spectrum=None):
    """A random Hermitian matrix, or Q diag(spectrum) Qᴴ for a random unitary Q."""
    rng = np.random.default_rng(seed + 23)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    if spectrum is None:
        return ((x + x.conj().T) / 2).astype(dtype)
    q, _ = np.linalg.qr(x)
    return ((q * spectrum) @ q.conj().T).astype(dtype)


def spectrum_of(kind, n):
    """ "degenerate": three eigenvalues, each n/3 times; "clustered": 1 + 1e-9 k and -1 - 1e-9 k."""
    if kind == "degenerate":
        return np.repeat([-2.0, 1.0, 3.0], -(-n // 3))[:n]
    if kind == "clustered":
        k = np.arange(n // 2)
        return np.concatenate([1 + 1e-9 * k, -1 - 1e-9 * k[: n - n // 2]])
    return None


def eigh_case(mesh, dtype_name, n, tile, variant=""):
    """variant: "values" (eigenvalues only), "jit", "donate", "degenerate", "clustered", or
    "values-degenerate" and "values-clustered" (those spectra, eigenvalues only); any of them
    after "two-stage" or "scalapack" (jaxmg.config's cpu_eigh set so for the call: the CPU
    engine's two stages on 1-D grids, or p?syevd)."""
    import jaxmg

    if variant.endswith("-fused"):
        # Q₂'s waves through the backend's WaveApply (the GPU's tensor-core path, here over BLAS).
        with jaxmg.config.override(eig_q2="fused"):
            return eigh_case(mesh, dtype_name, n, tile, variant.removesuffix("-fused"))
    for engine_choice in ("two-stage", "scalapack"):
        if variant == engine_choice or variant.startswith(engine_choice + "-"):
            with jaxmg.config.override(cpu_eigh=engine_choice):
                return eigh_case(mesh, dtype_name, n, tile, variant[len(engine_choice) + 1 :])

    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    spectrum = spectrum_of(variant.removeprefix("values-"), n)
    a = hermitian(n, dtype, n, spectrum)
    a64 = a.astype(np.complex128)
    norm = np.linalg.norm(a64, 2)
    tol = 10 * n * eps
    ap = place(a, mesh, A_SPEC)
    spec = ap.sharding.spec
    vectors = not variant.startswith("values")

    def fn(m):
        return jaxmg.syevd(
            m, T_A=tile, return_eigenvectors=vectors, return_status=True, donate=variant == "donate"
        )

    out = jax.jit(fn)(ap) if variant == "jit" else fn(ap)
    w, status = out[0], out[-1]
    wg = gather(w)
    ref = np.linalg.eigvalsh(a64)
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec = dict(n=n, eps=eps, tol=tol, residual_tol=tol, statuses=statuses, w_shape=list(w.shape))
    rec["eigenvalue_error"] = float(np.abs(wg - ref).max() / norm)
    ok = rec["eigenvalue_error"] <= tol and statuses == [0] * len(statuses)
    # Ascending, up to rounding inside a degenerate cluster.
    ok = ok and rec["w_shape"] == [n] and bool(np.all(np.diff(wg) >= -tol * norm))
    if vectors:
        v = out[1]
        vg = gather(v).astype(np.complex128)
        rec.update(
            residual=float(np.linalg.norm(a64 @ vg - vg * wg) / norm),
            orthogonality=float(np.linalg.norm(vg.conj().T @ vg - np.eye(n))),
            v_spec=str(v.sharding.spec),
        )
        ok = ok and rec["residual"] <= tol and rec["orthogonality"] <= tol
        ok = ok and v.sharding.spec == spec
    rec["ok"] = bool(ok)
    return rec


def eigh_failure_case(mesh, kind, n, tile):
    """kind: "not-hermitian" (status -1) or "nan" (status > 0): NaN w and V on every rank;
    "nan-values": the same, eigenvalues only."""
    import jaxmg

    a = hermitian(n, np.float64, 7)
    if kind == "not-hermitian":
        a[0, n - 1] += 1.0
    else:
        a[n // 2, n // 3] = np.nan
        a[n // 3, n // 2] = np.nan
    vectors = kind != "nan-values"
    out = jaxmg.syevd(
        place(a, mesh, A_SPEC), T_A=tile, return_eigenvectors=vectors, return_status=True
    )
    w, status = out[0], out[-1]
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    want = -1 if kind == "not-hermitian" else None
    all_nan = np.isnan(gather(w)).all() and (not vectors or np.isnan(gather(out[1])).all())
    rec = dict(statuses=statuses, all_nan=bool(all_nan))
    agreed = len(set(statuses)) == 1
    rec["ok"] = rec["all_nan"] and agreed and (statuses[0] == want if want else statuses[0] > 0)
    return rec


def eigh_subset_case(mesh, dtype_name, n, tile, lo, hi, form=""):
    """subset_by_index=(lo, hi): the eigenvalues lo <= i < hi of numpy.linalg.eigvalsh within
    10 n eps ‖A‖, ‖A V − V diag(w)‖ and ‖VᴴV − I‖ within 10 n eps for the N x k V, V in a's
    sharding where k divides over the mesh's columns. form: "" (jaxmg.syevd), "values",
    "jit", "linalg" (jaxmg.linalg.eigh), "context" (syevd_shardmap_ctx in the caller's
    jit), "blocks" (syevd_blocks in the caller's shard_map), "generalized" (jaxmg.eigh(a, b):
    A V = B V diag(w), Vᴴ B V = I), "jvp" (the kept eigenvalues' forward derivative,
    Re diag(Vᴴ dA V), within 10 n eps ‖dA‖) or "jvp-vectors" (the kept pairs' forward
    derivative against the whole decomposition's rule, and reverse mode its transpose); any of
    them after "two-stage" or "scalapack" (jaxmg.config's cpu_eigh: on 1-D grids the CPU
    engine's two stages, back-transformations on the k columns alone, its default for a
    subset; or ScaLAPACK's p?syevr, its choice on 2-D grids)."""
    from jax.sharding import PartitionSpec as P

    import jaxmg

    for engine_choice in ("two-stage", "scalapack"):  # the CPU engine's choice, set for the call
        if form == engine_choice or form.startswith(engine_choice + "-"):
            with jaxmg.config.override(cpu_eigh=engine_choice):
                rest = form[len(engine_choice) + 1 :]
                return eigh_subset_case(mesh, dtype_name, n, tile, lo, hi, rest)
    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    a = hermitian(n, dtype, n)
    a64 = a.astype(np.complex128)
    norm, tol, k = np.linalg.norm(a64, 2), 10 * n * eps, hi - lo
    ap = place(a, mesh, A_SPEC)
    subset = (lo, hi)
    b64 = None
    if form == "generalized":
        b = positive_definite(n, dtype, n)
        b64 = b.astype(np.complex128)
        w, v, status = jaxmg.eigh(
            ap, place(b, mesh, A_SPEC), T_A=tile, subset_by_index=subset, return_status=True
        )
    elif form == "values":
        w, status = jaxmg.syevd(
            ap, T_A=tile, return_eigenvectors=False, return_status=True, subset_by_index=subset
        )
        v = None
    elif form == "linalg":
        w, v = jaxmg.linalg.eigh(ap, T_A=tile, subset_by_index=subset)
        status = jax.numpy.zeros((), np.int32)
    elif form == "context":
        _, w, v, status = jax.jit(
            lambda m: jaxmg.syevd_shardmap_ctx(m, tile, subset_by_index=subset)
        )(ap)
    elif form == "blocks":
        w, v, status = jax.jit(
            jax.shard_map(
                lambda m: jaxmg.syevd_blocks(
                    m, tile, mesh=mesh, return_status=True, subset_by_index=subset
                ),
                mesh=mesh,
                in_specs=A_SPEC,
                out_specs=(P(), A_SPEC, P()),
                check_vma=False,
            )
        )(ap)
    elif form in ("jvp", "generalized-jvp"):
        da = hermitian(n, dtype, n + 1)
        primals, tangents = [ap], [place(da, mesh, A_SPEC)]
        if form == "generalized-jvp":
            b = positive_definite(n, dtype, n)
            b64, db = b.astype(np.complex128), hermitian(n, dtype, n + 4) / 4
            primals.append(place(b, mesh, A_SPEC))
            tangents.append(place(db, mesh, A_SPEC))

        def values(*ms):
            if len(ms) == 2:
                return jaxmg.eigh(*ms, T_A=tile, return_eigenvectors=False, subset_by_index=subset)
            return jaxmg.syevd(*ms, T_A=tile, return_eigenvectors=False, subset_by_index=subset)

        w, dw = jax.jvp(values, tuple(primals), tuple(tangents))
        # Reverse mode is the transpose (JAX's pairing: Re Σ x y, no conjugate).
        ct_w = np.random.default_rng(n + 2).standard_normal(k).astype(np.real(a).dtype)
        _, pullback = jax.vjp(values, *primals)
        backs = pullback(jax.numpy.asarray(ct_w))
        status = jax.numpy.zeros((), np.int32)
        v = None
    elif form == "jvp-vectors":
        da = hermitian(n, dtype, n + 1)
        dap = place(da, mesh, A_SPEC)

        def pairs(m):
            return jaxmg.syevd(m, T_A=tile, subset_by_index=subset)

        (w, v), (dw, dv) = jax.jvp(pairs, (ap,), (dap,))
        # Reverse mode is the transpose: <ct, J da> = <Jᵀ ct, da> for cotangents ct (JAX's
        # pairing of complex arrays is Re Σ x y, without a conjugate).
        ct_w = np.random.default_rng(n + 2).standard_normal(k).astype(np.real(a).dtype)
        ct_v = hermitian(n, dtype, n + 3)[:, :k]
        _, pullback = jax.vjp(pairs, ap)
        (back,) = pullback((jax.numpy.asarray(ct_w), place(ct_v, mesh, A_SPEC)))
        status = jax.numpy.zeros((), np.int32)
    else:
        fn = lambda m: jaxmg.syevd(m, T_A=tile, return_status=True, subset_by_index=subset)  # noqa: E731
        w, v, status = (jax.jit(fn) if form == "jit" else fn)(ap)
    wg = gather(w)
    if b64 is None:
        ref_w, ref_v = np.linalg.eigh(a64)
    else:
        lb = np.linalg.cholesky(b64)
        ref_w, y = np.linalg.eigh(np.linalg.solve(lb, np.linalg.solve(lb, a64).conj().T))
        ref_v = np.linalg.solve(lb.conj().T, y)
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec = dict(n=n, lo=lo, hi=hi, eps=eps, tol=tol, residual_tol=tol, statuses=statuses)
    rec["w_shape"] = list(w.shape)
    rec["eigenvalue_error"] = float(np.abs(wg - ref_w[lo:hi]).max() / norm)
    ok = rec["w_shape"] == [k] and rec["eigenvalue_error"] <= tol
    ok = ok and statuses == [0] * len(statuses)
    if form in ("jvp", "generalized-jvp"):
        # dw_i = Re v_iᴴ dA v_i (− w_i Re v_iᴴ dB v_i, v B-orthonormal), within 10 n eps.
        dag, vk = da.astype(np.complex128), ref_v[:, lo:hi]
        ref_dw = np.real(np.einsum("ij,ik,kj->j", vk.conj(), dag, vk))
        scale = np.linalg.norm(dag, 2)
        if b64 is not None:
            dbg = db.astype(np.complex128)
            ref_dw -= ref_w[lo:hi] * np.real(np.einsum("ij,ik,kj->j", vk.conj(), dbg, vk))
            scale = (scale + norm * np.linalg.norm(dbg, 2)) * np.linalg.norm(vk, 2) ** 2
        rec["derivative_error"] = float(np.abs(gather(dw) - ref_dw).max() / scale)
        ok = ok and rec["derivative_error"] <= tol
        forward = float(np.sum(ct_w * gather(dw)))
        reverse = sum(
            float(np.real(np.sum(gather(g) * t.astype(np.complex128))))
            for g, t in zip(backs, (da, db) if b64 is not None else (da,), strict=True)
        )
        rec["transpose_error"] = abs(forward - reverse) / max(abs(forward), 1e-30)
        ok = ok and rec["transpose_error"] <= 1e3 * n * eps
    if form == "jvp-vectors":
        # dV = V (F ∘ Vᴴ dA V), F_ij = 1 / (w_j − w_i) off the diagonal: the kept columns, each
        # in the phase of jaxmg's eigenvector (dv_i turns with v_i), within 10 n eps ‖dA‖ / gap.
        dag = da.astype(np.complex128)
        vg = gather(v).astype(np.complex128)
        c = ref_v.conj().T @ dag @ ref_v
        f = 1 / (np.eye(n) + ref_w[None, :] - ref_w[:, None]) - np.eye(n)
        ref_dv = (ref_v @ (f * c))[:, lo:hi]
        phase = np.sum(ref_v[:, lo:hi].conj() * vg, axis=0)
        phase = phase / np.abs(phase)
        gap = np.min(np.abs(np.diff(ref_w)))
        rec["vector_derivative_error"] = float(
            np.abs(gather(dv) - ref_dv * phase[None, :]).max() / np.linalg.norm(dag, 2)
        )
        rec["vector_derivative_tol"] = 10 * n * eps / (gap / norm)
        ok = ok and rec["vector_derivative_error"] <= rec["vector_derivative_tol"]
        forward = float(np.sum(ct_w * gather(dw))) + float(np.real(np.sum(ct_v * gather(dv))))
        reverse = float(np.real(np.sum(gather(back) * dag)))
        rec["transpose_error"] = abs(forward - reverse) / max(abs(forward), 1e-30)
        ok = ok and rec["transpose_error"] <= 1e3 * n * eps
    if v is not None:
        vg = gather(v).astype(np.complex128)
        bm = np.eye(n) if b64 is None else b64
        scale = norm * (1 if b64 is None else np.linalg.norm(b64, 2))
        rec.update(
            v_shape=list(v.shape),
            residual=float(np.linalg.norm(a64 @ vg - (bm @ vg) * wg) / scale),
            orthogonality=float(np.linalg.norm(vg.conj().T @ bm @ vg - np.eye(k))),
            v_spec=str(v.sharding.spec),
        )
        ok = ok and rec["v_shape"] == [n, k]
        ok = ok and rec["residual"] <= tol and rec["orthogonality"] <= tol * max(1, k / n)
        if k % mesh.shape["pc"] == 0 and n % mesh.shape["pr"] == 0:
            ok = ok and v.sharding.spec == ap.sharding.spec
    rec["ok"] = bool(ok)
    return rec


def eigh_subset_checks(mesh):
    """subset_by_index refused before any work by jaxmg.syevd, jaxmg.linalg.eigh and eigvalsh:
    lo < 0, hi > N, lo >= hi, a float, a bool, not a pair; each message names the keyword."""
    import jaxmg

    n = 12
    ap = place(hermitian(n, np.float64, 3), mesh, A_SPEC)
    bad = {
        "negative": ((-1, 3), ValueError),
        "past-n": ((2, n + 1), ValueError),
        "empty": ((4, 4), ValueError),
        "float": ((0.0, 3), TypeError),
        "bool": ((False, 3), TypeError),
        "triple": ((0, 1, 2), TypeError),
        "int": (3, TypeError),
    }
    messages = {}
    for name, (subset, error) in bad.items():
        for fn in (jaxmg.syevd, jaxmg.linalg.eigh, jaxmg.linalg.eigvalsh):
            try:
                fn(ap, subset_by_index=subset)
            except error as e:
                messages[name] = str(e)
            else:
                return dict(messages=messages, accepted=name, ok=False)
    good = all("subset_by_index" in m for m in messages.values())
    return dict(messages=messages, ok=good and len(messages) == len(bad))


def positive_definite(n, dtype, seed):
    """I + X Xᴴ / n: Hermitian positive definite, condition number a few units."""
    rng = np.random.default_rng(seed + 29)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (np.eye(n) + x @ x.conj().T / n).astype(dtype)


def generalized_case(mesh, dtype_name, n, tile, variant=""):
    """jaxmg.eigh(a, b): eigenvalues against NumPy's (of L⁻¹ A L⁻ᴴ, B = L Lᴴ), the residual
    ‖A V − B V diag(w)‖ and ‖Vᴴ B V − I‖, V in a's sharding. variant: "values", "jit"."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    eps = float(np.finfo(dtype).eps)
    a, b = hermitian(n, dtype, n), positive_definite(n, dtype, n)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    lower = np.linalg.cholesky(b64)
    c = np.linalg.solve(lower, np.linalg.solve(lower, a64).conj().T).conj().T
    ref = np.linalg.eigvalsh((c + c.conj().T) / 2)
    norm = np.linalg.norm(a64, 2) + np.abs(ref).max() * np.linalg.norm(b64, 2)
    tol = 10 * n * eps
    ap, bp = place(a, mesh, A_SPEC), place(b, mesh, A_SPEC)
    vectors = variant != "values"

    def fn(x, y):
        return jaxmg.eigh(x, y, T_A=tile, return_eigenvectors=vectors, return_status=True)

    out = jax.jit(fn)(ap, bp) if variant == "jit" else fn(ap, bp)
    w, status = out[0], out[-1]
    wg = gather(w)
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec = dict(n=n, eps=eps, tol=tol, residual_tol=tol, statuses=statuses)
    rec["eigenvalue_error"] = float(np.abs(wg - ref).max() / norm)
    ok = rec["eigenvalue_error"] <= tol and statuses == [0] * len(statuses)
    ok = ok and list(w.shape) == [n] and bool(np.all(np.diff(wg) >= -tol * norm))
    if vectors:
        v = out[1]
        vg = gather(v).astype(np.complex128)
        rec.update(
            residual=float(np.linalg.norm(a64 @ vg - (b64 @ vg) * wg) / (norm * np.sqrt(n))),
            b_orthogonality=float(np.linalg.norm(vg.conj().T @ b64 @ vg - np.eye(n)) / n),
            v_spec=str(v.sharding.spec),
        )
        ok = ok and rec["residual"] <= tol and rec["b_orthogonality"] <= tol
        ok = ok and v.sharding.spec == ap.sharding.spec
    rec["ok"] = bool(ok)
    return rec


def generalized_failure_case(mesh, kind, n, tile):
    """kind: "not-positive-definite" (B indefinite: status > N, NaN everywhere), "nan" (NaN in
    B: status > 0, NaN everywhere), "shape" (b of another shape: ValueError before any work)."""
    import jaxmg

    a, b = hermitian(n, np.float64, 3), positive_definite(n, np.float64, 3)
    rec = dict(kind=kind)
    if kind == "shape":
        try:
            jaxmg.eigh(place(a, mesh, A_SPEC), place(b[:, : n // 2].copy(), mesh, A_SPEC))
        except ValueError as e:
            rec["message"] = str(e)
        rec["ok"] = "b must have" in rec.get("message", "")
        return rec
    if kind == "nan":
        b[n // 2, n // 3] = b[n // 3, n // 2] = np.nan
    else:
        b[n // 2, n // 2] = -4.0 * n
    w, v, status = jaxmg.eigh(
        place(a, mesh, A_SPEC), place(b, mesh, A_SPEC), T_A=tile, return_status=True
    )
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    rec.update(
        statuses=statuses, all_nan=bool(np.isnan(gather(w)).all() and np.isnan(gather(v)).all())
    )
    want_above = n if kind == "not-positive-definite" else 0
    rec["ok"] = rec["all_nan"] and len(set(statuses)) == 1 and statuses[0] > want_above
    return rec


def two_stage_plan(n):
    """[(name, kind, params)]: the CPU engine's two stages with eigenvectors (cpu_eigh=
    two-stage; its default for eigenvalues alone, so the plain "values" cases take them on 1-D
    grids): four dtypes at bands 4 and 5 (tiles that divide n and pad), degenerate and clustered
    spectra, a user's jit, Q₂ through the backend's fused WaveApply (eig_q2="fused"), bands 40
    and 64 on larger matrices; and p?syevd for eigenvalues alone (cpu_eigh=scalapack)."""
    from solve_plan import DTYPE_NAMES

    plan = []

    def add(dtype_name, tile, variant, order=n):
        params = dict(dtype_name=dtype_name, n=order, tile=tile, variant=variant)
        plan.append((eigh_name(dtype_name, order, tile, variant), "eigh", params))

    for dtype_name in DTYPE_NAMES:
        for tile in (4, 5):
            add(dtype_name, tile, "two-stage")
    for variant in ("degenerate", "clustered", "jit"):
        add("float64", 5, f"two-stage-{variant}")
    add("complex128", 4, "two-stage-degenerate")
    add("float64", 8, "two-stage-fused")
    add("complex64", 5, "two-stage-clustered-fused")
    add("float64", 64, "two-stage", 144)
    add("complex64", 40, "two-stage-clustered", 144)
    add("float64", 5, "scalapack-values")
    add("complex128", 4, "scalapack-values")
    # subset_by_index by the two stages (the default there): the k lowest, a window that starts
    # and ends inside tiles, the k largest, values alone, and a band of 64; and by p?syevr
    # (cpu_eigh=scalapack), with and without vectors.
    k = max(2, n // 8) // 2 * 2
    for dtype_name, tile, lo, hi, form, order in (
        ("float64", 4, 0, k, "two-stage", n),
        ("complex128", 5, 3, 3 + 2 * k + 1, "two-stage", n),
        ("float32", 5, n - k, n, "two-stage", n),
        ("complex64", 4, 1, 1 + k, "two-stage-values", n),
        ("float64", 64, 50, 90, "two-stage", 144),
        ("complex128", 5, n // 3, n // 3 + k, "scalapack", n),
        ("float64", 4, 2, 2 + k, "scalapack-values", n),
    ):
        params = dict(dtype_name=dtype_name, n=order, tile=tile, lo=lo, hi=hi, form=form)
        name = f"syevd-subset/{dtype_name}/n{order}/T{tile}/{lo}:{hi}/{form}"
        plan.append((name, "eigh-subset", params))
    return plan


def eigh_plan(n, tiles=(None, 4, 5), values=(), vectors=()):
    """[(name, kind, params)]: four dtypes x tiles, eigenvalues only (four dtypes, degenerate and
    clustered spectra), a user's jit, donation, degenerate and clustered spectra, failures.
    values, vectors: extra (n, tile) of eigenvalues-only cases and of cases with eigenvectors
    for the four dtypes (larger matrices)."""
    from solve_plan import DTYPE_NAMES

    plan = []

    def add(dtype_name, tile, variant="", order=n):
        params = dict(dtype_name=dtype_name, n=order, tile=tile, variant=variant)
        plan.append((eigh_name(dtype_name, order, tile, variant), "eigh", params))

    for dtype_name in DTYPE_NAMES:
        for tile in tiles:
            add(dtype_name, tile)
        add(dtype_name, tiles[-1], "values")
    add("complex128", 4, "values")
    for variant in ("values-degenerate", "values-clustered"):
        add("float64", tiles[-1], variant)
    for order, tile in values:
        for dtype_name in DTYPE_NAMES:
            add(dtype_name, tile, "values", order)
        add("float64", tile, "values-clustered", order)
    for order, tile in vectors:
        for dtype_name in DTYPE_NAMES:
            add(dtype_name, tile, "", order)
        add("float64", tile, "clustered", order)
        add("complex128", tile, "degenerate", order)
    for variant in ("jit", "donate", "degenerate", "clustered"):
        add("float64", 4, variant)
    add("complex128", 5, "degenerate")
    for kind in ("not-hermitian", "nan", "nan-values"):
        plan.append((f"syevd/{kind}", "eigh-failure", dict(kind=kind, n=n, tile=4)))
    for dtype_name in DTYPE_NAMES:
        for tile in tiles[-2:]:
            params = dict(dtype_name=dtype_name, n=n, tile=tile)
            plan.append((f"eigh-ab/{dtype_name}/n{n}/T{tile}", "eigh-generalized", params))
    for variant in ("values", "jit"):
        params = dict(dtype_name="float64", n=n, tile=tiles[-1], variant=variant)
        plan.append((f"eigh-ab/float64/n{n}/{variant}", "eigh-generalized", params))
    for kind in ("not-positive-definite", "nan", "shape"):
        plan.append((f"eigh-ab/{kind}", "eigh-generalized-failure", dict(kind=kind, n=n, tile=4)))
    # subset_by_index: the k lowest, a middle window, the k largest, each form once.
    k = max(2, n // 8) // 2 * 2  # even: divides over 1 or 2 mesh columns
    windows = [
        ("float64", 4, 0, k, ""),
        ("complex128", 5, n // 3, n // 3 + k, ""),
        ("float32", 4, n - k, n, "jit"),
        ("complex64", 5, 1, 1 + k, "values"),
        ("float64", 5, n - k - 1, n - 1, "linalg"),
        ("float64", 4, 2, 2 + k, "context"),
        ("float64", 4, 0, k, "blocks"),
        ("complex128", 4, 0, k, "generalized"),
        ("float64", 4, n // 2, n // 2 + k, "jvp"),
        ("complex128", 5, 1, 1 + k, "generalized-jvp"),
        ("float64", 5, n // 4, n // 4 + k, "jvp-vectors"),
        ("complex128", 4, n - k, n, "jvp-vectors"),
        ("float64", 5, 0, 1, ""),  # one pair
    ]
    for dtype_name, tile, lo, hi, form in windows:
        params = dict(dtype_name=dtype_name, n=n, tile=tile, lo=lo, hi=hi, form=form)
        name = f"syevd-subset/{dtype_name}/n{n}/T{tile}/{lo}:{hi}" + (f"/{form}" if form else "")
        plan.append((name, "eigh-subset", params))
    plan.append(("syevd-subset/bad-input", "eigh-subset-checks", {}))
    return plan
