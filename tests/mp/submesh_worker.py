"""A program over a sub-mesh: processes 0 and 1 solve on a mesh of their two devices while the
other processes make no jaxmg call; everyone then meets at a barrier and exits.

Usage: mpirun -n 4 python submesh_worker.py OUT.json
"""

import json
import sys
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, general, place, rhs, spd  # noqa: E402

out_path = sys.argv[1]
me = jax.process_index()
record = {"process": me, "processes": jax.process_count()}
if me < 2:
    mesh = Mesh(np.asarray(jax.devices()[:2], dtype=object).reshape(2, 1), ("pr", "pc"))
    n = 48
    for name, fn, make in (("potrs", jaxmg.potrs, spd), ("lu_solve", jaxmg.lu_solve, general)):
        a, b = make(n, np.float64, 3), rhs(n, 2, np.float64, 3)
        x = fn(place(a, mesh, A_SPEC), place(b, mesh, B_SPEC), T_A=4)
        mine = np.asarray(x.addressable_data(0))
        rows = slice(me * n // 2, (me + 1) * n // 2)
        record[name] = float(np.abs(mine - np.linalg.solve(a, b)[rows]).max())
multihost_utils.sync_global_devices("submesh-done")
records = multihost_utils.process_allgather(np.array([me]))
if me == 0:
    with open(out_path, "w") as f:
        json.dump(dict(record=record, seen=[int(r) for r in np.ravel(records)]), f)
