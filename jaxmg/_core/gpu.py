"""GPU engine bootstrap: one NCCL communicator + cuSOLVERMp grid per (mesh, device).

A process may hold one device of the mesh (a launcher's process per GPU) or several (one process
driving every local GPU: a notebook, `python script.py`); the native library creates the local
devices' contexts together, one thread per device, and the FFI handler of each device picks its
own by the device ordinal XLA hands it.

`context_for(placement)` runs before the jitted call is built, identically on every process (a
jaxmg call is made by all processes of a mesh, in the same order). The process that holds mesh
position 0 makes an NCCL unique id and shares its 128 bytes (jaxmg/_core/comm.py: jax.distributed's
key-value store, or mpi4py); then every process creates its context in the native library
(ncclCommInitRank, cusolverMpCreate, cusolverMpCreateDeviceGrid), which returns an id the FFI
handlers receive as the attribute `context`. Contexts live until the process exits.

NCCL ranks follow the engine grid, not the process order: the device at mesh position (u, v)
plays engine grid position (i, j) = (rows.grid_of_mesh[v], cols.grid_of_mesh[u]) and takes NCCL
rank i * npcol + j (cuSOLVERMp row-major grid mapping); the native layout plan computes it.
"""

from __future__ import annotations

import ctypes
import threading

import jax
import numpy as np

from jaxmg._core import comm as _comm
from jaxmg._core import native as _native
from jaxmg._core import placement as _placement

_UNIQUE_ID_BYTES = 128

_lock = threading.Lock()
_contexts: dict[tuple, int] = {}


