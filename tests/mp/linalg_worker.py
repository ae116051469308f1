"""jaxmg.linalg against NumPy on one mesh, as jax.numpy.linalg / jax.scipy.linalg users write
it, with no jax.set_mesh (the arrays are placed on the mesh, and that is all): every spelling in
four dtypes, output shardings asserted, the factors' unpacking and round trips (also inside jit
and across a jit boundary), NotImplementedError and error messages that name the function
called; and jax.vmap over the routines (potrs, lu_solve under jit, slogdet, the gradient of
potrs), under the context mesh.

Usage: mpirun -n P python linalg_worker.py ROWS COLS DTYPES VMAP OUT.json
  DTYPES: the dtypes of the per-dtype cases, comma-separated (float32,complex128); VMAP: 1 to
  run the jax.vmap cases too, "only" to run just those (or some: "only:vmap_gesvd"). On GPUs:
  `python -m jaxmg launch -n 2 tests/mp/linalg_worker.py 2 1 float32,float64,complex64,complex128
  1 OUT.json` (one GPU per process), or without a launcher on one GPU:
  `python tests/mp/linalg_worker.py 1 1 ... OUT.json`.
"""

import json
import os
import sys
import time
import traceback
from pathlib import Path

import jax

if "OMPI_COMM_WORLD_SIZE" in os.environ:  # under mpirun (or python -m jaxmg launch)
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
import jaxmg.linalg as L  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factor_cases import signed_general  # noqa: E402
from linalg_cases import (  # noqa: E402
    A_SPEC,
    B_SPEC,
    DTYPES,
    gather,
    hermitian_noise,
    linalg_tol,
    local_scalars,
    place,
    raises,
    rel_err,
    rhs,
    sharded_as,
    spd,
    tall,
)

rows, cols = int(sys.argv[1]), int(sys.argv[2])
dtype_names, out_path = sys.argv[3].split(","), sys.argv[5]
vmap_only = sys.argv[4].startswith("only")
with_vmap = vmap_only or sys.argv[4] == "1"
vmap_names = sys.argv[4].split(":", 1)[1].split(",") if ":" in sys.argv[4] else None
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
N = 24
REP = P()


def on(x, spec=A_SPEC):
    return place(x, mesh, spec)


def err(x, ref):
    return rel_err(gather(x), ref)


def scalar(x):
    return local_scalars(x)[0][0]


def adj(x):
    return x.conj().swapaxes(-1, -2)


# ------------------------------------------------------------------------------------------------
# The spellings, per dtype: {label: error}.


def case_solve(dt):
    a, h, b = signed_general(N, dt, 4), spd(N, dt, 4), rhs(N, 3, dt, 4)
    ap, hp, bp = on(a), on(h), on(b, B_SPEC)
    dominant = (a + N * np.eye(N)).astype(dt)  # its triangles are well conditioned too
    dp = on(dominant)
    x = L.solve(ap, bp)
    xv = L.solve(ap, on(b[:, 0].copy(), P("pr")))
    xp = L.solve(hp, bp, assume_a="pos")
    xh = L.solve(hp, bp, False, assume_a="her")
    xu = L.solve(dp, bp, assume_a="upper triangular")
    xl = L.solve(dp, bp, assume_a="lower triangular")
    xs = L.solve_triangular(dp, bp, trans=1, lower=True)
    xd = L.solve(dp, bp, assume_a="diagonal")
    xt = L.solve(dp, bp, assume_a="tridiagonal")
    tri = np.triu(np.tril(dominant, 1), -1)
    return {
        "gen": err(x, np.linalg.solve(a, b)),
        "gen sharding": sharded_as(x, mesh, B_SPEC),
        "vector": err(xv, np.linalg.solve(a, b[:, 0])),
        "vector sharding": sharded_as(xv, mesh, P("pr")),
        "pos": err(xp, np.linalg.solve(h, b)),
        "pos sharding": sharded_as(xp, mesh, B_SPEC),
        "her": err(xh, np.linalg.solve(h, b)),
        "upper triangular": err(xu, np.linalg.solve(np.triu(dominant), b)),
        "lower triangular": err(xl, np.linalg.solve(np.tril(dominant), b)),
        "solve_triangular": err(xs, np.linalg.solve(np.tril(dominant).T, b)),
        "solve_triangular sharding": sharded_as(xs, mesh, B_SPEC),
        "diagonal": err(xd, b / np.diag(dominant)[:, None]),
        "tridiagonal": err(xt, np.linalg.solve(tri, b)),
    }


