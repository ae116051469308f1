"""Where the LU routines (lu_solve, lu_factor, slogdet) hand the engine aᵀ: one policy for all.

The engine factors the shards as they lie (Aᵀ read column-major, in place) and solves with the
transposed factors: ScaLAPACK p?getrs 'T' on CPUs; on GPUs cuBLASMp triangular solves with
transposition and the pivots applied on the host (cuSOLVERMp's Getrs has no transposed solve).
On GPUs, jaxmg's own 1-D LU (cusolverDn panels, cuBLAS updates, NCCL broadcasts) factors
matrices whose engine grid is 1 x P, i.e. meshes with one device column (P x 1); cuSOLVERMp's
Getrf the others. So on a GPU mesh wider than tall (1 x P) the engine is handed aᵀ sharded the
other way (a transpose local to each device, one more shard of memory) unless donate=True.
TRANSPOSE_PLATFORMS hands aᵀ on every mesh shape (the tests use it to drive that path).
"""

from __future__ import annotations

from jaxmg._core import routine as _routine

TRANSPOSE_WIDE_MESHES = {"cuda"}
TRANSPOSE_PLATFORMS: set[str] = set()
HAND_TRANSPOSE = _routine.transpose_when(
    always=TRANSPOSE_PLATFORMS, by_shape=TRANSPOSE_WIDE_MESHES, tall=False
)