def _lib() -> ctypes.CDLL:
    lib = _native.engine("cuda")
    if not getattr(lib, "_jaxmg_gpu_prototypes", False):
        lib.jaxmg_nccl_get_unique_id.argtypes = [ctypes.c_char_p]
        lib.jaxmg_nccl_get_unique_id.restype = ctypes.c_int
        lib.jaxmg_cuda_rank_of_mesh_position.argtypes = (
            [ctypes.c_int] * 5
            + [ctypes.POINTER(ctypes.c_int)] * 3
            + [ctypes.c_char_p, ctypes.c_int]
        )
        lib.jaxmg_cuda_rank_of_mesh_position.restype = ctypes.c_int
        ints = ctypes.POINTER(ctypes.c_int)
        lib.jaxmg_cuda_create_contexts.argtypes = (
            [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
            + [ints] * 4
            + [ctypes.c_int] * 4
            + [ctypes.c_char_p, ctypes.c_int]
        )
        lib.jaxmg_cuda_create_contexts.restype = ctypes.c_int64
        lib._jaxmg_gpu_prototypes = True
    return lib


def rank_of_mesh_position(
    mesh_rows: int, mesh_cols: int, u: int, v: int, symmetric: bool = True, redistribute=False
) -> tuple[int, int, int]:
    """(NCCL rank, grid rows, grid cols) of mesh position (u, v) for routines of a kind.

    Symmetric routines relabel with one permutation on rows and columns, which on some grids
    (4x2, ...) renumbers the longer mesh axis; general routines and redistributed plans keep the
    mesh order. The native layout plan decides, so the handlers and the bootstrap agree.
    """
    lib = _lib()
    rank, nprow, npcol = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    err = ctypes.create_string_buffer(1024)
    kind = (0 if symmetric else 1) | (2 if redistribute else 0)
    if lib.jaxmg_cuda_rank_of_mesh_position(
        kind,
        mesh_rows,
        mesh_cols,
        u,
        v,
        ctypes.byref(rank),
        ctypes.byref(nprow),
        ctypes.byref(npcol),
        err,
        len(err),
    ):
        raise ValueError(err.value.decode(errors="replace"))
    return rank.value, nprow.value, npcol.value


def _device_grid(placement) -> np.ndarray:
    """The devices of mesh positions (u, v) as a mesh_rows x mesh_cols array."""
    if placement.device_ids is not None:
        by_id = {d.id: d for d in jax.devices()}
        return np.asarray([by_id[i] for i in placement.device_ids], dtype=object).reshape(
            placement.mesh_rows, placement.mesh_cols
        )
    # Inside jit only the abstract mesh is known: assume the mesh jax.make_mesh builds for its
    # shape. The handler checks the position it is given and asks for mesh=... if wrong.
    mesh = placement.mesh
    concrete = jax.make_mesh(tuple(mesh.axis_sizes), tuple(mesh.axis_names))
    return _placement.device_grid(concrete, placement.row_axis, placement.col_axis)


def _unique_id(key: str, owner_process: int) -> bytes:
    """A new NCCL unique id made by `owner_process` and shared with every process."""
    uid = None
    if jax.process_index() == owner_process or jax.process_count() == 1:
        buf = ctypes.create_string_buffer(_UNIQUE_ID_BYTES)
        if _lib().jaxmg_nccl_get_unique_id(buf) != 0:
            raise RuntimeError("ncclGetUniqueId failed (run with NCCL_DEBUG=WARN for details)")
        uid = buf.raw[:_UNIQUE_ID_BYTES]
    uid = _comm.broadcast_bytes(key, uid, owner_process)
    if len(uid) != _UNIQUE_ID_BYTES:
        raise RuntimeError(f"jaxmg: got a {len(uid)}-byte NCCL id from process {owner_process}")
    return uid


def context_for(placement, symmetric: bool = True, redistribute: bool = False) -> int:
    """The id of this process's GPU context for the placement's mesh (created on first use).

    Contexts are shared by every routine whose plan puts the mesh's devices on the same grid
    positions (the NCCL rank map), so symmetric and general routines share one on most meshes.
    """
    devices = _device_grid(placement)
    mr, mc = placement.mesh_rows, placement.mesh_cols
    rank_map = tuple(
        rank_of_mesh_position(mr, mc, u, v, symmetric, redistribute)[0]
        for u in range(mr)
        for v in range(mc)
    )
    key = (tuple(int(d.id) for d in devices.flat), mr, mc, rank_map)
    with _lock:
        if key in _contexts:
            return _contexts[key]
        me = jax.process_index()
        local = [(u, v) for u in range(mr) for v in range(mc) if devices[u, v].process_index == me]
        if not local:
            _contexts[key] = 0  # this process holds no shard: the handler never runs here
            return 0
        ranks = [rank_of_mesh_position(mr, mc, u, v, symmetric, redistribute) for u, v in local]
        nprow, npcol = ranks[0][1], ranks[0][2]
        name = (
            f"jaxmg/nccl_id/{mr}x{mc}/"
            + "-".join(str(i) for i in key[0])
            + "/"
            + "-".join(str(r) for r in rank_map)
        )
        # Every process of the mesh is here, wants the same context and can go on, or every one
        # raises the same error (or a time-out): the NCCL initialization below is a collective
        # that would strand them. The key names the devices only, so that processes that want
        # different contexts (different routine kinds) meet and see it.
        processes = sorted({int(d.process_index) for d in devices.flat})
        attempt = _comm.agree(
            "jaxmg/context/" + "-".join(str(i) for i in key[0]),
            None,
            processes,
            value=f"{'symmetric' if symmetric else 'general'} routine, engine grid {nprow}x{npcol},"
            f" NCCL ranks {list(rank_map)}",
            what="the GPU context of this call (the kind of routine)",
        )
        uid = _unique_id(f"{name}/{attempt}", int(devices[0, 0].process_index))
        err = ctypes.create_string_buffer(2048)

        def ints(values):
            return (ctypes.c_int * len(values))(*values)

        # One context per local device (one thread each in the native library: several devices
        # of one process join the NCCL initialization together).
        ctx = _lib().jaxmg_cuda_create_contexts(
            uid,
            mr * mc,
            len(local),
            ints([r[0] for r in ranks]),
            ints([int(devices[u, v].local_hardware_id) for u, v in local]),
            ints([u for u, _ in local]),
            ints([v for _, v in local]),
            nprow,
            npcol,
            mr,
            mc,
            err,
            len(err),
        )
        if ctx <= 0:
            raise RuntimeError(
                "jaxmg could not create its GPU context: " + err.value.decode(errors="replace")
            )
        _contexts[key] = int(ctx)
        return int(ctx)