def case_inv_det(dt):
    a = signed_general(N, dt, 5)
    ap = on(a)
    ai = L.inv(ap)
    d = L.det(ap)
    sign, logabsdet = L.slogdet(ap)
    ref_sign, ref_log = np.linalg.slogdet(a.astype(np.complex128))
    ref_det = np.linalg.det(a.astype(np.complex128))
    return {
        "inv": err(ai, np.linalg.inv(a)),
        "inv sharding": sharded_as(ai, mesh, A_SPEC),
        "det": abs(scalar(d) - ref_det) / abs(ref_det),
        "det sharding": sharded_as(d, mesh, REP),
        "slogdet sign": abs(scalar(sign) - ref_sign),
        "slogdet logabsdet": abs(scalar(logabsdet) - ref_log) / max(1.0, abs(ref_log)),
    }


def case_cholesky(dt):
    h = spd(N, dt, 6)
    ref = np.linalg.cholesky(h.astype(np.complex128))
    lower = L.cholesky(on(h))
    upper = L.cholesky(on(h), upper=True)
    # Only the lower triangle read without symmetrizing: garbage above the diagonal.
    junk = np.tril(h) + np.triu(np.full_like(h, 7), 1)
    lower_only = L.cholesky(on(junk), symmetrize_input=False)
    # Hermitian only up to 1e-3: the Cholesky factor of its Hermitian part (as JAX).
    x = hermitian_noise(N, dt, 6)
    sym = L.cholesky(on(x))
    return {
        "lower": err(lower, ref),
        "lower sharding": sharded_as(lower, mesh, A_SPEC),
        "upper": err(upper, adj(ref)),
        "upper sharding": sharded_as(upper, mesh, A_SPEC),
        "lower triangle only": err(lower_only, ref),
        "symmetrized": err(sym, np.linalg.cholesky(((x + adj(x)) / 2).astype(np.complex128))),
    }


def case_eigh(dt):
    x = hermitian_noise(N, dt, 7)  # symmetric only up to 1e-3: symmetrize_input's default
    xs = ((x + adj(x)) / 2).astype(np.complex128)
    w, v = L.eigh(on(x))
    wu, vu = L.eigh(on(x), "U", False)
    wl = L.eigvalsh(on(x), "L", symmetrize_input=False)
    wd = L.eigvalsh(on(x))
    vg = gather(v)
    vug = gather(vu)
    upper = np.triu(x) + adj(np.triu(x, 1))
    upper = upper - np.diag(np.imag(np.diag(upper)) * 1j) if np.iscomplexobj(upper) else upper
    # Without symmetrizing, UPLO=None takes a as it is: it must be Hermitian (NaN otherwise).
    w_none = L.eigvalsh(on(x), None, symmetrize_input=False)
    return {
        "values": err(w, np.linalg.eigvalsh(xs)),
        "values sharding": sharded_as(w, mesh, P(None)),
        "vectors": rel_err(xs @ vg, vg * np.linalg.eigvalsh(xs)),
        "vectors orthonormal": rel_err(adj(vg) @ vg, np.eye(N)),
        "vectors sharding": sharded_as(v, mesh, A_SPEC),
        "UPLO=U": err(wu, np.linalg.eigvalsh(x.astype(np.complex128), UPLO="U")),
        "UPLO=U vectors": rel_err(upper @ vug, vug * np.linalg.eigvalsh(upper)),
        "eigvalsh UPLO=L": err(wl, np.linalg.eigvalsh(x.astype(np.complex128), UPLO="L")),
        "eigvalsh": err(wd, np.linalg.eigvalsh(xs)),
        "not Hermitian, as it is: NaN": 0.0 if np.isnan(gather(w_none)).all() else float("inf"),
    }


def case_svd(dt):
    a, t = signed_general(N, dt, 8), tall(2 * N, N, dt, 8)
    w = adj(t).copy()  # wide: N x 2N
    u, s, vh = L.svd(on(a))
    ut, st, vht = L.svd(on(t), full_matrices=False)
    uw, sw, vhw = L.svd(on(w), False)
    sv = L.svd(on(w), compute_uv=False)
    ref_t = np.linalg.svd(t, compute_uv=False)
    ug, utg, uwg = gather(u), gather(ut), gather(uw)
    return {
        "square values": err(s, np.linalg.svd(a, compute_uv=False)),
        "square reconstructs": rel_err((ug * gather(s)) @ gather(vh), a),
        "square shardings": sharded_as(u, mesh, A_SPEC) + sharded_as(vh, mesh, A_SPEC),
        "values sharding": sharded_as(s, mesh, P(None)),
        "tall reconstructs": rel_err((utg * gather(st)) @ gather(vht), t),
        "tall U orthonormal": rel_err(adj(utg) @ utg, np.eye(N)),
        "tall shardings": sharded_as(ut, mesh, A_SPEC) + sharded_as(vht, mesh, A_SPEC),
        "wide reconstructs": rel_err((uwg * gather(sw)) @ gather(vhw), w),
        "wide shardings": sharded_as(uw, mesh, A_SPEC) + sharded_as(vhw, mesh, A_SPEC),
        "compute_uv=False wide": err(sv, ref_t),
        "values-only sharding": sharded_as(sv, mesh, P(None)),
    }


