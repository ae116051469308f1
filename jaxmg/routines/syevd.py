"""syevd: eigenvalues and eigenvectors of a distributed Hermitian matrix."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The engine redistributes the matrix into block-cyclic tiles (relabeling's padding would add
# eigenvalues) and writes the eigenvectors back into a's sharding (csrc/routines/syevd.h).
_COMMON = dict(
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    takes_rhs=False,
    redistribute=True,
    solution_cols=lambda n, nrhs: 1,  # the eigenvalues
    solution_whole=True,
    # cuSOLVERMp's Syevd is fastest at tile 256 of the tiles measured on 2 H200s
    # (bench/results/syevd_tiles_16384_h200x2_50138e9.json).
    tile_target={"cuda": 256},
)
SYEVD = _routine.EngineRoutine(name="syevd", returns_matrix=True, **_COMMON)
EIGVALSH = _routine.EngineRoutine(name="eigvalsh", **_COMMON)


def syevd(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_eigenvectors=True,
    return_status=False,
    pad=True,
    donate=False,
    check_symmetry=True,
):
    """Eigenvalues and eigenvectors of a Hermitian (real symmetric) A sharded over a mesh.

    The divide-and-conquer eigensolver of the engine (cuSOLVERMp's Syevd on GPUs, ScaLAPACK's
    p?syevd / p?heevd on CPUs) on the matrix copied into block-cyclic tiles; nothing is
    gathered. With return_eigenvectors=False only the eigenvalues are computed (cuSOLVERMp's
    values-only path; ScaLAPACK's p?syev / p?heev).

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, Hermitian, sharded over a 1-D or
        2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate, check_symmetry: as for `jaxmg.potrs` (the
        matrix is checked for symmetry first unless check_symmetry=False; the engine reads its
        lower triangle).
      return_eigenvectors: also compute and return the eigenvectors.
      return_status: also return an int32 status: 0 on success, k > 0 when the eigensolver did
        not converge or the matrix holds NaN or Inf, -1 when it is not Hermitian.

    Returns:
      (w, V), or w without eigenvectors; with return_status, (w, V, status) or (w, status). w:
      (N,) real eigenvalues in ascending order, the same on every device; V: (N, N) with the
      eigenvectors in its columns (A V = V diag(w)), in a's sharding (replicated when a is).
      On failure w and V are NaN on every device.

    Differentiation (forward and reverse mode, for Hermitian tangents): dw = Re diag(Vᴴ dA V)
    and dV = V (F ∘ Vᴴ dA V), F_ij = 1 / (w_j − w_i), with the engine's distributed products, no
    XLA collective of matrix size (the values-only path computes V for its derivative). As for
    any eigensolver, the eigenvectors' derivative is defined only for distinct eigenvalues (F is
    infinite for a repeated one; losses that depend on an eigenvector only through its
    eigenspace, or on the eigenvalues alone, are fine), and a loss of V must not depend on each
    eigenvector's phase.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    return API.public(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_eigenvectors=return_eigenvectors,
        return_status=return_status,
        pad=pad,
        donate=donate,
        check_symmetry=check_symmetry,
    )


def syevd_blocks(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_eigenvectors=True,
    return_status=False,
    pad=True,
    check_symmetry=True,
):
    """syevd on this device's block of A, inside the caller's `jax.shard_map` over `mesh`.

    The per-block form, as `jaxmg.potrs_blocks`. Not differentiable.

    Args:
      a: this device's block of A, sharded as `matrix_specs` over `mesh`.
      T_A, pad, check_symmetry, return_eigenvectors, return_status: as for `jaxmg.syevd`.
      mesh: the mesh of the enclosing shard_map (required).
      matrix_specs, in_specs: as for `jaxmg.potrs_blocks`.

    Returns:
      (w, V block), or w without eigenvectors, the status appended with return_status: the
      eigenvalues (the same on every device) and this device's block of V.

    Raises:
      ValueError: without mesh=, or on bad shapes, specs or tiles, before any work.
      TypeError: on bad dtypes or non-boolean flags.
    """
    return API.blocks(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_eigenvectors=return_eigenvectors,
        return_status=return_status,
        pad=pad,
        check_symmetry=check_symmetry,
    )


def unpack(r, kw, b):
    """(w[, V], status) of a call's result (the generalized problem's too)."""
    vectors = (r.matrix,) if kw["return_eigenvectors"] else ()
    return (jnp.real(r.x[:, 0]), *vectors, r.status)


def _tangent(variant, opts, placement, primals, out, tangents):
    (a,), (da,) = primals, tangents
    vectors = variant["return_eigenvectors"]
    if vectors:
        w, v, _ = out
    else:  # the values' derivative needs the vectors
        w, v, _ = API.differentiable(return_eigenvectors=True)(opts, False, a)
    dw, dv = _rules.eigen_tangent(placement, w, v, da)
    return (dw, dv, _rules.float0()) if vectors else (dw, _rules.float0())


# w, V (replicated when a is) and the status; the matrix is checked by the call itself.
API = _factory.Routine(
    _factory.Declaration(
        routine=lambda kw: SYEVD if kw["return_eigenvectors"] else EIGVALSH,
        outputs=(
            _factory.Output("w"),
            _factory.Output("V", "return_eigenvectors", place="replicated", optional=True),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=unpack,
        keywords=("check_symmetry",),
        variants=("return_eigenvectors",),
        tangent=_tangent,
        check_operands=False,
    )
)
