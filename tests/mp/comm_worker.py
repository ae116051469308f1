"""Shares bytes from each process to all with jaxmg._core.comm; writes what every process got.

Usage: mpirun -n P python comm_worker.py OUT.json   (JAXMG_BOOTSTRAP picks the transport)
"""

import json
import os
import sys

import jax

jax.distributed.initialize()

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

from jaxmg._core import comm as _comm  # noqa: E402

got = []
for owner in range(jax.process_count()):
    payload = bytes([owner + 1]) * 128 if jax.process_index() == owner else None
    data = _comm.broadcast_bytes(f"jaxmg-test/{owner}", payload, owner)
    got.append(list(data[:4]) + [len(data)])
everyone = multihost_utils.process_allgather(np.array(got))
if jax.process_index() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(
            dict(transport=os.environ.get("JAXMG_BOOTSTRAP", "auto"), got=everyone.tolist()), f
        )