def case_pinv_lstsq(dt):
    a, t = signed_general(N, dt, 9), tall(2 * N, N, dt, 9)
    w = adj(t).copy()
    y = tall(2 * N, 2, dt, 10)
    pt, pa, pw = L.pinv(on(t)), L.pinv(on(a)), L.pinv(on(w))
    x, resid, rank, s = L.lstsq(on(t), on(y, B_SPEC))
    xr, rr, kr, sr = np.linalg.lstsq(t, y, rcond=None)
    xv, rv, _, _ = L.lstsq(on(t), on(y[:, 0].copy(), P("pr")))
    return {
        "pinv tall": err(pt, np.linalg.pinv(t)),
        "pinv tall sharding": sharded_as(pt, mesh, A_SPEC),
        "pinv square": err(pa, np.linalg.pinv(a)),
        "pinv square sharding": sharded_as(pa, mesh, A_SPEC),
        "pinv wide": err(pw, np.linalg.pinv(w)),
        "lstsq x": err(x, xr),
        "lstsq x sharding": sharded_as(x, mesh, B_SPEC),
        "lstsq residuals": err(resid, rr),
        "lstsq rank": 0.0 if int(scalar(rank).real) == kr else float("inf"),
        "lstsq s": err(s, sr),
        "lstsq vector": err(xv, xr[:, 0]),
        "lstsq vector residual": err(rv, rr[0]),
    }


def case_qr(dt):
    t = tall(2 * N, N, dt, 11)
    a = signed_general(N, dt, 11)
    q, r = L.qr(on(t))
    only_r = L.qr(on(t), mode="r")
    qc, rc = L.qr(on(a), "complete")
    qg, rg = gather(q), gather(r)
    return {
        "reconstructs": rel_err(qg @ rg, t),
        "orthonormal": rel_err(adj(qg) @ qg, np.eye(N)),
        "R upper": rel_err(np.tril(rg, -1), np.zeros_like(rg)),
        "shardings": sharded_as(q, mesh, A_SPEC) + sharded_as(r, mesh, A_SPEC),
        "mode r": rel_err(np.abs(gather(only_r)), np.abs(rg)),
        "complete square": rel_err(gather(qc) @ gather(rc), a),
    }


def lu_shape(p, lower, upper, a):
    """How far (p, l, u) is from a valid LU of a: p a permutation, l unit lower triangular,
    u upper triangular, p l u = a (the largest of the relative errors)."""
    pg, lg, ug = gather(p), gather(lower), gather(upper)
    n = a.shape[0]
    ones = np.ones(n)
    permutation = (
        np.isin(pg, (0, 1)).all()
        and np.array_equal(pg.sum(0), ones)
        and np.array_equal(pg.sum(1), ones)
    )
    return max(
        0.0 if permutation else float("inf"),
        rel_err(np.triu(lg, 1), np.zeros_like(lg)),
        rel_err(np.diag(lg), ones),
        rel_err(np.tril(ug, -1), np.zeros_like(ug)),
        rel_err(pg @ lg @ ug, a),
    )


# cuSOLVERMp's Getrf, which factors on GPU engine grids of several process rows, pivots its
# panels its own way once a process row holds three tiles or more (measured on 2x1; docs/gpu.md):
# its p, l, u are a valid LU of a (|l| may exceed 1), not SciPy's. Everywhere else (CPU; GPU
# meshes of one row) they are SciPy's.
LU_PIVOTS_AS_SCIPY = jax.devices()[0].platform != "gpu" or rows == 1


