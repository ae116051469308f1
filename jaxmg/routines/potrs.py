"""potrs: Cholesky solve of a distributed symmetric (Hermitian) positive-definite system."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import gpu as _gpu
from jaxmg._core import native as _native
from jaxmg._core import placement as _mesh

# The engine's process grid is the mesh transposed (docs/layout.md). cuSOLVERMp is faster on
# grids at least as tall as wide (1.02 s vs 1.15 s at N = 65536 on 2 H200s), so on meshes taller
# than wide it is handed aᴴ (= a), sharded the other way: a transpose local to each device.
# Not with donate=True, where the in-place path saves a shard of memory.
TRANSPOSE_TALL_MESHES = {"cuda"}


def potrs(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_logdet=False,
    return_status=False,
    pad=True,
    donate=False,
):
    """Solves A x = b for a symmetric (Hermitian) positive-definite A sharded over a mesh.

    The matrix is factored with a distributed Cholesky decomposition (cuSOLVERMp on GPUs,
    ScaLAPACK on CPUs) where it lies: each device hands its shard to the engine, nothing is
    gathered. `a` must be symmetric (Hermitian): the engine reads one triangle of the tile-relabeled
    matrix, which holds entries of both triangles of `a`. Works inside and outside `jax.jit`.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh
        (rows over one mesh axis, columns over another or replicated).
      b: (N,) or (N, K) array of the same dtype. It is resharded to rows over a's row axis.
      T_A: block-cyclic tile size. None picks one that avoids padding (about 128 on CPUs,
        1024 on GPUs).
      mesh: the jax.sharding.Mesh of `a`; by default the mesh of a's sharding or the one set
        with jax.set_mesh.
      matrix_specs: PartitionSpec of `a`, e.g. P("pr", "pc"); by default a's own.
      in_specs: (spec of a, spec of b), as in JAXMg 1.x; only the spec of a is used.
      return_logdet: also return log det A (a real scalar).
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is not
        positive definite (a leading minor of order k of the engine's ordering is not).
      pad: allow padding when T_A does not divide the shard (costs a copy of the shard).
      donate: let jaxmg overwrite `a` (saves one copy of the shard outside jit).

    Returns:
      x with b's shape and dtype; (x, logdet) with return_logdet; (x, status) with
      return_status; (x, logdet, status) with both. When the factorization fails, x and logdet
      are NaN on every device.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    if in_specs is not None:
        if matrix_specs is not None:
            raise ValueError("pass either matrix_specs or in_specs, not both")
        matrix_specs = in_specs[0] if isinstance(in_specs, tuple | list) else in_specs
    n = _mesh.check_square_matrix(a)
    dtype = _mesh.check_dtype(a)
    _check_rhs(b, n, dtype)
    placement = _mesh.resolve_placement(a, mesh, matrix_specs)
    _mesh.check_divisible(n, placement)
    if n == 0:
        return _empty_result(b, dtype, return_logdet, return_status)
    tile = _mesh.choose_tile(n, placement, T_A, pad)
    if placement.platform == "cpu":
        _mesh.check_cpu_placement(placement)
    _native.engine(placement.platform)
    engine_placement = placement
    if (
        placement.platform in TRANSPOSE_TALL_MESHES
        and placement.mesh_rows > placement.mesh_cols
        and not donate
    ):
        engine_placement = _mesh.transposed(placement)
    # GPU engine only: the NCCL/cuSOLVERMp context of this mesh and device (see _gpu.py).
    context = _gpu.context_for(engine_placement) if placement.platform == "cuda" else None
    fn = _build(placement, engine_placement, n, tile, bool(pad), b.ndim, bool(donate), context)
    x, logdet, status = fn(a, b)[:3]
    out = (x,)
    if return_logdet:
        out += (logdet,)
    if return_status:
        out += (status,)
    return out[0] if len(out) == 1 else out


def _axis_index(axis):
    return jnp.int32(0) if axis is None else jax.lax.axis_index(axis).astype(jnp.int32)


def _check_rhs(b, n: int, dtype: np.dtype) -> None:
    shape = tuple(b.shape)
    if len(shape) not in (1, 2) or shape[0] != n:
        raise ValueError(f"b must have shape ({n},) or ({n}, K) to match a, got {shape}")
    if np.dtype(b.dtype) != dtype:
        raise TypeError(
            f"b has dtype {np.dtype(b.dtype)} but a has {dtype}; cast with b.astype(a.dtype)"
        )


def _empty_result(b, dtype, return_logdet, return_status):
    out = (jnp.zeros(b.shape, dtype),)
    if return_logdet:
        out += (jnp.zeros((), np.finfo(dtype).dtype),)
    if return_status:
        out += (jnp.zeros((), jnp.int32),)
    return out[0] if len(out) == 1 else out


@functools.cache
def _build(
    user: _mesh.MatrixPlacement,
    placement: _mesh.MatrixPlacement,
    n: int,
    tile: int,
    pad: bool,
    b_ndim: int,
    donate,
    context: int | None = None,
):
    # MPI rank (= JAX process index, checked by _native.engine) of each mesh position; empty
    # when only the abstract mesh is known (inside jit): the engine then gathers the map.
    ranks = np.asarray(placement.process_ids or (), dtype=np.int64)
    target = _native.TARGETS[placement.platform]["potrs"]
    # The GPU handler takes one more attribute: its context id (None on the CPU engine).
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
            ranks=ranks,
            **extra_attrs,
        )
        return x, logdet, status, a_work

    solve = jax.shard_map(
        local,
        mesh=placement.mesh,
        in_specs=(placement.matrix_spec, placement.rhs_spec),
        out_specs=(placement.rhs_spec, P(), P(), placement.matrix_spec),
        check_vma=False,
    )

    def run(a, b):
        b2 = b.reshape(n, 1) if b_ndim == 1 else b
        a = _mesh.constrain(a, user.mesh, user.matrix_spec)
        if placement is not user:  # hand the engine aᴴ = a, sharded the other way
            a = jnp.conj(a.T) if jnp.iscomplexobj(a) else a.T
            a = _mesh.constrain(a, placement.mesh, placement.matrix_spec)
        b2 = _mesh.constrain(b2, placement.mesh, placement.rhs_spec)
        x, logdet, status, a_work = solve(a, b2)
        x = _mesh.constrain(x, user.mesh, user.rhs_spec)
        x = x.reshape(n) if b_ndim == 1 else x
        # With donation, returning the overwritten matrix lets XLA reuse a's buffer in place.
        return (x, logdet, status, a_work) if donate else (x, logdet, status)

    return jax.jit(run, donate_argnums=(0,) if donate else ())
