"""jaxmg: distributed dense linear algebra for JAX.

A matrix sharded over a JAX mesh is factored and solved where it lies, across devices and
processes, from inside jax.jit: cuSOLVERMp over NCCL on GPUs, ScaLAPACK over MPI on CPUs.
"""

from jaxmg import linalg
from jaxmg._core import native as _native
from jaxmg._core.config import config
from jaxmg._core.placement import ReplicatedMatrixWarning
from jaxmg.device import device_supports_vmm
from jaxmg.routines.context import (
    gesvd_shardmap_ctx,
    least_squares_shardmap_ctx,
    lu_solve_shardmap_ctx,
    polar_shardmap_ctx,
    potrs_shardmap_ctx,
    qr_shardmap_ctx,
    syevd_shardmap_ctx,
)
from jaxmg.routines.factor import CholeskyFactor, LUFactor, cho_factor, cho_solve, lu_factor
from jaxmg.routines.gesvd import gesvd
from jaxmg.routines.inv import inv
from jaxmg.routines.lu_solve import lu_solve, lu_solve_blocks
from jaxmg.routines.matmul import matmul
from jaxmg.routines.mixed import MixedInfo
from jaxmg.routines.polar import polar
from jaxmg.routines.potri import potri
from jaxmg.routines.potrs import potrs, potrs_blocks
from jaxmg.routines.qr import least_squares, qr
from jaxmg.routines.slogdet import slogdet
from jaxmg.routines.solve_triangular import solve_triangular
from jaxmg.routines.syevd import syevd, syevd_blocks
from jaxmg.routines.sygvd import eigh

_native.start_mpi_if_launched()

__all__ = [
    "CholeskyFactor",
    "LUFactor",
    "MixedInfo",
    "ReplicatedMatrixWarning",
    "cho_factor",
    "cho_solve",
    "config",
    "device_supports_vmm",
    "eigh",
    "gesvd",
    "gesvd_shardmap_ctx",
    "inv",
    "linalg",
    "least_squares",
    "least_squares_shardmap_ctx",
    "lu_factor",
    "lu_solve",
    "lu_solve_blocks",
    "lu_solve_shardmap_ctx",
    "matmul",
    "polar",
    "polar_shardmap_ctx",
    "potri",
    "potrs",
    "potrs_blocks",
    "potrs_shardmap_ctx",
    "qr",
    "qr_shardmap_ctx",
    "slogdet",
    "solve_triangular",
    "syevd",
    "syevd_blocks",
    "syevd_shardmap_ctx",
]
__version__ = "2.0.0"