def case_lu(dt):
    a = signed_general(N, dt, 13)
    ap = on(a)
    p, lower, upper = L.lu(ap)
    p5, lower5, upper5 = L.lu(ap, T_A=5)  # a tile that pads
    pl, u_pl = L.lu(ap, permute_l=True)
    ref_p, ref_l, ref_u = scipy.linalg.lu(a)
    singular = a.copy()
    singular[:, 3] = singular[:, 1]
    p_s, l_s, u_singular = L.lu(on(singular))
    if LU_PIVOTS_AS_SCIPY:
        as_scipy = {
            "p": err(p, ref_p),
            "l": err(lower, ref_l),
            "u": err(upper, ref_u),
            "p, tile 5": err(p5, ref_p),
            "l, tile 5": err(lower5, ref_l),
            "u, tile 5": err(upper5, ref_u),
            "permute_l": err(pl, ref_p @ ref_l),
            "permute_l u": err(u_pl, ref_u),
        }
    else:
        as_scipy = {
            "permute_l": err(pl, gather(p) @ gather(lower)),
            "permute_l u": err(u_pl, gather(upper)),
        }
    return {
        **as_scipy,
        "a valid LU": lu_shape(p, lower, upper, a),
        "a valid LU, tile 5": lu_shape(p5, lower5, upper5, a),
        "p sharding": sharded_as(p, mesh, A_SPEC),
        "l sharding": sharded_as(lower, mesh, A_SPEC),
        "u sharding": sharded_as(upper, mesh, A_SPEC),
        "permute_l sharding": sharded_as(pl, mesh, A_SPEC),
        "singular: reconstructs": rel_err(gather(p_s) @ gather(l_s) @ gather(u_singular), singular),
        "singular: a zero on u's diagonal": float(
            np.min(np.abs(np.diag(gather(u_singular)))) / np.abs(a).max()
        ),
    }


def case_lu_factor(dt):
    a, b = signed_general(N, dt, 12), rhs(N, 2, dt, 12)
    ap, bp = on(a), on(b, B_SPEC)
    f = L.lu_factor(ap)
    lu, piv = f  # as jax.scipy.linalg.lu_factor
    x_pair = L.lu_solve((lu, piv), bp)
    x_factor = L.lu_solve(f, bp)
    x_t = L.lu_solve(f, bp, trans=1)
    x_h = L.lu_solve((lu, piv), bp, 2)

    @jax.jit
    def inside(m, v):
        lu, piv = L.lu_factor(m)
        return L.lu_solve((lu, piv), v)

    kept = jax.jit(L.lu_factor)(ap)  # the factor crosses a jit boundary (a pytree)
    ref = np.linalg.solve(a, b)
    return {
        "unpacks": 0.0 if len(f) == 2 and f[0] is lu and f[1] is piv else float("inf"),
        "pivots int32": 0.0 if piv.dtype == jnp.int32 else float("inf"),
        "lu sharded over the mesh": 0.0 if len(lu.sharding.device_set) == rows * cols else 1.0,
        "(lu, piv) round trip": err(x_pair, ref),
        "factor round trip": err(x_factor, ref),
        "x sharding": sharded_as(x_pair, mesh, B_SPEC),
        "trans=1": err(x_t, np.linalg.solve(a.T, b)),
        "trans=2": err(x_h, np.linalg.solve(adj(a), b)),
        "inside jit": err(inside(ap, bp), ref),
        "across jit": err(jax.jit(L.lu_solve)(kept, bp), ref),
        **(one_by_one_lu(lu, piv, a) if rows * cols == 1 else {}),
    }


def one_by_one_lu(lu, piv, a):
    """On a 1x1 mesh (no relabeling; N one tile): lu.T and piv - 1 are SciPy's lu_factor(a.T)."""
    ref_lu, ref_piv = scipy.linalg.lu_factor(a.T)
    same = np.array_equal(gather(piv) - 1, ref_piv)
    return {"1x1: SciPy's lu_factor(a.T)": rel_err(gather(lu).T, ref_lu) + (0.0 if same else 1.0)}


