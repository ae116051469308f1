"""The one pipeline every solve routine takes: checks, placement, tile, engine, call, result.

A routine module (jaxmg/routines/) declares a `SolveRoutine` (its name, whether it assumes a
symmetric matrix, when the engine is handed aᵀ) and calls `solve`. This module owns everything
else: argument checks, the mesh and process grid, the tile, the native engine and its GPU context,
and the jitted `shard_map` + `ffi_call` with donation. One FFI call per device runs the native
skeleton (csrc/ffi/solve.h) on that device's shard.
"""

from __future__ import annotations

import functools
import os
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import gpu as _gpu
from jaxmg._core import native as _native
from jaxmg._core import placement as _mesh

# JAXMG_REDISTRIBUTE=always makes the engines redistribute the matrix (p?gemr2d, cublasMpGemr2D)
# even on grids where relabeling would do: a switch to exercise that path on any mesh.
REDISTRIBUTE_ENV = "JAXMG_REDISTRIBUTE"


@dataclass(frozen=True)
class SolveRoutine:
    """What a solve routine declares.

    name: the routine's FFI target suffix (jaxmg_<engine>_<name>).
    symmetric: the routine reads a symmetric (Hermitian) matrix: one tile permutation on rows and
      columns; otherwise independent row and column permutations (every grid relabels).
    hand_transpose: (placement, donate) -> whether to hand the engine aᵀ (aᴴ for symmetric
      routines) sharded the other way, a transpose local to each device.
    returns_matrix: the routine's result is the matrix it overwrites (an inverse), in a's
      sharding; it takes no right-hand side.
    """

    name: str
    symmetric: bool
    hand_transpose: Callable[[_mesh.MatrixPlacement, bool], bool]
    returns_matrix: bool = False


def never_transpose(placement: _mesh.MatrixPlacement, donate: bool) -> bool:
    """The `hand_transpose` policy of routines that always run on a as it is."""
    return False


def transpose_when(*, always: set[str], by_shape: set[str], tall: bool):
    """A `hand_transpose` policy: aᵀ on `always` platforms, and on `by_shape` platforms for meshes
    taller than wide (`tall`) or wider than tall; never with donation (the in-place path saves a
    shard of memory). The sets are read at call time, so tests can steer the path."""

    def decide(placement: _mesh.MatrixPlacement, donate: bool) -> bool:
        if donate:
            return False
        rows, cols = placement.mesh_rows, placement.mesh_cols
        shaped = rows > cols if tall else rows < cols
        return placement.platform in always or (shaped and placement.platform in by_shape)

    return decide


def solve(
    routine: SolveRoutine,
    a,
    b,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    in_specs=None,
    pad=True,
    donate=False,
    check_symmetry=False,
):
    """Runs `routine` on (a, b); returns (x, logdet, status), x shaped like b; for a routine that
    returns a matrix (b is None), (the new matrix in a's sharding, logdet, status).

    check_symmetry: (symmetric routines) the engine compares uᴴ A v with conj(vᴴ A u) for fixed
    probe vectors u, v first (each device multiplies its shard; sums of vector size over the
    processes; csrc/common/symmetry.h) and returns NaN with status NOT_SYMMETRIC on every device
    when they differ beyond rounding.

    Raises ValueError/TypeError for bad arguments before any work, identically on every process.
    """
    matrix_specs = _matrix_spec(matrix_specs, in_specs)
    n = _mesh.check_square_matrix(a)
    dtype = _mesh.check_dtype(a)
    if routine.returns_matrix:
        b = None  # the call takes an empty right-hand side (made inside the jitted function)
    else:
        _check_rhs(b, n, dtype)
    placement = _mesh.resolve_placement(a, mesh, matrix_specs)
    _mesh.check_divisible(n, placement)
    if n == 0:
        real = np.finfo(dtype).dtype
        out = jnp.zeros((0, 0), dtype) if routine.returns_matrix else jnp.zeros(b.shape, dtype)
        return out, jnp.zeros((), real), jnp.zeros((), jnp.int32)
    redistribute = os.environ.get(REDISTRIBUTE_ENV, "") == "always"
    tile = _mesh.choose_tile(n, placement, T_A, pad, symmetric=routine.symmetric)
    if placement.platform == "cpu":
        _mesh.check_cpu_placement(placement)
    _native.engine(placement.platform)
    engine_placement = placement
    if routine.hand_transpose(placement, bool(donate)):
        engine_placement = _mesh.transposed(placement)
    context = None
    if placement.platform == "cuda":
        context = _gpu.context_for(engine_placement, routine.symmetric, redistribute)
    check_symmetry = bool(check_symmetry and routine.symmetric)
    fn = _build(
        routine.name,
        routine.symmetric,
        placement,
        engine_placement,
        n,
        tile,
        bool(pad),
        redistribute,
        2 if b is None else b.ndim,
        bool(donate),
        context,
        check_symmetry,
        _thread_tag(a),
        routine.returns_matrix,
    )
    out = fn(a, b)
    return (out[3], *out[1:3]) if routine.returns_matrix else out[:3]


