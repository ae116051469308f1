"""matmul: the product of two distributed square matrices by the engine (p?gemm,
cublasMpGemm)."""

from __future__ import annotations

from jaxmg._core import factory as _factory
from jaxmg._core import product as _product
from jaxmg._core import rules as _rules


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
    return API.public(
        a=a,
        b=b,
        adjoint_a=adjoint_a,
        adjoint_b=adjoint_b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        pad=pad,
        donate=donate,
    )


def _check(kw):
    if kw["adjoint_a"] and kw["adjoint_b"]:
        raise ValueError("matmul takes one adjoint at most: (a @ b)ᴴ = bᴴ aᴴ")
    a, b = kw["a"], kw["b"]
    if tuple(b.shape) != tuple(a.shape):
        raise ValueError(f"b must have a's shape {tuple(a.shape)}, got {tuple(b.shape)}")
    return {}


def _tangent(variant, opts, placement, primals, out, tangents):
    """d(op(A) op(B)) = op(dA) op(B) + op(A) op(dB), the engine's products."""
    ops = (variant["adjoint_a"], variant["adjoint_b"])
    (a, b), (da, db) = primals, tangents
    product = _rules.engine_product
    return (product(placement, da, b, *ops) + product(placement, a, db, *ops),)


# C in a's sharding; the variants are the engine's products (jaxmg/_core/product.py).
API = _factory.Routine(
    _factory.Declaration(
        routine=lambda kw: _product.VARIANTS[(bool(kw["adjoint_a"]), bool(kw["adjoint_b"]))],
        outputs=(_factory.Output("c"),),
        unpack=lambda r, kw, b: (r.matrix,),
        variants=("adjoint_a", "adjoint_b"),
        tangent=_tangent,
        check=_check,
    )
)
