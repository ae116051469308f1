"""inv: the inverse of a distributed general matrix, through pivoted LU."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The engine redistributes the matrix (no relabeling): with independent row and column
# relabelings, an entry of the inverse would belong to another device (csrc/routines/inv.h).
ROUTINE = _routine.EngineRoutine(
    name="inv",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
    redistribute=True,
)


# The transpose of the inverse, A⁻ᵀ, in a's sharding (for derivatives of log |det A|).
TRANSPOSED = _routine.EngineRoutine(
    name="inv_t",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
    redistribute=True,
)


def inverse_transposed(a, **kwargs):
    """A⁻ᵀ (not conjugated) with a's sharding: the inverse's entries where dA's are, so that
    tr(A⁻¹ dA) = Σ A⁻ᵀ ⊙ dA needs no transpose of a distributed matrix."""
    x, _, _ = _routine.solve(TRANSPOSED, a, None, **kwargs)
    return x


def inv(
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
):
    """The inverse of a general nonsingular A sharded over a mesh.

    A distributed LU factorization with partial pivoting, then the solve with the identity
    distributed like A (never gathered); the inverse comes back with a's sharding (in a's
    buffers with donate=True). The engine copies the matrix into block-cyclic tiles and back
    (p?gemr2d, cublasMpGemr2D): one more matrix of memory than jaxmg.potri.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.lu_solve`.
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is
        singular (a pivot is exactly zero) or a factor's diagonal entry is not finite.
      return_logdet: also return log |det A|, from the same factorization.

    Returns:
      The inverse (a's shape, dtype and sharding); with return_logdet and/or return_status,
      (inverse[, logdet][, status]). When A is singular the inverse and logdet are NaN on every
      device.

    Differentiation (forward and reverse mode, any order): d(A⁻¹) = −A⁻¹ dA A⁻¹ and
    d log |det A| = Re tr(A⁻¹ dA), with the engine's distributed products (no XLA collective;
    the log-determinant's derivative takes XLA's distributed transpose of A⁻¹).

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
    )


def _tangent(variant, opts, placement, primals, out, tangents):
    (da,), (x, logdet, _) = tangents, out
    # The products are the engine's; log |det A|'s tr(X dA) = Σ Xᵀ ⊙ dA takes XLA's
    # distributed transpose of X (only where the log-determinant's derivative is used).
    dx = -_rules.engine_product(placement, _rules.engine_product(placement, x, da), x)
    dlogdet = jnp.real(jnp.sum(_rules.transpose(placement, x) * da)).astype(logdet.dtype)
    return dx, dlogdet, _rules.float0()


# The inverse in a's sharding, log |det A| and the status.
API = _factory.Routine(
    _factory.Declaration(
        routine=ROUTINE,
        outputs=(
            _factory.Output("inverse"),
            _factory.Output("logdet", "return_logdet"),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=lambda r, kw, b: (r.matrix, r.logdet, r.status),
        tangent=_tangent,
        check_operands=False,
        linalg=_factory.Alias(inv),  # jaxmg.linalg.inv: JAX's unused arguments dropped
    )
)
