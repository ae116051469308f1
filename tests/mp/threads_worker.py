"""Two Python threads per process, each solving its own systems on the same mesh, at the same
time, with jaxmg calls made outside jit: every result is its own system's solution, or the call
raised jaxmg's "calling thread" disagreement on every process. Never a wrong number.

Usage: mpirun -n 2 python threads_worker.py OUT.json
"""

import json
import os
import random
import sys
import threading
import time
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, place, rhs, spd  # noqa: E402

out_path = sys.argv[1]
mesh = jax.make_mesh((2, 1), ("pr", "pc"))
n, rounds = 64, int(os.environ.get("ROUNDS", "30"))
systems = {}
for t in range(2):
    a, b = spd(n, np.float64, 10 + t), rhs(n, 1, np.float64, 10 + t)
    systems[t] = (place(a, mesh, A_SPEC), place(b, mesh, B_SPEC), np.linalg.solve(a, b))


def solve(a, b):
    return jaxmg.potrs(a, b, T_A=8)


results = {0: [], 1: []}
start = threading.Barrier(2)


def worker(t):
    a, b, ref = systems[t]
    rng = random.Random(t)
    start.wait()
    for _ in range(rounds):
        time.sleep(rng.random() * 0.002)
        try:
            x = solve(a, b)
            x.block_until_ready()
            # Gathering is a collective of its own: keep it out of the threads.
            results[t].append(("ok", x))
        except Exception as e:  # noqa: BLE001 - the message is the result
            results[t].append(("error", str(e)))


threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
for th in threads:
    th.start()
for th in threads:
    th.join()

wrong, errors, ok, other = 0, 0, 0, []
for t in range(2):
    ref = systems[t][2]
    for kind, val in results[t]:
        if kind == "error":
            if "disagree on the calling thread" in val:
                errors += 1
            else:
                other.append(val[:500])
            continue
        shard = val.addressable_shards[0]
        if np.abs(np.asarray(shard.data) - ref[shard.index[0]]).max() < 1e-9:
            ok += 1
        else:
            wrong += 1
counts = multihost_utils.process_allgather(np.asarray([ok, errors, wrong, len(other)]))
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(dict(per_process=counts.tolist(), other=other, calls=2 * rounds), f)
