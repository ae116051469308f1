"""jaxmg.linalg against NumPy on one mesh: solve (one matrix and a batch), inv, slogdet,
cho_factor + cho_solve and lu_factor + lu_solve in SciPy's call shapes, svd, polar (both
sides), lstsq (full rank and rank deficient), eigh's generalized problem; and jax.vmap over the
routines (potrs, lu_solve under jit, slogdet, the gradient of potrs).

Usage: mpirun -n P python linalg_worker.py ROWS COLS OUT.json
"""

import json
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factor_cases import signed_general  # noqa: E402
from linalg_cases import A_SPEC, B_SPEC, gather, local_scalars, place, rhs, spd  # noqa: E402

rows, cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
jax.set_mesh(mesh)
N = 24
a = signed_general(N, np.float64, 4)
h = spd(N, np.float64, 4)
b = rhs(N, 3, np.float64, 4)
ap, hp, bp = place(a, mesh, A_SPEC), place(h, mesh, A_SPEC), place(b, mesh, B_SPEC)
tol = 1e-10


def err(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(np.abs(ref).max(), 1.0))


def case_solve():
    return err(gather(jaxmg.linalg.solve(ap, bp)), np.linalg.solve(a, b))


def case_solve_batched():
    batch = np.stack([a, a + np.eye(N)])
    bb = np.stack([b, 2 * b])
    x = jaxmg.linalg.solve(place(batch, mesh, P(None, "pr", "pc")), place(bb, mesh, P(None, "pr")))
    return err(gather(x), np.linalg.solve(batch, bb))


def case_inv():
    return err(gather(jaxmg.linalg.inv(ap)), np.linalg.inv(a))


def case_slogdet():
    r = jaxmg.linalg.slogdet(ap)
    sign, logabsdet = local_scalars(r.sign, r.logabsdet)[0]
    ref = np.linalg.slogdet(a)
    return max(abs(sign - ref.sign), abs(np.real(logabsdet) - ref.logabsdet))


def case_cho():
    c = jaxmg.linalg.cho_factor(hp, lower=True)
    return err(gather(jaxmg.linalg.cho_solve(c, bp)), np.linalg.solve(h, b))


def case_lu():
    f = jaxmg.linalg.lu_factor(ap)
    return err(gather(jaxmg.linalg.lu_solve(f, bp)), np.linalg.solve(a, b))


def case_qr():
    t = np.random.default_rng(3).standard_normal((2 * N, N))
    q, r = jaxmg.linalg.qr(place(t, mesh, A_SPEC))
    only_r = jaxmg.linalg.qr(place(t, mesh, A_SPEC), mode="r")
    qg, rg = gather(q), gather(r)
    return max(err(qg @ rg, t), err(qg.T @ qg, np.eye(N)), err(np.abs(gather(only_r)), np.abs(rg)))


def case_qr_batched():
    t = np.random.default_rng(4).standard_normal((2, 2 * N, N))
    q, r = jaxmg.linalg.qr(place(t, mesh, P(None, "pr", "pc")))
    return err(np.einsum("bij,bjk->bik", gather(q), gather(r)), t)


def case_eigh():
    w, v = jaxmg.linalg.eigh(hp)
    wv = jaxmg.linalg.eigvalsh(hp)
    ref = np.linalg.eigvalsh(h)
    vg = gather(v)
    return max(err(gather(w), ref), err(gather(wv), ref), err(h @ vg, vg * ref))


def case_vmap_qr_lstsq_syevd():
    t = np.random.default_rng(5).standard_normal((2, 2 * N, N))
    tp = place(t, mesh, P(None, "pr", "pc"))
    q, r = jax.vmap(jaxmg.qr)(tp)
    y = np.random.default_rng(6).standard_normal((2, 2 * N, 2))
    x = jax.vmap(jaxmg.least_squares)(tp, place(y, mesh, P(None, "pr")))
    w = jax.vmap(lambda m: jaxmg.syevd(m, return_eigenvectors=False))(batch_args()[0])
    xref = np.stack([np.linalg.lstsq(t[i], y[i], rcond=None)[0] for i in range(2)])
    return max(
        err(np.einsum("bij,bjk->bik", gather(q), gather(r)), t),
        err(gather(x), xref),
        err(gather(w), np.linalg.eigvalsh(BATCH)),
    )


def case_svd():
    u, s, vh = jaxmg.linalg.svd(ap)  # square: full_matrices=True is the reduced one
    sv = jaxmg.linalg.svd(ap, compute_uv=False)
    t = np.random.default_rng(7).standard_normal((2 * N, N))
    ut, st, vht = jaxmg.linalg.svd(place(t, mesh, A_SPEC), full_matrices=False)
    ug, vg, utg, vtg = gather(u), gather(vh), gather(ut), gather(vht)
    return max(
        err(gather(s), np.linalg.svd(a, compute_uv=False)),
        err(gather(sv), np.linalg.svd(a, compute_uv=False)),
        err((ug * gather(s)) @ vg, a),
        err((utg * gather(st)) @ vtg, t),
        err(utg.T @ utg, np.eye(N)),
    )


