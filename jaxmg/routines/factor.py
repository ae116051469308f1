"""Factor once, solve many: cho_factor / cho_solve and lu_factor / lu_solve(factor, b).

A factor is a pytree of sharded arrays (the factored matrix in a's sharding, never gathered, and
for LU the pivots) with its plan as static data: it can be returned from one jitted function
and passed to another. Solving with it repeats no factorization (csrc/routines/factor.h).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax

from jaxmg._core import placement as _mesh
from jaxmg._core import routine as _routine
from jaxmg.routines import lu_solve as _lu


@dataclass(frozen=True)
class FactorPlan:
    """How a factor lies: the engine's placement of the factored matrix (aᵀ's when the engine
    was handed aᵀ), the user's placement (of a, b and x), the tile and padding."""

    placement: _mesh.MatrixPlacement
    user: _mesh.MatrixPlacement
    tile: int
    pad: bool
    n: int  # the order of A (the factor's matrix is larger where the engine padded)


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class CholeskyFactor:
    """A distributed Cholesky factor (from `cho_factor`).

    matrix: the factor, in the engine's layout (do not read it as L; larger than A where the
    engine pads); logdet: log det A;
    status: 0, or k > 0 (not positive definite), -1 (not Hermitian): then matrix is NaN.
    """

    matrix: jax.Array
    logdet: jax.Array
    status: jax.Array
    plan: FactorPlan

    def tree_flatten(self):
        return (self.matrix, self.logdet, self.status), self.plan

    @classmethod
    def tree_unflatten(cls, plan, children):
        return cls(*children, plan)


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class LUFactor:
    """A distributed pivoted LU factor (from `lu_factor`).

    matrix: the factors, in the engine's layout; pivots: int32, one per engine row, replicated;
    sign, logabsdet: of det A (as `slogdet`); status: 0, or k > 0 (singular or not finite): then
    matrix is NaN.
    """

    matrix: jax.Array
    pivots: jax.Array
    sign: jax.Array
    logabsdet: jax.Array
    status: jax.Array
    plan: FactorPlan

    def tree_flatten(self):
        return (self.matrix, self.pivots, self.sign, self.logabsdet, self.status), self.plan

    @classmethod
    def tree_unflatten(cls, plan, children):
        return cls(*children, plan)


CHO_FACTOR = _routine.SolveRoutine(
    name="cho_factor",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
)
CHO_SOLVE = _routine.SolveRoutine(
    name="cho_solve",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
)
LU_FACTOR = _routine.SolveRoutine(
    name="lu_factor",
    symmetric=False,
    hand_transpose=_lu.ROUTINE.hand_transpose,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
    pivots_out=True,
)
LU_SOLVE = _routine.SolveRoutine(
    name="lu_solve_factored",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
    pivots_in=True,
)


LU_SOLVE_T = _routine.SolveRoutine(
    name="lu_solve_factored_t",
    symmetric=False,
    hand_transpose=_routine.never_transpose,
    reads_factor=True,
    pivots_in=True,
)


def cho_factor(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
    donate=False,
    check_symmetry=True,
) -> CholeskyFactor:
    """The Cholesky factorization of a symmetric (Hermitian) positive-definite A sharded over a
    mesh, kept for `cho_solve`.

    Args: as for `jaxmg.potrs` (without b). With donate=True the factor takes a's buffers.

    Returns:
      A `CholeskyFactor`: a pytree (pass it to and from jitted functions) holding the factor in
      a's sharding, log det A and the status. Nothing is gathered.
    """
    r = _routine.call(
        CHO_FACTOR,
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
    plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
    return CholeskyFactor(r.matrix, r.logdet, r.status, plan)


def cho_solve(factor: CholeskyFactor, b):
    """Solves A x = b with a kept Cholesky factor (no refactorization).

    b: (N,) or (N, K) array of a's dtype. Returns x with b's shape; NaN when the factorization
    failed (see factor.status).
    """
    if not isinstance(factor, CholeskyFactor):
        raise TypeError(
            f"cho_solve takes the CholeskyFactor of jaxmg.cho_factor, got {type(factor).__name__}"
        )
    p = factor.plan
    r = _routine.call(
        CHO_SOLVE, factor.matrix, b, kept=(p.placement, p.user, p.tile, p.pad, None, p.n)
    )
    return r.x


def lu_factor(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
    donate=False,
) -> LUFactor:
    """The pivoted LU factorization of a general A sharded over a mesh, kept for
    `jaxmg.lu_solve(factor, b)`.

    Args: as for `jaxmg.lu_solve` (without b). With donate=True the factor takes a's buffers.

    Returns:
      An `LUFactor`: a pytree holding the factors in a's sharding (aᵀ's where the engine is
      handed aᵀ), the pivots, sign and log |det A| (as `slogdet`) and the status.
    """
    r = _routine.call(
        LU_FACTOR,
        a,
        None,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=pad,
        donate=donate,
    )
    plan = FactorPlan(r.placement, r.user, r.tile, bool(pad), a.shape[0])
    return LUFactor(r.matrix, r.pivots, r.sign, r.logdet, r.status, plan)


def lu_solve_factored(factor: LUFactor, b):
    """Solves A x = b with a kept LU factor (no refactorization); `jaxmg.lu_solve(factor, b)`."""
    if not isinstance(factor, LUFactor):
        raise TypeError(f"expected the LUFactor of jaxmg.lu_factor, got {type(factor).__name__}")
    p = factor.plan
    r = _routine.call(
        LU_SOLVE,
        factor.matrix,
        b,
        kept=(p.placement, p.user, p.tile, p.pad, factor.pivots, p.n),
    )
    return r.x


def lu_solve_transposed(factor: LUFactor, b):
    """Solves Aᵀ x = b (not conjugated) with a kept LU factor (derivative rules use it)."""
    p = factor.plan
    kept = (p.placement, p.user, p.tile, p.pad, factor.pivots, p.n)
    return _routine.call(LU_SOLVE_T, factor.matrix, b, kept=kept).x
