"""Derivatives of the routines that return matrices or spectra (inv, potri, syevd with and
without vectors), on one mesh: jax.test_util.check_grads (finite differences, forward and
reverse mode, order 1, and order 2 for inv) of scalar losses of a few replicated parameters
that move a sharded matrix. Losses of eigenvectors are phase-invariant: Re Σ W ⊙ V sin(Λ) Vᴴ.

Usage: mpirun -n P python grad_matrix_worker.py ROWS COLS OUT.json
"""

import functools
import json
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factor_cases import signed_general  # noqa: E402
from linalg_cases import A_SPEC, place, spd  # noqa: E402

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
    if routine == "eigvalsh":
        ev = jaxmg.syevd(a, T_A=tile, return_eigenvectors=False)
        return jnp.sum(jnp.arange(1.0, N + 1) * ev)
    ev, v = jaxmg.syevd(a, T_A=tile)
    # sin(A), phase-invariant (the product's sharding said: explicit mesh axes)
    f = jnp.matmul(v * jnp.sin(ev)[None, :], jnp.conj(v).T, out_sharding=A_SPEC)
    return jnp.real(jnp.sum(w * f)) + jnp.sum(jnp.cos(ev))


def case(routine, dtype_name, tile, order=1):
    dtype = np.dtype(dtype_name).type
    hermitian = routine != "inv"
    a0 = spd(N, dtype, 1) if hermitian else signed_general(N, dtype, 1)
    if routine in ("syevd", "eigvalsh"):
        a0 = a0 / np.linalg.norm(a0, 2)  # eigenvalues of order 1, well separated on average
    s1, s2 = directions(N, dtype, 3, hermitian=hermitian)
    w = np.random.default_rng(9).standard_normal((N, N)).astype(dtype)
    arrays = [place(m, mesh, A_SPEC) for m in (a0, s1 * 0.1, s2 * 0.1, w)]
    theta = np.array([0.01, -0.02])
    check_grads(
        lambda t: loss(t, *arrays, routine, tile),
        (theta,),
        order=order,
        modes=("fwd", "rev"),
        atol=1e-6,
        rtol=1e-6,
        eps=1e-5,
    )
    return dict(ok=True)  # check_grads raises on a mismatch


CASES = [
    (routine, dtype_name, tile, 1)
    for routine in ("inv", "potri", "syevd", "eigvalsh")
    for dtype_name in ("float64", "complex128")
    for tile in (5, None)
] + [("inv", "float64", 5, 2), ("potri", "complex128", None, 2)]

records = []
for routine, dtype_name, tile, order in CASES:
    name = f"{routine}-grad/{dtype_name}/T{tile}" + (f"/order{order}" if order > 1 else "")
    try:
        rec = case(routine, dtype_name, tile, order)
    except Exception as e:  # noqa: BLE001 - recorded, asserted by the test
        rec = dict(
            ok=False, error=f"{type(e).__name__}: {e}"[:2000], trace=traceback.format_exc()[-3000:]
        )
    records.append(dict(case=name, **rec))
if jax.process_index() == 0:
    Path(out_path).write_text(json.dumps(dict(mesh=[rows, cols], records=records), indent=1))
