"""Derivatives of the routines that return matrices, spectra or factorizations (inv, potri,
syevd with and without vectors, gesvd with and without vectors, polar, qr, least_squares), on
one mesh: jax.test_util.check_grads (finite differences, forward and
reverse mode, order 1, and order 2 for inv) of scalar losses of a few replicated parameters
that move a sharded matrix. Losses of eigenvectors are phase-invariant: Re Σ W ⊙ V sin(Λ) Vᴴ.

Usage: mpirun -n P python grad_matrix_worker.py ROWS COLS OUT.json
"""

import functools
import json
import os
import re
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factor_cases import signed_general  # noqa: E402
from linalg_cases import A_SPEC, B_SPEC, place, spd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grad_worker_common import directions  # noqa: E402

rows, cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
jax.set_mesh(mesh)
N = 24


@functools.partial(jax.jit, static_argnums=(5, 6))
def loss(theta, a0, s1, s2, w, routine, tile):
    a = a0 + theta[0] * s1 + theta[1] * s2
    if routine in ("inv", "potri"):
        x, logdet = getattr(jaxmg, routine)(a, T_A=tile, return_logdet=True)
        return jnp.real(jnp.sum(w * x)) + logdet
    if routine in ("cho-kept", "lu-kept"):
        w, s1 = (jax.reshard(m, B_SPEC) for m in (w, s1))  # (columns whole, then sliced)
        b = w[:, :3] + theta[1] * s1[:, :3]
        if routine == "cho-kept":
            f = jaxmg.cho_factor(a, T_A=tile)
            x, logdet = jaxmg.cho_solve(f, b), f.logdet
        else:
            f = jaxmg.lu_factor(a, T_A=tile)
            x, logdet = jaxmg.lu_solve(f, b), f.logabsdet
        return jnp.real(jnp.sum(x)) + jnp.sum(jnp.abs(x) ** 2) + logdet
    if routine == "matmul":
        c = jaxmg.matmul(a, w, adjoint_a=True, T_A=tile)
        return jnp.real(jnp.sum(c * jnp.conj(a)))
    if routine in ("eigh-ab", "eigh-ab-values"):
        bmat = w + theta[1] * s2  # (w: positive definite here; s2 Hermitian)
        a = a0 + theta[0] * s1
        if routine == "eigh-ab-values":
            ev = jaxmg.eigh(a, bmat, T_A=tile, return_eigenvectors=False)
            return jnp.sum(jnp.arange(1.0, N + 1) * ev)
        ev, v = jaxmg.eigh(a, bmat, T_A=tile)
        f = jnp.matmul(v * jnp.cos(ev)[None, :], jnp.conj(v).T, out_sharding=A_SPEC)
        return jnp.real(jnp.sum(a0 * f)) + jnp.sum(jnp.sin(ev))
    if routine == "eigvalsh":
        ev = jaxmg.syevd(a, T_A=tile, return_eigenvectors=False)
        return jnp.sum(jnp.arange(1.0, N + 1) * ev)
    if routine == "gesvd":
        u, sv, vh = jaxmg.gesvd(a, T_A=tile)
        f = jnp.matmul(u * jnp.sin(sv)[None, :], vh, out_sharding=A_SPEC)  # phase-invariant
        return jnp.real(jnp.sum(w * f)) + jnp.sum(jnp.cos(sv))
    if routine == "gesvd-values":
        sv = jaxmg.gesvd(a, T_A=tile, compute_u=False, compute_vh=False)
        return jnp.sum(jnp.arange(1.0, sv.shape[0] + 1) * sv)
    if routine == "qr":
        q, r = jaxmg.qr(a, T_A=tile)
        return jnp.real(jnp.sum(w * q)) + jnp.real(jnp.sum(w[: r.shape[0]] * r))
    if routine.startswith("lstsq"):
        w, s1 = (jax.reshard(m, B_SPEC) for m in (w, s1))  # (columns whole, then sliced)
        b = w[:, 0] if routine == "lstsq-vector" else w[:, :3]
        b = b + theta[1] * (s1[:, 0] if routine == "lstsq-vector" else s1[:, :3])
        x = jaxmg.least_squares(a, b, T_A=tile)
        return jnp.real(jnp.sum(x)) + jnp.sum(jnp.abs(x) ** 2)
    if routine == "polar":
        up, h = jaxmg.polar(a, T_A=tile)
        return jnp.real(jnp.sum(w * up)) + jnp.real(jnp.sum(w[: h.shape[0]] * h))
    ev, v = jaxmg.syevd(a, T_A=tile)
    # sin(A), phase-invariant (the product's sharding said: explicit mesh axes)
    f = jnp.matmul(v * jnp.sin(ev)[None, :], jnp.conj(v).T, out_sharding=A_SPEC)
    return jnp.real(jnp.sum(w * f)) + jnp.sum(jnp.cos(ev))


