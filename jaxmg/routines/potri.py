"""potri: the inverse of a distributed symmetric (Hermitian) positive-definite matrix."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

ROUTINE = _routine.EngineRoutine(
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

    A distributed Cholesky factorization A = L Lᴴ, then A⁻¹ = L⁻ᴴ L⁻¹ by blocks, distributed like
    A (never gathered); the inverse comes back with a's sharding (in a's buffers with
    donate=True; a matrix given replicated comes back sharded over the mesh, not gathered).
    JAXMg 0.x's `potri(a, T_A, mesh, in_specs=P(axis, None))` works unchanged.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate, check_symmetry: as for `jaxmg.potrs`.
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is not
        positive definite (or a factor's diagonal entry is not finite), -1 when it is not
        symmetric (Hermitian).
      return_logdet: also return log det A, from the same factorization.

    Differentiation (forward and reverse mode, any order, for Hermitian tangents):
    d(A⁻¹) = −A⁻¹ dA A⁻¹ and d log det A = Re tr(A⁻¹ dA), with the engine's distributed
    products (no XLA collective of matrix size).

    Returns:
      The inverse (a's shape, dtype and sharding); with return_logdet and/or return_status,
      (inverse[, logdet][, status]). When the factorization fails the inverse and logdet are
      NaN on every device.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    return API.public(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_status=return_status,
        return_logdet=return_logdet,
        pad=pad,
        donate=donate,
        check_symmetry=check_symmetry,
    )


def _tangent(variant, opts, placement, primals, out, tangents):
    # tr(X dA) = Σ Xᵀ ⊙ dA, and Xᵀ = conj(X) for the Hermitian inverse X.
    (da,), (x, logdet, _) = tangents, out
    dx = -_rules.engine_product(placement, _rules.engine_product(placement, x, da), x)
    dlogdet = jnp.real(jnp.sum(jnp.conj(x) * da)).astype(logdet.dtype)
    return dx, dlogdet, _rules.float0()


# The inverse in a's sharding, log det A and the status.
API = _factory.Routine(
    _factory.Declaration(
        routine=ROUTINE,
        outputs=(
            _factory.Output("inverse"),
            _factory.Output("logdet", "return_logdet"),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=lambda r, kw, b: (r.matrix, r.logdet, r.status),
        keywords=("check_symmetry",),
        tangent=_tangent,
        check_operands=False,
    )
)
