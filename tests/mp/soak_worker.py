"""1000 mixed jaxmg calls (potrs, lu_solve and potri; dtypes; vector and matrix right-hand
sides; NaN inputs and non-symmetric matrices that give a status; bad arguments that raise),
with this process's resident memory, open file descriptors and threads sampled after a warm-up and
at the end: what a long-running job would see grow if anything leaked.

Usage: mpirun -n P python soak_worker.py CALLS OUT_PREFIX     (writes OUT_PREFIX.<rank>.json)
Also runs on GPUs (one process per GPU, python -m jaxmg launch); there it adds the device's
bytes in use.
"""

import json
import os
import sys
import time
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, general, place, rhs, spd  # noqa: E402

calls, prefix = int(sys.argv[1]), sys.argv[2]
n = int(os.environ.get("SOAK_N", "32"))
mesh = jax.make_mesh((jax.process_count(), 1), ("pr", "pc"))
inputs = {}
for dtype in (np.float64, np.complex64):
    s, g = spd(n, dtype, 1), general(n, dtype, 1)
    bad = s.copy()
    bad[3, 5] = np.nan
    lower = np.tril(s)  # one triangle: not symmetric
    for k in (0, 2):
        b = rhs(n, k, dtype, 1)
        bp = place(b, mesh, B_SPEC if k else P("pr"))
        inputs[(dtype, k)] = dict(
            spd=place(s, mesh, A_SPEC),
            general=place(g, mesh, A_SPEC),
            nan=place(bad, mesh, A_SPEC),
            lower=place(lower, mesh, A_SPEC),
            b=bp,
            short=place(b[: n - 2], mesh, B_SPEC if k else P("pr")),
        )
jitted = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=4, return_status=True))


def one(i):
    """Call number i of the mix; returns its outcome."""
    dtype = (np.float64, np.complex64)[i % 2]
    d = inputs[(dtype, (i // 2) % 2 * 2)]
    kind = i % 10
    if kind == 9:  # a bad argument: a Python error before any work
        try:
            jaxmg.potrs(d["spd"], d["short"])
        except ValueError:
            return "value-error"
        return "no-error"
    if kind == 8:
        _, status = jaxmg.potrs(d["nan"], d["b"], return_status=True)
    elif kind == 7:
        _, status = jaxmg.potrs(d["lower"], d["b"], return_status=True)
    elif kind in (4, 5, 6):
        _, status = jaxmg.lu_solve(d["general"], d["b"], T_A=8, return_status=True)
    elif kind == 3:
        _, status = jitted(d["spd"], d["b"])
    elif kind == 2:
        _, status = jaxmg.potri(d["spd"], T_A=4, return_status=True)
    else:
        _, status = jaxmg.potrs(d["spd"], d["b"], return_status=True)
    s = int(np.asarray(status.addressable_data(0)))
    return "ok" if s == 0 else ("status>0" if s > 0 else "not-symmetric")


def sample():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    rec = {
        "rss_kib": int(fields["VmRSS"].split()[0]),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": int(fields["Threads"]),
    }
    stats = jax.local_devices()[0].memory_stats() or {}
    if "bytes_in_use" in stats:
        rec["device_bytes_in_use"] = int(stats["bytes_in_use"])
    return rec


warmup = min(200, calls // 5)
outcomes: dict[str, int] = {}
t0 = time.perf_counter()
for i in range(calls):
    if i == warmup:
        start = sample()
    out = one(i)
    outcomes[out] = outcomes.get(out, 0) + 1
end = sample()
rec = {
    "rank": jax.process_index(),
    "calls": calls,
    "n": n,
    "platform": jax.devices()[0].platform,
    "seconds": time.perf_counter() - t0,
    "outcomes": outcomes,
    "after_warmup": start,
    "end": end,
}
with open(f"{prefix}.{jax.process_index()}.json", "w") as f:
    json.dump(rec, f)