def _thread_tag(a) -> int:
    """The calling thread's tag in the call agreement: a stable hash of its name for a call made
    outside jit (the processes' threads of the same name are paired; calls of different threads
    meet as an error on every process instead of mixing two systems), 0 inside a jitted function
    (its compiled program runs on whichever thread calls it)."""
    if isinstance(a, jax.core.Tracer):
        return 0
    return zlib.crc32(threading.current_thread().name.encode()) + 1


def _matrix_spec(matrix_specs, in_specs):
    if in_specs is None:
        return matrix_specs
    if matrix_specs is not None:
        raise ValueError("pass either matrix_specs or in_specs, not both")
    return in_specs[0] if isinstance(in_specs, tuple | list) else in_specs


def _check_rhs(b, n: int, dtype: np.dtype) -> None:
    shape = tuple(b.shape)
    if len(shape) not in (1, 2) or shape[0] != n:
        raise ValueError(f"b must have shape ({n},) or ({n}, K) to match a, got {shape}")
    if np.dtype(b.dtype) != dtype:
        raise TypeError(
            f"b has dtype {np.dtype(b.dtype)} but a has {dtype}; cast with b.astype(a.dtype)"
        )


def _axis_index(axis):
    return jnp.int32(0) if axis is None else jax.lax.axis_index(axis).astype(jnp.int32)


@functools.cache
def _build(
    name: str,
    symmetric: bool,
    user: _mesh.MatrixPlacement,
    placement: _mesh.MatrixPlacement,
    n: int,
    tile: int,
    pad: bool,
    redistribute: bool,
    b_ndim: int,
    donate: bool,
    context: int | None,
    check_symmetry: bool = False,
    thread: int = 0,
    returns_matrix: bool = False,
):
    # MPI rank (= JAX process index, checked by _native.engine) of each mesh position; empty
    # when only the abstract mesh is known (inside jit): the engine then gathers the map.
    ranks = np.asarray(placement.process_ids or (), dtype=np.int64)
    target = _native.target(placement.platform, name)
    transposed = placement is not user
    # The GPU handlers take one more attribute: their context id.
    extra_attrs = {} if context is None else {"context": np.int64(context)}

    def local(a_blk, b_blk):
        position = jnp.stack([_axis_index(placement.row_axis), _axis_index(placement.col_axis)])
        real = jnp.finfo(a_blk.dtype).dtype
        call = jax.ffi.ffi_call(
            target,
            (
                jax.ShapeDtypeStruct(a_blk.shape, a_blk.dtype),
                jax.ShapeDtypeStruct(b_blk.shape, b_blk.dtype),
                jax.ShapeDtypeStruct((), real),
                jax.ShapeDtypeStruct((), jnp.int32),
            ),
            has_side_effect=True,
            input_output_aliases={0: 0},
        )
        a_work, x, logdet, status = call(
            a_blk,
            b_blk,
            position,
            n=np.int64(n),
            mesh_rows=np.int64(placement.mesh_rows),
            mesh_cols=np.int64(placement.mesh_cols),
            tile=np.int64(tile),
            pad=np.int64(pad),
            force_redistribute=np.int64(redistribute),
            transposed=np.int64(transposed),
            ranks=ranks,
            thread=np.int64(thread),
            check_symmetry=np.int64(check_symmetry),
            **extra_attrs,
        )
        return x, logdet, status, a_work

    call = jax.shard_map(
        local,
        mesh=placement.mesh,
        in_specs=(placement.matrix_spec, placement.rhs_spec),
        out_specs=(placement.rhs_spec, P(), P(), placement.matrix_spec),
        check_vma=False,
    )

    def run(a, b):
        if b is None:
            b = jnp.zeros((n, 0), a.dtype)
        b2 = b.reshape(n, 1) if b_ndim == 1 else b
        a = _mesh.constrain(a, user.mesh, user.matrix_spec)
        if transposed:  # aᵀ (aᴴ = a for symmetric routines), sharded the other way
            a = jnp.conj(a.T) if symmetric and jnp.iscomplexobj(a) else a.T
            a = _mesh.constrain(a, placement.mesh, placement.matrix_spec)
        b2 = _mesh.constrain(b2, placement.mesh, placement.rhs_spec)
        x, logdet, status, a_work = call(a, b2)
        x = _mesh.constrain(x, user.mesh, user.rhs_spec)
        x = x.reshape(n) if b_ndim == 1 else x
        if returns_matrix:
            a_work = _mesh.constrain(a_work, user.mesh, user.matrix_spec)
        # With donation, returning the overwritten matrix lets XLA reuse a's buffer in place.
        return (x, logdet, status, a_work) if donate or returns_matrix else (x, logdet, status)

    return jax.jit(run, donate_argnums=(0,) if donate else ())


# The status of a symmetric routine whose matrix is not symmetric (Hermitian) (csrc/routines/).
NOT_SYMMETRIC = -1


def assemble(x, logdet, status, *, return_logdet: bool, return_status: bool):
    """(x[, logdet][, status]): the routines' fixed return structure."""
    out = (x,)
    if return_logdet:
        out += (logdet,)
    if return_status:
        out += (status,)
    return out[0] if len(out) == 1 else out
