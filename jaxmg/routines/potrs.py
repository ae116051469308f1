"""potrs: Cholesky solve of a distributed symmetric (Hermitian) positive-definite system."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from jaxmg._core import routine as _routine

# The engine's process grid is the mesh transposed (docs/layout.md). cuSOLVERMp is faster on
# grids at least as tall as wide (1.02 s vs 1.15 s at N = 65536 on 2 H200s), so on meshes taller
# than wide it is handed aᴴ (= a), sharded the other way: a transpose local to each device.
# Not with donate=True, where the in-place path saves a shard of memory.
# TRANSPOSE_PLATFORMS hands aᴴ on every mesh shape (the tests use it to drive that path).
TRANSPOSE_TALL_MESHES = {"cuda"}
TRANSPOSE_PLATFORMS: set[str] = set()


ROUTINE = _routine.SolveRoutine(
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

    Returns:
      x with b's shape and dtype; (x, logdet) with return_logdet; (x, status) with
      return_status; (x, logdet, status) with both. When the factorization fails, x and logdet
      are NaN on every device.

    Differentiation: x and logdet are differentiable with respect to a and b, in forward and
    reverse mode (jax.jvp, jax.grad), for symmetric (Hermitian) tangents of a. The rules use
    jaxmg's own distributed routines and never gather the matrix: dx = A⁻¹ (db − dA x) through
    `cho_factor` / `cho_solve` (one factorization, `lax.custom_linear_solve`), and
    d logdet = tr(A⁻¹ dA) through `potri`, which costs one more factorization and inverse
    (only with return_logdet=True). Second derivatives are not supported yet.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    opts = _Options(T_A, mesh, matrix_specs, in_specs, bool(pad), bool(check_symmetry))
    x, logdet, status = _differentiable(bool(return_logdet))(opts, bool(donate), a, b)
    return _routine.assemble(
        x, logdet, status, return_logdet=return_logdet, return_status=return_status
    )


@dataclass(frozen=True)
class _Options:
    """potrs's arguments other than the arrays (static under differentiation)."""

    T_A: object
    mesh: object
    matrix_specs: object
    in_specs: object
    pad: bool
    check_symmetry: bool

    def kwargs(self):
        return dict(
            T_A=self.T_A,
            mesh=self.mesh,
            matrix_specs=self.matrix_specs,
            in_specs=self.in_specs,
            pad=self.pad,
            check_symmetry=self.check_symmetry,
        )


def _primal(opts, donate, a, b):
    return _routine.solve(ROUTINE, a, b, donate=donate, **opts.kwargs())


@functools.cache
def _differentiable(with_logdet: bool):
    """potrs with differentiation rules: (opts, donate, a, b) -> (x, logdet, status). Without
    logdet, its tangent is not computed (it would cost an inverse) and reads as zero: the
    routine does not return it then."""
    fn = jax.custom_jvp(_primal, nondiff_argnums=(0, 1))

    @fn.defjvp
    def _jvp(opts, donate, primals, tangents):
        # Jitted, so that the rule's inner functions close over tracers, not over arrays that
        # span other processes' devices.
        return _jvp_rule(opts, with_logdet)(*primals, *tangents)

    return fn


@functools.cache
def _jvp_rule(opts, with_logdet: bool):
    from jaxmg.routines import factor as _factor
    from jaxmg.routines import potri as _potri

    @jax.jit
    def rule(a, b, da, db):
        kw = opts.kwargs()
        f = _factor.cho_factor(a, **kw)
        x = _factor.cho_solve(f, b)
        matvec = functools.partial(_matvec, f.plan.user)
        dx = jax.lax.custom_linear_solve(
            lambda v: matvec(a, v),
            db - matvec(da, x),
            solve=lambda _, r: _factor.cho_solve(f, r),
            # A⁻ᵀ = conj(A⁻¹) for Hermitian A.
            transpose_solve=lambda _, r: jnp.conj(_factor.cho_solve(f, jnp.conj(r))),
        )
        if with_logdet:
            inverse = _potri.potri(a, **kw)
            # tr(A⁻¹ dA) = Σ (A⁻ᵀ ⊙ dA), A⁻ᵀ = conj(A⁻¹); real for Hermitian dA.
            dlogdet = jnp.real(jnp.sum(jnp.conj(inverse) * da)).astype(f.logdet.dtype)
        else:
            dlogdet = jnp.zeros_like(f.logdet)
        status_tangent = np.zeros((), dtype=jax.dtypes.float0)
        return (x, f.logdet, f.status), (dx, dlogdet, status_tangent)

    return rule


def _matvec(placement, m, v):
    """m @ v for m sharded like a and v (rows) like b: v's rows are moved to m's column axis
    first (a collective of vector size; explicit mesh axes need it said), the result's rows
    lie like b's."""
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxmg._core import placement as _mesh

    mesh = placement.mesh
    v = _mesh.constrain(v, mesh, P(placement.col_axis))
    out = P(placement.row_axis, *([None] * (v.ndim - 1)))
    if AxisType.Explicit in tuple(mesh.axis_types):
        return jnp.matmul(m, v, out_sharding=NamedSharding(mesh, out))
    return _mesh.constrain(jnp.matmul(m, v), mesh, out)