def case(routine, dtype_name, tile, order=1):
    dtype = np.dtype(dtype_name).type
    hermitian = routine in ("potri", "syevd", "eigvalsh", "cho-kept", "eigh-ab", "eigh-ab-values")
    a0 = spd(N, dtype, 1) if hermitian else signed_general(N, dtype, 1)
    if routine in ("gesvd", "gesvd-values", "polar", "qr", "lstsq", "lstsq-vector"):  # 2N x N
        return _tall_case(routine, dtype, tile, order)
    if routine.endswith("-square"):  # gesvd, polar of an N x N matrix: the engine's products
        s1, s2 = directions(N, dtype, 3, hermitian=False)
        w = np.random.default_rng(9).standard_normal((N, N)).astype(dtype)
        arrays = [place(m, mesh, A_SPEC) for m in (a0, s1 * 0.1, s2 * 0.1, w)]
        return _check(arrays, routine.removesuffix("-square"), tile, order)
    if routine in ("syevd", "eigvalsh", "eigh-ab", "eigh-ab-values"):
        a0 = a0 / np.linalg.norm(a0, 2)  # eigenvalues of order 1, well separated on average
    s1, s2 = directions(N, dtype, 3, hermitian=hermitian)
    w = np.random.default_rng(9).standard_normal((N, N)).astype(dtype)
    if routine.startswith("eigh-ab"):  # B = I + X Xᴴ / N
        w = (np.eye(N) + (w @ w.conj().T) / N).astype(dtype)
    return _check(
        [place(m, mesh, A_SPEC) for m in (a0, s1 * 0.1, s2 * 0.1, w)], routine, tile, order
    )


def _check(arrays, routine, tile, order):
    """check_grads of the loss at θ = (0.01, -0.02); raises on a mismatch."""
    check_grads(
        lambda t: loss(t, *arrays, routine, tile),
        (np.array([0.01, -0.02]),),
        order=order,
        modes=("fwd", "rev"),
        atol=1e-6,
        rtol=1e-6,
        eps=1e-5,
    )
    return dict(ok=True)


def _tall_case(routine, dtype, tile, order):
    rng = np.random.default_rng(4)

    def gaussian(shape):
        x = rng.standard_normal(shape)
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)

    a0 = gaussian((2 * N, N)) / np.sqrt(2 * N)
    arrays = [place(m, mesh, A_SPEC) for m in (a0, 0.1 * gaussian((2 * N, N)))]
    arrays += [place(m, mesh, A_SPEC) for m in (0.1 * gaussian((2 * N, N)), gaussian((2 * N, N)))]
    return _check(arrays, routine, tile, order)


CASES = [
    (routine, dtype_name, tile, 1)
    for routine in ("inv", "potri", "syevd", "eigvalsh")
    for dtype_name in ("float64", "complex128")
    for tile in (5, None)
] + [("inv", "float64", 5, 2), ("potri", "complex128", None, 2)]
CASES += [
    (routine, dtype_name, tile, 1)
    for routine in ("gesvd", "gesvd-values", "polar", "qr", "lstsq")
    for dtype_name in ("float64", "complex128")
    for tile in (5, None)
] + [("lstsq-vector", "float64", 5, 1)]
CASES += [("matmul", dtype_name, 5, 1) for dtype_name in ("float64", "complex128")]
CASES += [
    (f"{routine}-square", dtype_name, 5, 1)
    for routine in ("gesvd", "polar")
    for dtype_name in ("float64", "complex128")
]
CASES += [
    (routine, dtype_name, 5, 1)
    for routine in ("eigh-ab", "eigh-ab-values")
    for dtype_name in ("float64", "complex128")
]
CASES += [
    (routine, dtype_name, tile, 1)
    for routine in ("cho-kept", "lu-kept")
    for dtype_name in ("float64", "complex128")
    for tile in (5, None)
]