def case_cho_factor(dt):
    h, b = spd(N, dt, 13), rhs(N, 2, dt, 13)
    hp, bp = on(h), on(b, B_SPEC)
    f = L.cho_factor(hp, lower=True)
    c, lower = f  # as jax.scipy.linalg.cho_factor
    x_pair = L.cho_solve((c, lower), bp)
    x_factor = L.cho_solve(f, bp)
    c_upper, lower_upper = L.cho_factor(hp)

    @jax.jit
    def inside(m, v):
        return L.cho_solve(L.cho_factor(m), v)

    kept = jax.jit(lambda m: L.cho_factor(m, lower=True))(hp)  # a pytree, `lower` kept
    ref = np.linalg.solve(h, b)
    return {
        "unpacks": 0.0 if len(f) == 2 and lower is True and lower_upper is False else float("inf"),
        "across jit": err(jax.jit(L.cho_solve)(kept, bp), ref) + (0.0 if kept.lower else 1.0),
        "c sharded over the mesh": 0.0 if len(c.sharding.device_set) == rows * cols else 1.0,
        "(c, lower) round trip": err(x_pair, ref),
        "factor round trip": err(x_factor, ref),
        "lower=False round trip": err(L.cho_solve((c_upper, lower_upper), bp), ref),
        "x sharding": sharded_as(x_pair, mesh, B_SPEC),
        "inside jit": err(inside(hp, bp), ref),
        "vector": err(L.cho_solve(f, on(b[:, 0].copy(), P("pr"))), ref[:, 0]),
        **(
            {"1x1: SciPy's cho_factor(a)": err(c, scipy.linalg.cho_factor(h)[0])}
            if rows * cols == 1 and jax.default_backend() == "cpu"
            else {}
        ),
    }


def case_norms(dt):
    a = signed_general(N, dt, 14)
    ap = on(a)
    s = np.linalg.svd(a, compute_uv=False)
    deficient = a.copy()
    deficient[:, 3] = deficient[:, 5]
    return {
        "norm 2": err(L.norm(ap, 2), s[0]),
        "norm nuc": err(L.norm(ap, "nuc"), s.sum()),
        "norm fro": err(L.norm(ap), np.linalg.norm(a)),
        "norm 1": err(L.norm(ap, 1), np.linalg.norm(a, 1)),
        "matrix_norm -2 keepdims": err(
            L.matrix_norm(ap, ord=-2, keepdims=True), np.array([[s[-1]]])
        ),
        "svdvals": err(L.svdvals(ap), s),
        "matrix_norm fro": err(L.matrix_norm(ap), np.linalg.norm(a)),
        "cond": err(L.cond(ap), s[0] / s[-1]),
        "cond 1": err(L.cond(ap, 1), np.linalg.cond(a, 1)),
        "matrix_rank deficient": err(L.matrix_rank(on(deficient)), N - 1),
        "matrix_power 3": err(L.matrix_power(ap, 3), np.linalg.matrix_power(a, 3)),
        "matrix_power -2": err(L.matrix_power(ap, -2), np.linalg.matrix_power(a, -2)),
        "matrix_power sharding": sharded_as(L.matrix_power(ap, 2), mesh, A_SPEC),
    }


def case_polar(dt):
    t = tall(2 * N, N, dt, 15)
    u_ref, s_ref, vh_ref = np.linalg.svd(t, full_matrices=False)
    up, p = L.polar(on(t))
    w = adj(t).copy()
    ul, pl = L.polar(on(w), side="left")  # w = pl ul
    return {
        "right U": err(up, u_ref @ vh_ref),
        "right P": err(p, (adj(vh_ref) * s_ref) @ vh_ref),
        "right U sharding": sharded_as(up, mesh, A_SPEC),
        "left reconstructs": rel_err(gather(pl) @ gather(ul), w),
        "left P": err(pl, (adj(vh_ref) * s_ref) @ vh_ref),
        "left shardings": sharded_as(ul, mesh, A_SPEC) + sharded_as(pl, mesh, A_SPEC),
    }


# ------------------------------------------------------------------------------------------------
# Once (float64): batches, the generalized problem, a rank-deficient lstsq, a jitted call, the
# refusals and the error messages.


def case_batched(dt):
    batch = np.stack([signed_general(N, dt, 1), signed_general(N, dt, 2)])
    bb = np.stack([rhs(N, 3, dt, 1), rhs(N, 3, dt, 2)])
    x = L.solve(on(batch, P(None, "pr", "pc")), on(bb, P(None, "pr")))
    t = np.stack([tall(2 * N, N, dt, 3), tall(2 * N, N, dt, 4)])
    q, r = L.qr(on(t, P(None, "pr", "pc")))
    d = L.det(on(batch, P(None, "pr", "pc")))
    return {
        "solve": err(x, np.linalg.solve(batch, bb)),
        "qr": rel_err(np.einsum("bij,bjk->bik", gather(q), gather(r)), t),
        "det": err(d, np.linalg.det(batch)),
    }


