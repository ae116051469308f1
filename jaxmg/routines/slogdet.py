"""slogdet: the sign and log |det| of a distributed general matrix, through pivoted LU."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxmg._core import placement as _mesh
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import lu_solve as _lu

# The determinant is that of aᵀ: the same engine paths as lu_solve (aᵀ on GPU meshes wider
# than tall, where the engine's own 1-D LU runs).
ROUTINE = _routine.SolveRoutine(
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
    _mesh.check_flags(return_status=return_status, pad=pad, donate=donate)
    _routine.check_operands(a)
    opts = _rules.options(
        T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=bool(pad)
    )
    if _routine.traced(a):
        sign, logabsdet, status = _differentiable(opts, bool(donate), a)
    else:  # concrete: nothing to differentiate
        sign, logabsdet, status = _primal(opts, bool(donate), a)
    return (sign, logabsdet, status) if return_status else (sign, logabsdet)


def _primal(opts, donate, a):
    r = _routine.call(ROUTINE, a, None, donate=donate, **opts.kwargs())
    return r.sign, r.logdet, r.status


_differentiable = jax.custom_jvp(_primal, nondiff_argnums=(0, 1))


@_differentiable.defjvp
def _jvp(opts, donate, primals, tangents):
    return _jvp_rule(opts)(primals[0], tangents[0])


@functools.cache
def _jvp_rule(opts):
    from jaxmg.routines import inv as _inv

    @jax.jit
    def rule(a, da):
        sign, logabsdet, status = _primal(opts, False, a)
        t = _rules.trace_inverse(_inv.inverse_transposed(a, **opts.kwargs()), da)
        dsign = sign * 1j * jnp.imag(t) if jnp.iscomplexobj(a) else jnp.zeros_like(sign)
        dlog = jnp.real(t).astype(logabsdet.dtype)
        return (sign, logabsdet, status), (dsign.astype(sign.dtype), dlog, _rules.float0())

    return rule
