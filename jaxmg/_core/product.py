"""The engine's distributed product of two N x N matrices as a bilinear JAX primitive, for the
derivative rules of the routines that return matrices.

`product(a, b, adjoint_a, adjoint_b, opts)` = op(a) op(b) by ScaLAPACK's p?gemm or cuBLASMp's
Gemm (`jaxmg.matmul`'s routine): both matrices and the product are sharded like a, and the
product moves no data through XLA. Declared bilinear (`ad.defbilinear`), so JAX differentiates
and transposes it to any order through the same primitive: d(op(a) op(b)) = op(da) op(b) +
op(a) op(db), and the transposes (JAX's convention: Σ ct ⊙ f(x) = Σ fᵀ(ct) ⊙ x, no
conjugation; conj is its own transpose):

  f(x) = x op(b):      fᵀ(ct) = ct op(b)ᵀ = conj(conj(ct) op(b)ᴴ)
  f(x) = xᴴ b:         fᵀ(ct) = conj(b ctᵀ) = conj(b conj(ct)ᴴ)
  f(y) = op(a) y:      fᵀ(ct) = op(a)ᵀ ct = conj(op(a)ᴴ conj(ct))
  f(y) = a yᴴ:         fᵀ(ct) = conj(ctᵀ a) = conj(conj(ct)ᴴ a)

each again one product of the engine (never both operands adjoint). A batch (jax.vmap) is a
loop of products.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxmg._core import routine as _routine


def _variant(name):
    # Both matrices redistributed into the engine's tiles (b as the second matrix); the
    # product comes back into a's buffer and sharding (csrc/routines/matmul.h).
    return _routine.EngineRoutine(
        name=name,
        symmetric=False,
        hand_transpose=_routine.never_transpose,
        returns_matrix=True,
        redistribute=True,
        second_matrix=True,
        solution_cols=lambda n, nrhs: 1,  # (unused)
        solution_whole=True,
    )


# The engine's products by (adjoint_a, adjoint_b): `jaxmg.matmul`'s routines.
VARIANTS = {
    (False, False): _variant("matmul_nn"),
    (True, False): _variant("matmul_cn"),
    (False, True): _variant("matmul_nc"),
}


def engine_product(a, b, adjoint_a, adjoint_b, opts):
    """op(a) op(b) by the engine, not differentiable (the primitive below is)."""
    return _routine.call(VARIANTS[(adjoint_a, adjoint_b)], a, b, **opts.kwargs()).matrix


product_p = Primitive("jaxmg_product")


def product(a, b, adjoint_a=False, adjoint_b=False, *, opts):
    """op(a) op(b), op(x) = xᴴ (xᵀ for real x) when adjoint_x; not both. `opts`: the engine
    call's options (rules.options: mesh and matrix_specs of a's placement, T_A, pad)."""
    if adjoint_a and adjoint_b:
        raise ValueError("product takes one adjoint at most")
    return product_p.bind(a, b, adjoint_a=bool(adjoint_a), adjoint_b=bool(adjoint_b), opts=opts)


def _engine(a, b, *, adjoint_a, adjoint_b, opts):
    return engine_product(a, b, adjoint_a, adjoint_b, opts)


def _abstract(a, b, **_):
    return a  # op(a) op(b): a's shape, dtype and sharding


def _conj(x):
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _lhs(ct, a, b, *, adjoint_a, adjoint_b, opts):
    """The cotangent of a (an undefined primal) for b given."""
    if adjoint_a:  # f(x) = xᴴ b
        return _conj(product(b, _conj(ct), adjoint_b=True, opts=opts))
    # f(x) = x op(b): conj(conj(ct) op(b)ᴴ)
    return _conj(product(_conj(ct), b, adjoint_b=not adjoint_b, opts=opts))


def _rhs(ct, a, b, *, adjoint_a, adjoint_b, opts):
    """The cotangent of b (an undefined primal) for a given."""
    if adjoint_b:  # f(y) = a yᴴ
        return _conj(product(_conj(ct), a, adjoint_a=True, opts=opts))
    # f(y) = op(a) y: conj(op(a)ᴴ conj(ct))
    return _conj(product(a, _conj(ct), adjoint_a=not adjoint_a, opts=opts))


def _batch(args, dims, **params):
    """One product per batch element (dims: each argument's batch axis, or None)."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)

    def front(x, d):
        return jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0)

    a, b = (front(x, d) for x, d in zip(args, dims, strict=True))
    out = jnp.stack([product_p.bind(a[k], b[k], **params) for k in range(size)])
    return out, 0


product_p.def_impl(_engine)
product_p.def_abstract_eval(_abstract)
mlir.register_lowering(product_p, mlir.lower_fun(_engine, multiple_results=False))
ad.defbilinear(product_p, _lhs, _rhs)
batching.primitive_batchers[product_p] = _batch