# The compiled gradients of the routines whose rules take the engine's products hold no XLA
# collective of matrix size (losses made of elementwise operations and sums only).
COLLECTIVE = re.compile(
    r"= \w+\[([\d,]*)\]\{[^}]*\} (all-gather|all-reduce|all-to-all|"
    r"collective-permute|reduce-scatter)"
)


@functools.partial(jax.jit, static_argnums=(4, 5))
def elementwise_loss(theta, a0, s1, w, routine, tile):
    a = a0 + theta[0] * s1
    if routine == "inv":
        return jnp.real(jnp.sum(w * jaxmg.inv(a, T_A=tile)))
    if routine == "potri":
        x, logdet = jaxmg.potri(a, T_A=tile, return_logdet=True)
        return jnp.real(jnp.sum(w * x)) + logdet
    if routine == "matmul":
        return jnp.real(jnp.sum(jaxmg.matmul(a, w, adjoint_a=True, T_A=tile) * jnp.conj(a)))
    if routine == "eigvalsh":
        return jnp.sum(jnp.arange(1.0, N + 1) * jaxmg.syevd(a, T_A=tile, return_eigenvectors=False))
    if routine == "eigh-ab":  # w: positive definite
        ev, v = jaxmg.eigh(a, w + theta[0] * s1 * 0, T_A=tile)
        return jnp.sum(jnp.sin(ev)) + jnp.sum(jnp.real(w) * jnp.abs(v) ** 2)
    ev, v = jaxmg.syevd(a, T_A=tile)  # |V|²: phase-invariant
    return jnp.sum(jnp.sin(ev)) + jnp.sum(jnp.real(w) * jnp.abs(v) ** 2)


