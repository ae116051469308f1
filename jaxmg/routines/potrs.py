"""potrs: Cholesky solve of a distributed symmetric (Hermitian) positive-definite system."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import factor as _factor
from jaxmg.routines import potri as _potri

# The engine's process grid is the mesh transposed (docs/layout.md). cuSOLVERMp is faster on
# grids at least as tall as wide (bench/results/potrs_h200x2_mesh2x1_transposed_015400a.json), so
# on meshes taller than wide it is handed aᴴ (= a), sharded the other way: a transpose local to
# each device.
# Not with donate=True, where the in-place path saves a shard of memory.
# TRANSPOSE_PLATFORMS hands aᴴ on every mesh shape (the tests use it to drive that path).
TRANSPOSE_TALL_MESHES = {"cuda"}
TRANSPOSE_PLATFORMS: set[str] = set()

ROUTINE = _routine.EngineRoutine(
    name="potrs",
    symmetric=True,
    hand_transpose=_routine.transpose_when(
        always=TRANSPOSE_PLATFORMS, by_shape=TRANSPOSE_TALL_MESHES, tall=True
    ),
)


def potrs(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_logdet=False,
    return_status=False,
    pad=True,
    donate=False,
    check_symmetry=True,
    factor_dtype=None,
    return_info=False,
):
    """Solves A x = b for a symmetric (Hermitian) positive-definite A sharded over a mesh.

    The matrix is factored with a distributed Cholesky decomposition (cuSOLVERMp on GPUs,
    ScaLAPACK on CPUs) where it lies: each device hands its shard to the engine, nothing is
    gathered. `a` must be symmetric (Hermitian): the engine reads one triangle of the tile-relabeled
    matrix, which holds entries of both triangles of `a`; by default a cheap check (two
    matrix-vector products) reports a matrix that is not as status -1 with NaN outputs.
    Works inside and outside `jax.jit`.

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, sharded over a 1-D or 2-D mesh
        (rows over one mesh axis, columns over another or replicated).
      b: (N,) or (N, K) array of the same dtype. It is resharded to rows over a's row axis.
      T_A: block-cyclic tile size. None picks one that avoids padding (about 128 on CPUs,
        1024 on GPUs).
      mesh: the jax.sharding.Mesh of `a`; by default the mesh of a's sharding or the one set
        with jax.set_mesh.
      matrix_specs: PartitionSpec of `a`, e.g. P("pr", "pc"); by default a's own.
      in_specs: (spec of a, spec of b), as in JAXMg 1.x; only the spec of a is used.
      return_logdet: also return log det A (a real scalar).
      return_status: also return an int32 status: 0 on success, k > 0 when the matrix is not
        positive definite (a leading minor of order k of the engine's ordering is not, or a
        factor's diagonal entry is not finite), -1 when it is not symmetric (Hermitian).
      pad: allow padding when T_A does not divide the shard (costs a copy of the shard).
      donate: let jaxmg overwrite `a` (saves one copy of the shard outside jit).
      check_symmetry: compare uᴴ A v with conj(vᴴ A u) for fixed random u, v first (reads the
        matrix twice more; False skips it, for a matrix known to be symmetric).
      factor_dtype: None, or jnp.float32 for a float64 A (jnp.complex64 for complex128; or
        their names): mixed precision (docs/mixed_precision.md). A.astype(factor_dtype) is
        factored, and the solution refined in A's dtype (classical refinement, then GMRES-IR
        where it stalls) to a backward error of max(N / 64, 4) ε; where that fails, the float64
        factorization runs instead. Not with return_logdet or donate (ValueError).
      return_info: (with factor_dtype) also return a `jaxmg.MixedInfo`: the path taken
        ("mixed", "gmres", "fallback"), the refinement steps and the backward error.

    Returns:
      x with b's shape and dtype; (x, logdet) with return_logdet; (x, status) with
      return_status; (x, logdet, status) with both; the info last with return_info. x is in
      b's own sharding where it is known (a placed array, or a traced one on Explicit mesh
      axes; replicated when b is), else rows over a's row axis. When the factorization
      fails, x and logdet are NaN on every device.

    Differentiation: x and logdet are differentiable with respect to a and b, in forward and
    reverse mode (jax.jvp, jax.grad), for symmetric (Hermitian) tangents of a. The rules use
    jaxmg's own distributed routines and never gather the matrix: dx = A⁻¹ (db − dA x) through
    `cho_factor` / `cho_solve` (one factorization, `lax.custom_linear_solve`), and
    d logdet = tr(A⁻¹ dA) through `potri`, which costs one more factorization and inverse
    (only with return_logdet=True); second and higher derivatives too.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
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
            return_logdet=return_logdet,
            return_status=return_status,
            pad=pad,
            donate=donate,
            check_symmetry=check_symmetry,
            factor_dtype=factor_dtype,
            return_info=return_info,
        )
    # Mixed precision: cho_factor in low precision, then the refined solve (routines/mixed.py).
    return _factor.mixed_precision_solve(
        lambda: _factor.cho_factor(
            a,
            T_A,
            mesh,
            matrix_specs,
            in_specs=in_specs,
            pad=pad,
            check_symmetry=check_symmetry,
            factor_dtype=factor_dtype,
        ),
        a,
        b,
        factor_dtype,
        return_logdet=return_logdet,
        return_status=return_status,
        pad=pad,
        donate=donate,
        check_symmetry=check_symmetry,
        return_info=return_info,
    )


def potrs_blocks(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_logdet=False,
    return_status=False,
    pad=True,
    check_symmetry=True,
):
    """potrs on this device's blocks, inside the caller's `jax.shard_map` over `mesh`.

    The per-block form: the caller owns the shard_map and hands this device's blocks. (The
    JAXMg-style `jaxmg.potrs_shardmap_ctx` takes the global arrays instead.) One FFI call on
    the blocks, no collective of XLA's. Not differentiable (call `potrs` outside shard_map
    for derivatives).

    Args:
      a: this device's block of A, sharded as `matrix_specs` over `mesh`.
      b: this device's block of b, (N / mesh rows,) or (N / mesh rows, K): rows split like
        a's rows, columns whole.
      T_A, pad, check_symmetry, return_logdet, return_status: as for `jaxmg.potrs`.
      mesh: the mesh of the enclosing shard_map (required).
      matrix_specs: PartitionSpec of A over `mesh`; default the mesh's first two axes.
      in_specs: (spec of a, spec of b), an alias of matrix_specs (only a's is used).

    Returns:
      x's block (rows like b's), with the log-determinant and status as for `jaxmg.potrs`
      (the same on every device).

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
        return_logdet=return_logdet,
        return_status=return_status,
        pad=pad,
        check_symmetry=check_symmetry,
    )


API = _factory.Routine(
    _factory.Declaration(
        routine=ROUTINE,
        outputs=_factory.SOLVE_OUTPUTS,
        unpack=lambda r, kw, b: (r.x, r.logdet, r.status),
        keywords=("check_symmetry",),
        variants=("return_logdet",),
        solve_rule=_rules.SolveRule(
            primal=None,
            factor=_factor.cho_factor,
            solve=_factor.cho_solve,
            # A⁻ᵀ = conj(A⁻¹) for Hermitian A.
            solve_t=lambda f, r: jnp.conj(_factor.cho_solve(f, jnp.conj(r))),
            logdet=lambda f: (f.logdet, f.status),
            placement=lambda f: f.plan.user,
            inverse_t=lambda a, **kw: jnp.conj(_potri.potri(a, **kw)),
        ),
    )
)