def case_eigh_generalized(dt):
    h = spd(N, dt, 4)
    k = spd(N, dt, 9) + N * np.eye(N, dtype=dt)
    w, v = L.eigh(on(h), b=on(k))
    lower = np.linalg.cholesky(k)
    c = np.linalg.solve(lower, np.linalg.solve(lower, h).T).T
    ref = np.linalg.eigvalsh((c + c.T) / 2)
    vg = gather(v)
    return {
        "values": err(w, ref),
        "vectors": rel_err(h @ vg, (k @ vg) * ref),
        "b-orthonormal": rel_err(vg.T @ k @ vg, np.eye(N)),
        "vectors sharding": sharded_as(v, mesh, A_SPEC),
    }


def case_lstsq_deficient(dt):
    t = tall(2 * N, N, dt, 16)
    t[:, 3] = t[:, 5]  # rank N - 1: the minimum-norm solution
    y = tall(2 * N, 2, dt, 17)
    x, _, rank, _ = L.lstsq(on(t), on(y, B_SPEC))
    return {
        "x": err(x, np.linalg.lstsq(t, y, rcond=None)[0]),
        "rank": 0.0 if int(scalar(rank).real) == N - 1 else float("inf"),
    }


def case_jit_no_mesh(dt):
    a, b = signed_general(N, dt, 18), rhs(N, 2, dt, 18)
    h = spd(N, dt, 18)
    x = jax.jit(L.solve)(on(a), on(b, B_SPEC))
    w = jax.jit(lambda m: L.eigh(m)[0])(on(h))
    low = jax.jit(L.cholesky)(on(h))
    return {
        "solve": err(x, np.linalg.solve(a, b)),
        "solve sharding": sharded_as(x, mesh, B_SPEC),
        "eigh": err(w, np.linalg.eigvalsh(h)),
        "cholesky": err(low, np.linalg.cholesky(h)),
        "cholesky sharding": sharded_as(low, mesh, A_SPEC),
    }


def case_grad_unpacked(dt):
    """Gradients through solves with unpacked factors (the pair finds its factor, and the
    factor's derivative rule, back): d Σ (A⁻¹ B) / dA = −(A⁻ᵀ 1)(A⁻¹ B 1)ᵀ."""
    a, h, b = signed_general(N, dt, 20), spd(N, dt, 20), rhs(N, 2, dt, 20)
    bp = on(b, B_SPEC)

    def lu_loss(m, v):
        lu, piv = L.lu_factor(m)
        return jnp.sum(L.lu_solve((lu, piv), v))

    def cho_loss(m, v):
        c, lower = L.cho_factor(m)
        return jnp.sum(L.cho_solve((c, lower), v))

    def ref(m):
        return -np.outer(np.linalg.solve(m.T, np.ones(N)), np.linalg.solve(m, b).sum(axis=1))

    # (Under the context mesh: the factors' log-determinant rule needs it under jax.grad.)
    with jax.set_mesh(mesh):
        return {
            "lu": err(jax.grad(lu_loss)(on(a), bp), ref(a)),
            "cho": err(jax.jit(jax.grad(cho_loss))(on(h), bp), ref(h)),
        }


def case_grad_lu(dt):
    """lu's derivatives against JAX's own on the gathered matrix: forward (l's and u's tangents)
    and reverse (a scalar of both factors)."""
    a = signed_general(N, dt, 21)
    t = signed_general(N, dt, 22)
    ap, tp = on(a), on(t)
    _, tangents = jax.jvp(lambda m: L.lu(m)[1:], (ap,), (tp,))
    _, ref = jax.jvp(lambda m: jax.scipy.linalg.lu(m)[1:], (jnp.asarray(a),), (jnp.asarray(t),))

    def loss(lu):
        return lambda m: jnp.sum(jnp.sin(lu(m)[1])) + jnp.sum(lu(m)[2] ** 2)

    grad = jax.jit(jax.grad(loss(L.lu)))(ap)
    return {
        "jvp l": err(tangents[0], np.asarray(ref[0])),
        "jvp u": err(tangents[1], np.asarray(ref[1])),
        "grad": err(grad, np.asarray(jax.grad(loss(jax.scipy.linalg.lu))(jnp.asarray(a)))),
        "grad sharding": sharded_as(grad, mesh, A_SPEC),
    }


