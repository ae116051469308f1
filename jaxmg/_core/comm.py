"""Sharing a few bytes (an NCCL unique id) between the processes of a job, before any collective,
and agreeing that every process of a mesh is present and ready (bounded by JAXMG_CALL_TIMEOUT).

Transport, in order: jax.distributed's key-value store (present whenever a mesh spans several
processes), else mpi4py's COMM_WORLD (MPI rank = JAX process index). JAXMG_BOOTSTRAP=kv or mpi
forces one.
"""

from __future__ import annotations

import itertools
import json

import jax

from jaxmg._core import config as _config

_attempts: dict[str, itertools.count] = {}
call_timeout_s = _config.call_timeout_s  # JAXMG_CALL_TIMEOUT, read once


def _timeout_ms() -> int:
    return int(call_timeout_s() * 1000)


def agree(
    key: str, error: str | None, processes: list[int], value: str = "", what: str = ""
) -> int:
    """Every process in `processes` (JAX process indices, all of which call this in the same
    order) says whether it can go on (`error` None) or why not, and a `value` all must share
    (`what` names it). Raises the same RuntimeError on every one of them when any cannot, when
    their values differ, or when one does not come within JAXMG_CALL_TIMEOUT;
    returns the number of earlier agreements on `key` when all can (a count every process shares,
    for keys of what follows). A bounded step before a collective that could strand processes."""
    me = jax.process_index()
    others = [p for p in processes if p != me]
    # Keys are unique per attempt: processes see the same failures, so they count alike.
    attempt = next(_attempts.setdefault(key, itertools.count()))
    if not others:
        if error:
            raise RuntimeError(error)
        return attempt
    key = f"{key}/{attempt}"
    transport = _config.bootstrap()
    client = _kv_client() if transport in ("auto", "kv") else None
    said = {me: json.dumps([error or "", value])}
    if client is not None:
        client.key_value_set(f"{key}/{me}", said[me])
        for p in others:
            try:
                said[p] = client.blocking_key_value_get(f"{key}/{p}", _timeout_ms())
            except Exception as e:  # noqa: BLE001 - the coordination service's timeout
                raise RuntimeError(
                    f"jaxmg: process {p} did not join within JAXMG_CALL_TIMEOUT = "
                    f"{call_timeout_s():g} s (it may have raised an error, taken another branch "
                    f"or died): {e}"
                ) from None
    else:
        comm = _mpi_world() if transport in ("auto", "mpi") else None
        if comm is None:
            raise RuntimeError(
                "jaxmg cannot reach the other processes: call jax.distributed.initialize() "
                "before the first jaxmg call (or install mpi4py and launch with mpirun)"
            )
        said = dict(enumerate(comm.allgather(said[me])))
    said = {p: json.loads(v) for p, v in said.items()}
    failed = [(p, said[p][0]) for p in sorted(processes) if said[p][0]]
    if failed:
        p, why = failed[0]
        raise RuntimeError(why if p == me else f"jaxmg: process {p} cannot go on: {why}")
    values = {p: said[p][1] for p in sorted(processes)}
    if len(set(values.values())) > 1:
        detail = "; ".join(f"process {p}: {v}" for p, v in values.items())
        raise RuntimeError(
            f"jaxmg: the processes of this mesh disagree on {what or 'this step'} ({detail}); "
            "every process must make the same jaxmg calls, in the same order, with the same "
            "arguments"
        )
    return attempt


def broadcast_bytes(key: str, payload: bytes | None, owner: int) -> bytes:
    """Every process gets `payload` of process `owner` (a JAX process index).

    Called by every process of the job in the same order. `key` names the value in the
    key-value store and must be unique per broadcast.
    """
    if jax.process_count() == 1:
        return payload
    me = jax.process_index()
    transport = _config.bootstrap()
    client = _kv_client() if transport in ("auto", "kv") else None
    if client is not None:
        if me == owner:
            client.key_value_set_bytes(key, payload)
            return payload
        return bytes(client.blocking_key_value_get_bytes(key, _timeout_ms()))
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
