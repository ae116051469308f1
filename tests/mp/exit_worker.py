"""A program that ends with jaxmg calls still running: it dispatches a batched gradient through
potrs (jaxmg calls and XLA collectives in one program) and solves, and exits without waiting
for any result. The job must end, with status 0.

Usage: mpirun -n P python exit_worker.py
"""

import sys
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import place, rhs, spd  # noqa: E402

mesh = jax.make_mesh((jax.process_count(), 1), ("pr", "pc"))
jax.set_mesh(mesh)
n = 96
a = place(np.stack([spd(n, np.float64, s) for s in (1, 2, 3)]), mesh, P(None, "pr", "pc"))
b = place(np.stack([rhs(n, 2, np.float64, s) for s in (1, 2, 3)]), mesh, P(None, "pr"))
solutions = [jax.vmap(jaxmg.potrs)(a, b) for _ in range(4)]
try:  # as a program whose own code fails after dispatching
    grads = jax.vmap(jax.grad(lambda m, v: jnp.sum(jaxmg.potrs(m, v)[:, 0])))(a, b)
    np.linalg.solve(np.ones((3, n, n)), np.ones((3, n + 1)))
except ValueError:
    pass
print("leaving with the results unread", flush=True)
