"""lu_solve: solve of a distributed general system by pivoted LU factorization."""

from __future__ import annotations

from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import factor as _factor
from jaxmg.routines import inv as _inv
from jaxmg.routines.lu_policy import TRANSPOSE_PLATFORMS, TRANSPOSE_WIDE_MESHES  # noqa: F401

# Where the engine is handed aᵀ: jaxmg/routines/lu_policy.py (shared with lu_factor).
ROUTINE = _routine.EngineRoutine(
    name="lu_solve",
    symmetric=False,
    hand_transpose=_factor.LU_FACTOR.hand_transpose,
)


def lu_solve(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    return_logdet=False,
    pad=True,
    donate=False,
    factor_dtype=None,
    return_info=False,
):
    """Solves A x = b for a general nonsingular A sharded over a mesh, by pivoted LU.

    `lu_solve(factor, b)` solves with the `LUFactor` of `jaxmg.lu_factor` instead (no
    refactorization; the other arguments are the factor's, except return_info).

    The matrix is factored where it lies (cuSOLVERMp on GPUs, ScaLAPACK on CPUs) with partial
    pivoting; nothing is gathered. Works inside and outside `jax.jit`, on every 1-D and 2-D mesh.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh
        (rows over one mesh axis, columns over another or replicated).
      b: (N,) or (N, K) array of the same dtype. It is resharded to rows over a's row axis.
      T_A: block-cyclic tile size. None picks one that avoids padding.
      mesh: the jax.sharding.Mesh of `a`; by default the mesh of a's sharding or the one set
        with jax.set_mesh.
      matrix_specs: PartitionSpec of `a`, e.g. P("pr", "pc"); by default a's own.
      in_specs: (spec of a, spec of b), as in JAXMg 1.x; only the spec of a is used.
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is
        singular (U[k-1, k-1] of the engine's ordering is exactly zero).
      return_logdet: also return log |det A| (a real scalar).
      pad: allow padding when T_A does not divide the shard (costs a copy of the shard).
      donate: let jaxmg overwrite `a` (saves one copy of the shard outside jit).
      factor_dtype: None, or jnp.float32 for a float64 A (jnp.complex64 for complex128; or
        their names): mixed precision, as for `jaxmg.potrs` (docs/mixed_precision.md). Not
        with return_logdet or donate (ValueError).
      return_info: (with factor_dtype, or a factor made with it) also return a
        `jaxmg.MixedInfo` (the path taken, the refinement steps, the backward error).

    Returns:
      x with b's shape and dtype; (x, status) with return_status; (x, logdet) with
      return_logdet; (x, logdet, status) with both; the info last with return_info. x is
      sharded as for `jaxmg.potrs`. When A is singular, x and logdet are NaN on every device.

    Differentiation: x and log |det A| are differentiable with respect to a and b, in forward
    and reverse mode, through jaxmg's own routines (one `lu_factor`, its solves with A and Aᵀ;
    with return_logdet, A⁻ᵀ for d log|det A| = Re Σ A⁻ᵀ ⊙ dA). The matrix is never gathered.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    if isinstance(a, _factor.LUFactor):
        defaults = (T_A, mesh, matrix_specs, in_specs, return_status, return_logdet, donate)
        if (
            defaults != (None, None, None, None, False, False, False)
            or pad is not True
            or factor_dtype is not None
        ):
            raise ValueError(
                "lu_solve(factor, b) takes no other arguments but return_info: the factor "
                "keeps its plan (its status and logabsdet are factor.status and "
                "factor.logabsdet)"
            )
        _placement.check_flags(return_info=return_info)
        if _factor.is_mixed(a):
            x, _, info = _factor.solve_mixed(a, b)
            return (x, info) if return_info else x
        if return_info:
            raise ValueError("return_info needs a factor made with factor_dtype")
        return _factor.lu_solve_factored(a, b)
    if factor_dtype is None:
        if return_info is not False:
            raise ValueError("return_info=True needs factor_dtype (the mixed precision solve)")
        return API.public(
            a=a,
            b=b,
            T_A=T_A,
            mesh=mesh,
            matrix_specs=matrix_specs,
            in_specs=in_specs,
            return_status=return_status,
            return_logdet=return_logdet,
            pad=pad,
            donate=donate,
            factor_dtype=factor_dtype,
            return_info=return_info,
        )
    # Mixed precision: lu_factor in low precision, then the refined solve (routines/mixed.py).
    return _factor.mixed_precision_solve(
        lambda: _factor.lu_factor(
            a, T_A, mesh, matrix_specs, in_specs=in_specs, pad=pad, factor_dtype=factor_dtype
        ),
        a,
        b,
        factor_dtype,
        return_status=return_status,
        return_logdet=return_logdet,
        pad=pad,
        donate=donate,
        return_info=return_info,
    )


def lu_solve_blocks(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_status=False,
    return_logdet=False,
    pad=True,
):
    """lu_solve on this device's blocks, inside the caller's `jax.shard_map` over `mesh`.

    The per-block form, as `jaxmg.potrs_blocks`: the engine factors the blocks as they lie
    (no transpose). Not differentiable.

    Args:
      a: this device's block of A, sharded as `matrix_specs` over `mesh`.
      b: this device's block of b (rows split like a's rows, columns whole).
      T_A, pad, return_status, return_logdet: as for `jaxmg.lu_solve`.
      mesh: the mesh of the enclosing shard_map (required).
      matrix_specs, in_specs: as for `jaxmg.potrs_blocks`.

    Returns:
      x's block (rows like b's), with log |det A| and the status as for `jaxmg.lu_solve`.

    Raises:
      ValueError: without mesh=, or on bad shapes, specs or tiles, before any work.
      TypeError: on bad dtypes or non-boolean flags.
    """
    return API.blocks(
        a=a,
        b=b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_status=return_status,
        return_logdet=return_logdet,
        pad=pad,
    )


API = _factory.Routine(
    _factory.Declaration(
        routine=ROUTINE,
        outputs=_factory.SOLVE_OUTPUTS,
        unpack=lambda r, kw, b: (r.x, r.logdet, r.status),
        variants=("return_logdet",),
        solve_rule=_rules.SolveRule(
            primal=None,
            factor=_factor.lu_factor,
            solve=_factor.lu_solve_factored,
            solve_t=_factor.lu_solve_transposed,
            logdet=lambda f: (f.logabsdet, f.status),
            placement=lambda f: f.plan.user,
            inverse_t=_inv.inverse_transposed,
        ),
    )
)
