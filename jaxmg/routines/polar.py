"""polar: the polar decomposition A = Up H of a distributed tall matrix."""

from __future__ import annotations

from jaxmg._core import routine as _routine
from jaxmg.routines.gesvd import _place


def _variant(name, h):
    # As gesvd (csrc/routines/gesvd.h): the engine holds A, redistributed; Up comes back in a's
    # sharding, H (N x N) in x.
    return _routine.SolveRoutine(
        name=name,
        symmetric=False,
        hand_transpose=_routine.never_transpose,
        returns_matrix=True,
        takes_rhs=False,
        rectangular=True,
        redistribute=True,
        solution_cols=(lambda n, nrhs: n) if h else (lambda n, nrhs: 1),
        solution_whole=not h,
    )


POLAR = _variant("polar", True)
POLAR_UP = _variant("polar_up", False)


def polar(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    compute_h=True,
    return_status=False,
    pad=True,
    donate=False,
):
    """The polar decomposition A = Up H of an M x N matrix (M >= N) sharded over a mesh.

    Up has orthonormal columns and H is Hermitian positive semi-definite. On GPUs cuSOLVERMp's
    Polar (QDWH iterations on distributed QR and Cholesky factorizations); on CPUs from
    ScaLAPACK's SVD, A = U S Vᴴ: Up = U Vᴴ, H = V S Vᴴ (two distributed products). Nothing is
    gathered; works inside and outside `jax.jit`, on every 1-D and 2-D mesh.

    Args:
      a: (M, N) float32, float64, complex64 or complex128 array, M >= N, sharded over a 1-D or
        2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.qr`.
      compute_h: also return H.
      return_status: also return an int32 status: 0 on success, k > 0 when the engine did not
        converge or A holds NaN or Inf.

    Returns:
      (Up, H), or Up without compute_h; the status appended with return_status. Up is M x N in
      a's sharding; H is N x N, in a's matrix spec where N divides over the mesh (rows over a's
      row axis otherwise, or whole on every device). A rank-deficient A gives a positive
      semi-definite H. On failure Up and H are NaN on every device.

    Raises:
      ValueError, TypeError: on bad shapes (M < N), dtypes, specs, meshes or tiles, before any
        work.
    """
    r = _routine.call(
        POLAR if compute_h else POLAR_UP,
        a,
        None,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=pad,
        donate=donate,
    )
    out = (r.matrix,)
    if compute_h:
        n = a.shape[1]
        out += (_place(r.x, r.user, (n, n)),)
    if return_status:
        out += (r.status,)
    return out[0] if len(out) == 1 else out
