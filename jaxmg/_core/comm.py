"""Sharing a few bytes (an NCCL unique id) between the processes of a job, before any collective.

Transport, in order: jax.distributed's key-value store (present whenever a mesh spans several
processes), else mpi4py's COMM_WORLD (MPI rank = JAX process index). JAXMG_BOOTSTRAP=kv or mpi
forces one.
"""

from __future__ import annotations

import os

import jax

# How long a process waits for the owner's bytes.
KV_TIMEOUT_MS = 300_000


def broadcast_bytes(key: str, payload: bytes | None, owner: int) -> bytes:
    """Every process gets `payload` of process `owner` (a JAX process index).

    Called by every process of the job in the same order. `key` names the value in the
    key-value store and must be unique per broadcast.
    """
    if jax.process_count() == 1:
        return payload
    me = jax.process_index()
    transport = os.environ.get("JAXMG_BOOTSTRAP", "auto")
    client = _kv_client() if transport in ("auto", "kv") else None
    if client is not None:
        if me == owner:
            client.key_value_set_bytes(key, payload)
            return payload
        return bytes(client.blocking_key_value_get_bytes(key, KV_TIMEOUT_MS))
    comm = _mpi_world() if transport in ("auto", "mpi") else None
    if comm is not None:
        return comm.bcast(payload if me == owner else None, root=owner)
    raise RuntimeError(
        "jaxmg cannot share its NCCL id between processes: call jax.distributed.initialize() "
        "before the first jaxmg call (or install mpi4py and launch with mpirun)"
    )


def _kv_client():
    try:
        from jax._src import distributed
    except ImportError:
        return None
    return getattr(getattr(distributed, "global_state", None), "client", None)


def _mpi_world():
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    comm = MPI.COMM_WORLD
    if comm.Get_size() != jax.process_count() or comm.Get_rank() != jax.process_index():
        raise RuntimeError(
            f"MPI rank {comm.Get_rank()} of {comm.Get_size()} is JAX process "
            f"{jax.process_index()} of {jax.process_count()}: launch one JAX process per MPI "
            "rank (python -m jaxmg launch -n N)"
        )
    return comm