def case_refusals(dt):
    a, b = signed_general(N, dt, 19), rhs(N, 2, dt, 19)
    ap, bp = on(a), on(b, B_SPEC)
    t = on(tall(2 * N, N, dt, 19))
    lu_plain, piv_plain = jnp.asarray(a), jnp.zeros((N,), jnp.int32)
    ints = on(np.eye(N, dtype=np.int32))
    NI = NotImplementedError
    return {
        "eig": raises(lambda: L.eig(ap), NI, "jaxmg.linalg.eig:", "eigh"),
        "eigvals": raises(lambda: L.eigvals(ap), NI, "jaxmg.linalg.eigvals:", "eigvalsh"),
        "tensorinv": raises(lambda: L.tensorinv(ap), NI, "jaxmg.linalg.tensorinv:", "inv"),
        "tensorsolve": raises(lambda: L.tensorsolve(ap, bp), NI, "jaxmg.linalg.tensorsolve:"),
        "qr raw": raises(lambda: L.qr(t, mode="raw"), NI, "jaxmg.linalg.qr:", "reduced"),
        "qr complete tall": raises(lambda: L.qr(t, mode="complete"), NI, "jaxmg.linalg.qr:"),
        "svd subset full_matrices": raises(
            lambda: L.svd(ap, subset_by_index=(0, 2)), ValueError, "jaxmg.linalg.svd:", "False"
        ),
        "svd subset range": raises(
            lambda: L.svd(ap, False, subset_by_index=(0, N + 1)), ValueError, "jaxmg.linalg.svd:"
        ),
        "svd subset ints": raises(
            lambda: L.svd(ap, False, subset_by_index=(0.0, 2)), TypeError, "subset_by_index"
        ),
        "solve assume_a": raises(
            lambda: L.solve(ap, bp, assume_a="pd"), ValueError, "jaxmg.linalg.solve:", "'pos'"
        ),
        "solve pos names solve": raises(
            lambda: L.solve(t, bp, assume_a="pos"), ValueError, "jaxmg.linalg.solve:", "square"
        ),
        "solve unknown keyword": raises(
            lambda: L.solve(ap, bp, foo=1), TypeError, "jaxmg.linalg.solve:", "'foo'"
        ),
        "solve b dtype": raises(
            lambda: L.solve(ap, on(b.astype(np.complex64), B_SPEC)),
            TypeError,
            "jaxmg.linalg.solve:",
            "astype",
        ),
        "lu_solve foreign pair": raises(
            lambda: L.lu_solve((lu_plain, piv_plain), bp), ValueError, "jaxmg.linalg.lu_solve:"
        ),
        "lu_solve trans": raises(
            lambda: L.lu_solve(L.lu_factor(ap), bp, trans=3), ValueError, "jaxmg.linalg.lu_solve:"
        ),
        "cho_solve not a factor": raises(
            lambda: L.cho_solve(ap, bp), TypeError, "jaxmg.linalg.cho_solve:"
        ),
        "det dtype names det": raises(lambda: L.det(ints), TypeError, "jaxmg.linalg.det:", "int32"),
        "eigh UPLO": raises(lambda: L.eigh(ap, "X"), ValueError, "jaxmg.linalg.eigh:", "UPLO"),
        "lstsq rows": raises(lambda: L.lstsq(t, bp), ValueError, "jaxmg.linalg.lstsq:"),
        "matrix_power n": raises(
            lambda: L.matrix_power(ap, 1.5), TypeError, "jaxmg.linalg.matrix_power:"
        ),
    }


PER_DTYPE = [
    case_solve,
    case_inv_det,
    case_cholesky,
    case_eigh,
    case_svd,
    case_pinv_lstsq,
    case_qr,
    case_lu,
    case_lu_factor,
    case_cho_factor,
    case_norms,
    case_polar,
]
ONCE = [
    case_batched,
    case_eigh_generalized,
    case_lstsq_deficient,
    case_jit_no_mesh,
    case_grad_unpacked,
    case_grad_lu,
    case_refusals,
]


# ------------------------------------------------------------------------------------------------
# jax.vmap over the routines (float64), under the context mesh.

BATCH = np.stack([spd(N, np.float64, s) for s in (1, 2, 3)])
GENERAL = np.stack([signed_general(N, np.float64, s) for s in (1, 2, 3)])
RHS = np.stack([rhs(N, 2, np.float64, s) for s in (1, 2, 3)])


def batch_args():
    spec_a, spec_b = P(None, "pr", "pc"), P(None, "pr")
    return on(BATCH, spec_a), on(GENERAL, spec_a), on(RHS, spec_b)


