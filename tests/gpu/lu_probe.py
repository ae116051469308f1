"""jaxmg.linalg.lu against SciPy's lu on the meshes of the job's processes, over orders and tiles
that put one, two or three tiles (whole or partial) on each process: which of them gives other
p, l and u than SciPy's on the GPU engine (docs/gpu.md, Known gaps). Run on the GPU machine:

  python -m jaxmg launch -n 2 --share-gpu tests/gpu/lu_probe.py OUT.json

For each mesh of the process count (P x 1, then 1 x P) and each (N, tile): the largest error of
p, l and u against SciPy's, of p l u against a (a valid LU with other pivots still
reconstructs a), the largest |l| (partial pivoting keeps it at 1), and the same for the pivots
of `jaxmg.lu_factor` redistributed (the redistribute test hook) against SciPy's `lu_factor` of a
and of aᵀ.
Process 0 prints a line per case and writes OUT.json.
"""

import json
import sys

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from jax.experimental.multihost_utils import process_allgather  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
from jaxmg import linalg as L  # noqa: E402
from jaxmg._core.testing import hooks  # noqa: E402

out_path = sys.argv[1]
procs = jax.process_count()
CASES = [(24, None), (24, 12 // max(1, procs // 2)), (24, 5), (20, 5), (30, 5), (24, 4), (24, 8)]


def gather(x):
    return np.asarray(process_allgather(x, tiled=True))


def rel(x, ref):
    return float(np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-300))


records = []
for shape in ((procs, 1), (1, procs)):
    mesh = jax.make_mesh(shape, ("pr", "pc"))
    for n, tile in CASES:
        if n % procs:
            continue
        a = np.random.default_rng(n).standard_normal((n, n))
        ap = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
        rec = {"mesh": f"{shape[0]}x{shape[1]}", "n": n, "tile": tile}
        try:
            p, lower, upper = (gather(x) for x in L.lu(ap, T_A=tile))
            ref_p, ref_l, ref_u = scipy.linalg.lu(a)
            rec.update(
                p=rel(p, ref_p),
                l=rel(lower, ref_l),
                u=rel(upper, ref_u),
                reconstructs=rel(p @ lower @ upper, a),
                largest_l=float(np.abs(lower).max()),
            )
            with hooks(redistribute=True):
                f = jaxmg.lu_factor(ap, T_A=tile)
            # (the engine factors a or aᵀ, as the LU policy hands it: either may match)
            piv = gather(f.pivots)[:n] - 1
            rec["lu_factor_pivots_match"] = {
                name: bool(np.array_equal(piv, scipy.linalg.lu_factor(m)[1]))
                for name, m in (("a", a), ("aT", a.T))
            }
        except Exception as e:  # noqa: BLE001 (a probe: record and go on)
            rec["error"] = f"{type(e).__name__}: {e}"[:400]
        records.append(rec)
        if jax.process_index() == 0:
            print(json.dumps(rec), flush=True)

if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump({"processes": procs, "records": records}, f, indent=1)
