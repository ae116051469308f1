"""matmul: the product of two distributed square matrices by the engine (p?gemm,
cublasMpGemm)."""

from __future__ import annotations

import functools

from jaxmg._core import product as _product
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

_VARIANTS = _product.VARIANTS  # the engine's products (jaxmg/_core/product.py)


def matmul(
    a,
    b,
    adjoint_a=False,
    adjoint_b=False,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
    donate=False,
):
    """C = op(A) op(B) for two N x N matrices sharded alike, by the engine's distributed
    product (ScaLAPACK's p?gemm, cuBLASMp's Gemm): op(X) = Xᴴ with adjoint_x (Xᵀ for real
    types), X otherwise; not both adjoints. The matrices are copied into the engine's tiles;
    nothing is gathered and no XLA collective runs. The derivative rules of jaxmg's inverses
    and eigensolvers use it (jaxmg/_core/product.py).

    Args:
      a, b: (N, N) arrays of one dtype (float32, float64, complex64, complex128), sharded alike
        over a 1-D or 2-D mesh.
      adjoint_a, adjoint_b: multiply by the conjugate transpose of a (b).
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.potrs` (donate: C may take
        a's buffer).

    Returns:
      C (N, N) in a's sharding. Differentiable (forward and reverse mode, any order; the rule's
      products are the engine's).

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs or meshes, before any work.
    """
    if adjoint_a and adjoint_b:
        raise ValueError("matmul takes one adjoint at most: (a @ b)ᴴ = bᴴ aᴴ")
    if tuple(b.shape) != tuple(a.shape):
        raise ValueError(f"b must have a's shape {tuple(a.shape)}, got {tuple(b.shape)}")
    opts = _rules.options(
        T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=bool(pad)
    )
    return _DIFFERENTIABLE[(bool(adjoint_a), bool(adjoint_b))](opts, bool(donate), a, b)[0]


def _primal(ops, opts, donate, a, b):
    return (_routine.call(_VARIANTS[ops], a, b, donate=donate, **opts.kwargs()).matrix,)


def _tangent(ops, opts, pl, primals, out, tangents):
    """d(op(A) op(B)) = op(dA) op(B) + op(A) op(dB), the engine's products."""
    (a, b), (da, db) = primals, tangents
    dc = _rules.engine_product(pl, da, b, *ops) + _rules.engine_product(pl, a, db, *ops)
    return (dc,)


_DIFFERENTIABLE = {
    ops: _rules.differentiable(functools.partial(_primal, ops), functools.partial(_tangent, ops))
    for ops in _VARIANTS
}