def vmap_qr_lstsq_syevd():
    t = np.random.default_rng(5).standard_normal((2, 2 * N, N))
    tp = on(t, P(None, "pr", "pc"))
    q, r = jax.vmap(jaxmg.qr)(tp)
    y = np.random.default_rng(6).standard_normal((2, 2 * N, 2))
    x = jax.vmap(jaxmg.least_squares)(tp, on(y, P(None, "pr")))
    w = jax.vmap(lambda m: jaxmg.syevd(m, return_eigenvectors=False))(batch_args()[0])
    xref = np.stack([np.linalg.lstsq(t[i], y[i], rcond=None)[0] for i in range(2)])
    return {
        "qr": rel_err(np.einsum("bij,bjk->bik", gather(q), gather(r)), t),
        "least_squares": err(x, xref),
        "syevd": err(w, np.linalg.eigvalsh(BATCH)),
    }


def vmap_potrs():
    a, _, b = batch_args()
    x = jax.vmap(lambda m, v: jaxmg.potrs(m, v, T_A=5))(a, b)
    return {"x": err(x, np.linalg.solve(BATCH, RHS))}


def vmap_lu_solve_in_jit():
    _, g, b = batch_args()
    return {"x": err(jax.jit(jax.vmap(jaxmg.lu_solve))(g, b), np.linalg.solve(GENERAL, RHS))}


def vmap_slogdet():
    _, g, _ = batch_args()
    sign, logabsdet = jax.vmap(jaxmg.slogdet)(g)
    ref = np.linalg.slogdet(GENERAL)
    return {"sign": err(sign, ref.sign), "logabsdet": err(logabsdet, ref.logabsdet)}


def vmap_grad():
    a, _, b = batch_args()
    grad = jax.vmap(jax.grad(lambda m, v: jnp.sum(jaxmg.potrs(m, v)[:, 0])))(a, b)
    # d/dA Σ_i (A⁻¹ b)_{i0} = −A⁻ᵀ 1 x₀ᵀ
    x = np.linalg.solve(BATCH, RHS)
    ones = np.linalg.solve(np.transpose(BATCH, (0, 2, 1)), np.ones((3, N, 1)))[:, :, 0]
    return {"grad": err(grad, -np.einsum("bi,bj->bij", ones, x[:, :, 0]))}


def vmap_gesvd():
    t = np.random.default_rng(11).standard_normal((2, 2 * N, N))
    u, s, vh = jax.vmap(jaxmg.gesvd)(on(t, P(None, "pr", "pc")))
    return {
        "reconstructs": rel_err(np.einsum("bij,bj,bjk->bik", gather(u), gather(s), gather(vh)), t)
    }


VMAP = [vmap_qr_lstsq_syevd, vmap_potrs, vmap_lu_solve_in_jit, vmap_slogdet, vmap_grad, vmap_gesvd]


def record(name, dtype_name, fn):
    tol = linalg_tol(N, dtype_name)
    start = time.perf_counter()
    try:
        errors = fn()
        bad = {k: v for k, v in errors.items() if not v <= tol}
        seconds = round(time.perf_counter() - start, 2)
        return dict(
            case=name, dtype=dtype_name, tol=tol, errors=errors, failed=bad, ok=not bad, s=seconds
        )
    except Exception as ex:  # noqa: BLE001 - recorded, asserted by the test
        return dict(
            case=name,
            dtype=dtype_name,
            ok=False,
            exception=f"{type(ex).__name__}: {ex}",
            trace=traceback.format_exc()[-3000:],
        )


records = []


def keep(rec):
    """Adds a record; process 0 writes the records so far (a run stopped at its time limit keeps
    what ran) and prints the case."""
    records.append(rec)
    if jax.process_index() == 0:
        Path(out_path).write_text(json.dumps(dict(records=records), indent=1))
        print(f"[{'ok' if rec['ok'] else 'FAIL'}] {rec['case']} {rec['dtype']}", flush=True)


# JAXMG_LINALG_CASES: some of the per-dtype and once cases by name (qr,polar), for a run split
# in parts.
picked = os.environ.get("JAXMG_LINALG_CASES")
picked = None if not picked else picked.split(",")
for fn in [] if vmap_only else PER_DTYPE:
    if picked is not None and fn.__name__[5:] not in picked:
        continue
    for dtype_name in dtype_names:
        dt = DTYPES[dtype_name]
        keep(record(fn.__name__[5:], dtype_name, lambda fn=fn, dt=dt: fn(dt)))
for fn in [] if vmap_only else ONCE:
    if picked is not None and fn.__name__[5:] not in picked:
        continue
    keep(record(fn.__name__[5:], "float64", lambda fn=fn: fn(np.float64)))
if with_vmap:
    with jax.set_mesh(mesh):
        for fn in VMAP:
            if vmap_names is None or fn.__name__ in vmap_names:
                keep(record(fn.__name__, "float64", fn))
