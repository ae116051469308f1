"""Many independent jaxmg calls in one jitted program (potrs and lu_solve, same shapes, different
matrices), run repeatedly: every solution must be its own system's, on every process.

Usage: mpirun -n P python ordering_worker.py MESH_ROWS MESH_COLS OUT.json
"""

import json
import sys
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, gather, place, rhs, spd  # noqa: E402

mesh_rows, mesh_cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((mesh_rows, mesh_cols), ("pr", "pc"))
n, calls, repeats = 48, 8, 20
mats = [spd(n, np.float64, 100 + i) for i in range(calls)]
bs = [rhs(n, 1, np.float64, 100 + i) for i in range(calls)]
refs = [np.linalg.solve(m, b) for m, b in zip(mats, bs, strict=True)]
A = [place(m, mesh, A_SPEC) for m in mats]
B = [place(b, mesh, B_SPEC) for b in bs]


@jax.jit
def many(As, Bs):
    return [
        (jaxmg.potrs if i % 2 == 0 else jaxmg.lu_solve)(a, b, T_A=4)
        for i, (a, b) in enumerate(zip(As, Bs, strict=True))
    ]


worst = 0.0
for _ in range(repeats):
    xs = many(A, B)
    for ref, x in zip(refs, xs, strict=True):
        worst = max(worst, float(np.abs(gather(x) - ref).max()))
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(dict(calls=calls, repeats=repeats, worst_error=worst), f)
