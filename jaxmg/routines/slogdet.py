"""slogdet: the sign and log |det| of a distributed general matrix, through pivoted LU."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import inv as _inv
from jaxmg.routines import lu_solve as _lu

# The determinant is that of aᵀ: the same engine paths as lu_solve (aᵀ on GPU meshes wider
# than tall, where the engine's own 1-D LU runs).
ROUTINE = _routine.EngineRoutine(
    name="slogdet",
    symmetric=False,
    hand_transpose=_lu.ROUTINE.hand_transpose,
    takes_rhs=False,
)


def slogdet(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    pad=True,
    donate=False,
):
    """(sign, log |det A|) of a general A sharded over a mesh, as `jnp.linalg.slogdet`.

    A distributed LU factorization with partial pivoting; the sign combines the factor's
    diagonal, the row interchanges and the engine's relabeling of the matrix. Nothing is
    gathered.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.lu_solve` (the matrix is
        overwritten by its factors only with donate=True).
      return_status: also return an int32 status: 0, or k > 0 when the matrix is singular (then
        sign is 0 and logabsdet -inf, as NumPy) or a factor's diagonal entry is not finite
        (then both are NaN).

    Returns:
      (sign, logabsdet): sign has a's dtype (|sign| = 1 for complex), logabsdet is real;
      (sign, logabsdet, status) with return_status.

    Differentiation (forward and reverse mode, with respect to a): with t = tr(A⁻¹ dA) =
    Σ A⁻ᵀ ⊙ dA (A⁻ᵀ from jaxmg's own LU, in a's sharding), d logabsdet = Re t and
    d sign = i Im(t) sign (0 for real matrices).

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
        pad=pad,
        donate=donate,
    )


def _tangent(variant, opts, placement, primals, out, tangents):
    """With t = tr(A⁻¹ dA) = Σ A⁻ᵀ ⊙ dA: d logabsdet = Re t, d sign = i Im(t) sign."""
    (a,), (da,), (sign, logabsdet, _) = primals, tangents, out
    t = _rules.trace_inverse(_inv.inverse_transposed(a, **opts.kwargs()), da)
    dsign = sign * 1j * jnp.imag(t) if jnp.iscomplexobj(a) else jnp.zeros_like(sign)
    return dsign.astype(sign.dtype), jnp.real(t).astype(logabsdet.dtype), _rules.float0()


# The sign, log |det A| and the status.
API = _factory.Routine(
    _factory.Declaration(
        routine=ROUTINE,
        outputs=(
            _factory.Output("sign"),
            _factory.Output("logabsdet"),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=lambda r, kw, b: (r.sign, r.logdet, r.status),
        tangent=_tangent,
        linalg=_factory.Alias(slogdet, keywords=lambda args: _method(args["method"])),
    )
)


def _method(method) -> dict:
    """jax.numpy.linalg.slogdet's method: LU ("qr" is accepted and computed by LU too)."""
    if method not in (None, "lu", "qr"):
        raise ValueError(f"method must be None, 'lu' or 'qr', got {method!r}")
    return {}