def case_polar():
    t = np.random.default_rng(8).standard_normal((2 * N, N))
    u_ref, s_ref, vh_ref = np.linalg.svd(t, full_matrices=False)
    up, p = jaxmg.linalg.polar(place(t, mesh, A_SPEC))
    wide = t.T.copy()
    ul, pl = jaxmg.linalg.polar(place(wide, mesh, A_SPEC), side="left")  # wide = pl ul
    return max(
        err(gather(up), u_ref @ vh_ref),
        err(gather(p), (vh_ref.T * s_ref) @ vh_ref),
        err(gather(pl) @ gather(ul), wide),
        err(gather(pl), (vh_ref.T * s_ref) @ vh_ref),
    )


def case_lstsq():
    t = np.random.default_rng(9).standard_normal((2 * N, N))
    y = np.random.default_rng(10).standard_normal((2 * N, 2))
    tp, yp = place(t, mesh, A_SPEC), place(y, mesh, B_SPEC)
    x, resid, rank, s = jaxmg.linalg.lstsq(tp, yp)
    xr, rr, kr, sr = np.linalg.lstsq(t, y, rcond=None)
    deficient = t.copy()
    deficient[:, 3] = deficient[:, 5]  # rank N - 1: the minimum-norm solution
    xd, _, rank_d, _ = jaxmg.linalg.lstsq(place(deficient, mesh, A_SPEC), yp)
    xdr = np.linalg.lstsq(deficient, y, rcond=None)[0]
    xv, rv, _, _ = jaxmg.linalg.lstsq(tp, place(y[:, 0].copy(), mesh, P("pr")))
    return max(
        err(gather(x), xr),
        err(gather(resid), rr),
        float(int(rank) != kr),
        err(gather(s), sr),
        err(gather(xd), xdr),
        float(int(rank_d) != N - 1),
        err(gather(xv), xr[:, 0]),
        err(gather(rv), rr[0]),
    )


def case_eigh_generalized():
    k = spd(N, np.float64, 9) + N * np.eye(N)
    w, v = jaxmg.linalg.eigh(hp, place(k, mesh, A_SPEC))
    lower = np.linalg.cholesky(k)
    c = np.linalg.solve(lower, np.linalg.solve(lower, h).T).T
    ref = np.linalg.eigvalsh((c + c.T) / 2)
    vg = gather(v)
    return max(err(gather(w), ref), err(h @ vg, (k @ vg) * ref), err(vg.T @ k @ vg, np.eye(N)))


def case_vmap_gesvd():
    t = np.random.default_rng(11).standard_normal((2, 2 * N, N))
    u, s, vh = jax.vmap(jaxmg.gesvd)(place(t, mesh, P(None, "pr", "pc")))
    recon = np.einsum("bij,bj,bjk->bik", gather(u), gather(s), gather(vh))
    return err(recon, t)


BATCH = np.stack([spd(N, np.float64, s) for s in (1, 2, 3)])
GENERAL = np.stack([signed_general(N, np.float64, s) for s in (1, 2, 3)])
RHS = np.stack([rhs(N, 2, np.float64, s) for s in (1, 2, 3)])


def batch_args():
    spec_a, spec_b = P(None, "pr", "pc"), P(None, "pr")
    return place(BATCH, mesh, spec_a), place(GENERAL, mesh, spec_a), place(RHS, mesh, spec_b)


def case_vmap_potrs():
    a, _, b = batch_args()
    x = jax.vmap(lambda m, v: jaxmg.potrs(m, v, T_A=5))(a, b)
    return err(gather(x), np.linalg.solve(BATCH, RHS))


def case_vmap_lu_solve_in_jit():
    _, g, b = batch_args()
    return err(gather(jax.jit(jax.vmap(jaxmg.lu_solve))(g, b)), np.linalg.solve(GENERAL, RHS))


def case_vmap_slogdet():
    _, g, _ = batch_args()
    sign, logabsdet = jax.vmap(jaxmg.slogdet)(g)
    ref = np.linalg.slogdet(GENERAL)
    return max(err(gather(sign), ref.sign), err(gather(logabsdet), ref.logabsdet))


def case_vmap_grad():
    a, _, b = batch_args()
    grad = jax.vmap(jax.grad(lambda m, v: jnp.sum(jaxmg.potrs(m, v)[:, 0])))(a, b)
    # d/dA Σ_i (A⁻¹ b)_{i0} = −A⁻ᵀ 1 x₀ᵀ
    x = np.linalg.solve(BATCH, RHS)
    ones = np.linalg.solve(np.transpose(BATCH, (0, 2, 1)), np.ones((3, N, 1)))[:, :, 0]
    ref = -np.einsum("bi,bj->bij", ones, x[:, :, 0])
    return err(gather(grad), ref)


records = []
for name, fn in list(globals().items()):
    if not name.startswith("case_"):
        continue
    try:
        e = fn()
        records.append(dict(case=name[5:], error=e, ok=bool(e <= tol)))
    except Exception as ex:  # noqa: BLE001 - recorded, asserted by the test
        records.append(
            dict(
                case=name[5:],
                ok=False,
                exception=f"{type(ex).__name__}: {ex}",
                trace=traceback.format_exc()[-3000:],
            )
        )
if jax.process_index() == 0:
    Path(out_path).write_text(json.dumps(dict(records=records), indent=1))
