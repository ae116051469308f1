"""One process dies (SIGKILL) in the middle of a long solve while the others are inside it.

Every process logs to OUT_PREFIX.<rank>.log when it enters each call; process VICTIM kills
itself DELAY seconds after entering its second call. The test checks that the whole job ends
(no process left behind) well within its time limit, with a non-zero status.

Usage: mpirun -n P python kill_worker.py N VICTIM DELAY OUT_PREFIX
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, place, rhs, spd  # noqa: E402

n, victim, delay, prefix = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
me = jax.process_index()
mesh = jax.make_mesh((jax.process_count(), 1), ("pr", "pc"))
a, b = place(spd(n, np.float64, 3), mesh, A_SPEC), place(rhs(n, 1, np.float64, 3), mesh, B_SPEC)
log = open(f"{prefix}.{me}.log", "a", buffering=1)
log.write(f"pid {os.getpid()}\n")
for i in range(1000):
    log.write(f"call {i} {time.time():.3f}\n")
    if me == victim and i == 1:
        threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    jaxmg.potrs(a, b, T_A=64).block_until_ready()
log.write("finished\n")
