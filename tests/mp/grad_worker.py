"""Derivatives of potrs, lu_solve (x and log-determinant) and slogdet through jaxmg's own
routines, on one mesh: jax.test_util
check_grads (finite differences, forward and reverse mode, order 1, and order 2 for potrs and
lu_solve) of scalar losses of a few
replicated parameters that move a sharded Hermitian matrix and right-hand side; and the
compiled gradient holds no collective of matrix size.

Usage: mpirun -n P python grad_worker.py ROWS COLS OUT.json
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
from jax.test_util import check_grads  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factor_cases import signed_general  # noqa: E402
from linalg_cases import A_SPEC, B_SPEC, place, rhs, spd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grad_worker_common import directions  # noqa: E402

rows, cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
jax.set_mesh(mesh)  # eager operations on explicitly sharded arrays need it (check_grads)
N = 24
COLLECTIVE = re.compile(
    r"= \w+\[([\d,]*)\]\{[^}]*\} (all-gather|all-reduce|all-to-all|"
    r"collective-permute|reduce-scatter)"
)


@functools.partial(jax.jit, static_argnums=(7, 8, 9, 10))
def loss(theta, a0, s1, s2, b0, c, w, routine, with_logdet, tile, vector_b):
    """Re(Σ w ⊙ x) (+ log-determinant) with A = a0 + θ0 s1 + θ1 s2, b = b0 + θ2 c; for
    slogdet, logabsdet + Re((0.3 + 0.7i) sign)."""
    a = a0 + theta[0] * s1 + theta[1] * s2
    b = b0 + theta[2] * c
    if routine == "slogdet":
        sign, logabsdet = jaxmg.slogdet(a, T_A=tile)
        return logabsdet + jnp.real((0.3 + 0.7j) * sign) + 0 * jnp.sum(jnp.real(b))
    fn = getattr(jaxmg, routine)
    if with_logdet:
        x, logdet = fn(a, b, T_A=tile, return_logdet=True)
        return jnp.real(jnp.sum(w * x)) + logdet
    return jnp.real(jnp.sum(w * fn(a, b, T_A=tile)))


def case(routine, dtype_name, with_logdet, tile, vector_b, order=1):
    dtype = np.dtype(dtype_name).type
    a0 = spd(N, dtype, 1) if routine == "potrs" else signed_general(N, dtype, 1)
    s1, s2 = directions(N, dtype, 3, hermitian=routine == "potrs")
    k = 0 if vector_b else 2
    b_spec = jax.sharding.PartitionSpec("pr") if vector_b else B_SPEC
    arrays = [place(m, mesh, A_SPEC) for m in (a0, s1, s2)]
    arrays += [place(rhs(N, k, dtype, seed), mesh, b_spec) for seed in (1, 2, 5)]
    theta = np.array([0.01, -0.02, 0.3])

    def f(t):
        return loss(t, *arrays, routine, with_logdet, tile, vector_b)

    check_grads(f, (theta,), order=order, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6, eps=1e-5)
    if order > 1:  # (second derivatives move matrices: d(A⁻ᵀ) = −A⁻ᵀ dAᵀ A⁻ᵀ)
        return dict(order=order, ok=True)  # check_grads raises on a mismatch
    grad_fn = jax.jit(jax.grad(loss), static_argnums=(7, 8, 9, 10))
    statics = (routine, with_logdet, tile, vector_b)
    hlo = grad_fn.lower(theta, *arrays, *statics).compile().as_text()
    sizes = [
        int(np.prod([int(d) for d in m.group(1).split(",") if d])) for m in COLLECTIVE.finditer(hlo)
    ]
    shard = (N // rows) * (N // cols)
    return dict(
        largest_collective=max(sizes, default=0), shard=shard, ok=max(sizes, default=0) < shard
    )


CASES = [
    (routine, dtype_name, with_logdet, tile, vector_b)
    for routine in ("potrs", "lu_solve")
    for dtype_name in ("float64", "complex128")
    for with_logdet in (True, False)
    for tile, vector_b in ((5, False), (None, True))
] + [("slogdet", d, True, tile, False) for d in ("float64", "complex128") for tile in (5, None)]
CASES = [(*c, 1) for c in CASES] + [
    # second order (forward and reverse): potrs's x, x + logdet (real and complex), lu_solve's
    ("potrs", "float64", False, 5, False, 2),
    ("potrs", "float64", True, 5, False, 2),
    ("potrs", "complex128", True, None, True, 2),
    ("lu_solve", "float64", True, 5, False, 2),
]


def case_name(routine, dtype_name, with_logdet, tile, vector_b, order):
    name = f"{routine}-grad/{dtype_name}/logdet={with_logdet}/T{tile}/vector={vector_b}"
    return name + (f"/order{order}" if order > 1 else "")


# JAXMG_CASES (a regular expression): only the matching cases (the test names the ones it runs
# on meshes of more than two processes).
only = re.compile(os.environ.get("JAXMG_CASES", ""))
CASES = [c for c in CASES if only.search(case_name(*c))]
records = []
for routine, dtype_name, with_logdet, tile, vector_b, order in CASES:
    name = case_name(routine, dtype_name, with_logdet, tile, vector_b, order)
    try:
        rec = case(routine, dtype_name, with_logdet, tile, vector_b, order)
    except Exception as e:  # noqa: BLE001 - recorded, asserted by the test
        rec = dict(
            ok=False, error=f"{type(e).__name__}: {e}"[:2000], trace=traceback.format_exc()[-3000:]
        )
    records.append(dict(case=name, **rec))
if jax.process_index() == 0:
    planned = [case_name(*c) for c in CASES]
    Path(out_path).write_text(
        json.dumps(dict(mesh=[rows, cols], planned=planned, records=records), indent=1)
    )
