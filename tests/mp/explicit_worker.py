"""Sharding errors on a mesh with Explicit axes: column-only sharding P(None, axis) solves; a
matrix_specs that disagrees with a's real sharding is a jaxmg ValueError on every process.

Usage: mpirun -n 2 python explicit_worker.py OUT.json
"""

import json
import sys

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

out_path = sys.argv[1]
mesh = jax.make_mesh((1, 2), ("pr", "pc"), axis_types=(AxisType.Explicit, AxisType.Explicit))
n = 8
a = np.eye(n) * 2.0 + 0.1 * np.ones((n, n))
b = np.ones((n, 1))


def place(x, spec):
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda i: x[i])


rec = {}
with jax.set_mesh(mesh):
    for name, fn in (("potrs", jaxmg.potrs), ("lu_solve", jaxmg.lu_solve)):
        x = fn(place(a, P(None, "pc")), place(b, P(None, None)))
        xs = np.asarray(multihost_utils.process_allgather(x, tiled=True))
        rec[name] = float(np.abs(xs - np.linalg.solve(a, b)).max())
    try:
        jaxmg.potrs(place(a, P(None, "pc")), place(b, P(None, None)), matrix_specs=P("pc", None))
        rec["wrong_spec"] = "no error"
    except Exception as e:  # noqa: BLE001 - the message is the result
        rec["wrong_spec"] = f"{type(e).__name__}: {e}"
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(rec, f)
