"""potri: the inverse of a distributed symmetric (Hermitian) positive-definite matrix."""

from __future__ import annotations

from jaxmg._core import routine as _routine

ROUTINE = _routine.SolveRoutine(
    name="potri",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
)


def potri(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    return_logdet=False,
    pad=True,
    donate=False,
    check_symmetry=True,
):
    """The inverse of a symmetric (Hermitian) positive-definite A sharded over a mesh.

    A distributed Cholesky factorization, then the solve with the identity distributed like A
    (never gathered); the inverse comes back with a's sharding (in a's buffers with
    donate=True; a matrix given replicated comes back sharded over the mesh, not gathered).
    JAXMg 0.x's `potri(a, T_A, mesh, in_specs=P(axis, None))` works unchanged.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate, check_symmetry: as for `jaxmg.potrs`.
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is not
        positive definite (or a factor's diagonal entry is not finite), -1 when it is not
        symmetric (Hermitian).
      return_logdet: also return log det A, from the same factorization.

    Returns:
      The inverse (a's shape, dtype and sharding); with return_logdet and/or return_status,
      (inverse[, logdet][, status]). When the factorization fails the inverse and logdet are
      NaN on every device.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    inverse, logdet, status = _routine.solve(
        ROUTINE,
        a,
        None,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=pad,
        donate=donate,
        check_symmetry=check_symmetry,
    )
    return _routine.assemble(
        inverse, logdet, status, return_logdet=return_logdet, return_status=return_status
    )