def collective_case(routine, dtype_name, tile):
    dtype = np.dtype(dtype_name).type
    hermitian = routine != "inv" and routine != "matmul"
    a0 = spd(N, dtype, 1) if hermitian else signed_general(N, dtype, 1)
    if routine in ("syevd", "eigvalsh", "eigh-ab"):
        a0 = a0 / np.linalg.norm(a0, 2)
    s1, _ = directions(N, dtype, 3, hermitian=hermitian)
    w = np.random.default_rng(9).standard_normal((N, N)).astype(dtype)
    if routine == "eigh-ab":
        w = (np.eye(N) + (w @ w.conj().T) / N).astype(dtype)
    arrays = [place(m, mesh, A_SPEC) for m in (a0, 0.1 * s1, w)]
    theta = np.array([0.01])
    if routine not in ("syevd", "eigh-ab"):  # (|V|² is badly conditioned for finite differences;
        # those rules' values are checked by the cases above)
        check_grads(
            lambda t: elementwise_loss(t, *arrays, routine, tile),
            (theta,),
            order=1,
            modes=("fwd", "rev"),
            atol=1e-6,
            rtol=1e-6,
            eps=1e-5,
        )
    grad_fn = jax.jit(jax.grad(elementwise_loss), static_argnums=(4, 5))
    hlo = grad_fn.lower(theta, *arrays, routine, tile).compile().as_text()
    sizes = [
        int(np.prod([int(d) for d in m.group(1).split(",") if d])) for m in COLLECTIVE.finditer(hlo)
    ]
    shard = (N // rows) * (N // cols)
    return dict(
        largest_collective=max(sizes, default=0), shard=shard, ok=max(sizes, default=0) < shard
    )


@functools.partial(jax.jit, static_argnums=(3, 4))
def tall_elementwise_loss(a, b, w, routine, tile):
    if routine == "lstsq":
        x = jaxmg.least_squares(a, b, T_A=tile)
        return jnp.real(jnp.sum(x)) + jnp.sum(jnp.abs(x) ** 2)
    if routine == "qr":
        q, r = jaxmg.qr(a, T_A=tile)
        return jnp.real(jnp.sum(w * q)) + jnp.real(jnp.sum(jnp.sin(r)))
    if routine == "gesvd":
        u, sv, vh = jaxmg.gesvd(a, T_A=tile)  # |U|², |Vh|²: phase-invariant
        return (
            jnp.sum(jnp.cos(sv))
            + jnp.sum(jnp.real(w) * jnp.abs(u) ** 2)
            + jnp.sum(jnp.abs(vh) ** 2)
        )
    up, h = jaxmg.polar(a, T_A=tile)
    return jnp.real(jnp.sum(w * up)) + jnp.real(jnp.sum(jnp.sin(h)))


def tall_collective_case(routine, dtype_name, tile, m=2 * N):
    """The routines with M x N factors: for M = 2N the compiled gradient's XLA collectives are
    at most of the N x N factors' size (R, Vh, H), never of the matrix's; for a square matrix
    (the engine's products; gesvd and polar) at most one shard (the distributed transposes of
    N x N tangents)."""
    dtype = np.dtype(dtype_name).type
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, N)) + (
        1j * rng.standard_normal((m, N)) if dtype_name.startswith("complex") else 0
    )
    w = rng.standard_normal((m, N))
    b = rng.standard_normal((m, 3))
    a, w = (place(x.astype(dtype), mesh, A_SPEC) for x in (a, w))
    b = place(b.astype(dtype), mesh, B_SPEC)
    grad_fn = jax.jit(jax.grad(tall_elementwise_loss, argnums=(0, 1)), static_argnums=(3, 4))
    hlo = grad_fn.lower(a, b, w, routine, tile).compile().as_text()
    sizes = [
        int(np.prod([int(d) for d in m.group(1).split(",") if d])) for m in COLLECTIVE.finditer(hlo)
    ]
    largest = max(sizes, default=0)
    limit = N * N if m > N else (N // rows) * (N // cols)
    return dict(largest_collective=largest, limit=limit, matrix=m * N, ok=largest <= limit)


def vmap_grad_case(dtype_name, tile):
    """jax.vmap of the gradient of a loss of inv over a batch of 3 matrices (the engine's
    product batched as a loop), against jax.numpy's on the whole matrices."""
    from jax.experimental import multihost_utils

    dtype = np.dtype(dtype_name).type
    stack = np.stack([signed_general(N, dtype, seed) for seed in (1, 2, 3)])
    batch = jax.device_put(stack, jax.sharding.NamedSharding(mesh, P(None, *A_SPEC)))

    def loss(x, inverse):
        return jnp.real(jnp.sum(jnp.sin(inverse(x))))

    got = jax.jit(jax.vmap(jax.grad(lambda x: loss(x, lambda m: jaxmg.inv(m, T_A=tile)))))(batch)
    got = np.asarray(multihost_utils.process_allgather(got, tiled=True))
    want = np.asarray(jax.vmap(jax.grad(lambda x: loss(x, jnp.linalg.inv)))(jnp.asarray(stack)))
    err = float(np.abs(got - want).max() / np.abs(want).max())
    return dict(rel_err=err, ok=err < 1e-10)


CASES += [("inv-vmap", dtype_name, 5, 1) for dtype_name in ("float64", "complex128")]
CASES += [
    (f"{routine}-collectives", dtype_name, 5, 1)
    for routine in ("inv", "potri", "syevd", "eigvalsh", "eigh-ab", "matmul")
    + ("qr", "lstsq", "gesvd", "polar", "gesvd-square", "polar-square")
    for dtype_name in ("float64", "complex128")
]

records = []
# JAXMG_CASES (a regular expression) runs only the matching cases: the tests' per-mesh subsets
# (tests/test_grad.py), and a development aid. The JSON lists the cases planned, so the test
# checks that every one ran.
only = re.compile(os.environ.get("JAXMG_CASES", ""))
planned = []
for routine, dtype_name, tile, order in CASES:
    name = f"{routine}-grad/{dtype_name}/T{tile}" + (f"/order{order}" if order > 1 else "")
    if not only.search(name):
        continue
    planned.append(name)
    try:
        if routine == "inv-vmap":
            rec = vmap_grad_case(dtype_name, tile)
        elif routine.endswith("-collectives"):
            base = routine.removesuffix("-collectives")
            if base.endswith("-square"):
                rec = tall_collective_case(base.removesuffix("-square"), dtype_name, tile, N)
            elif base in ("qr", "lstsq", "gesvd", "polar"):
                rec = tall_collective_case(base, dtype_name, tile)
            else:
                rec = collective_case(base, dtype_name, tile)
        else:
            rec = case(routine, dtype_name, tile, order)
    except Exception as e:  # noqa: BLE001 - recorded, asserted by the test
        rec = dict(
            ok=False, error=f"{type(e).__name__}: {e}"[:2000], trace=traceback.format_exc()[-3000:]
        )
    records.append(dict(case=name, **rec))
if jax.process_index() == 0:
    Path(out_path).write_text(
        json.dumps(dict(mesh=[rows, cols], planned=planned, records=records), indent=1)
    )
