"""polar: the polar decomposition A = Up H of a distributed tall matrix."""

from __future__ import annotations

import jax.numpy as jnp

from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import rules as _rules
from jaxmg.routines import gesvd as _gesvd
from jaxmg.routines import syevd as _syevd
from jaxmg.routines.qdwh import POLAR, POLAR_UP

_place = _placement.constrain_divisible


def polar(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    compute_h=True,
    return_status=False,
    pad=True,
    donate=False,
):
    """The polar decomposition A = Up H of an M x N matrix (M >= N) sharded over a mesh.

    Up has orthonormal columns and H is Hermitian positive semi-definite. QDWH (dynamically
    weighted Halley iterations on distributed QR, Cholesky, triangular solves and products,
    csrc/routines/polar.h) on both engines, started from a lower bound of the smallest singular
    value where one can be had cheaply: one QR step instead of two unless A is ill-conditioned.
    Nothing is gathered; works inside and outside `jax.jit`, on every 1-D and 2-D mesh.

    Args:
      a: (M, N) float32, float64, complex64 or complex128 array, M >= N, sharded over a 1-D or
        2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.qr`.
      compute_h: also return H.
      return_status: also return an int32 status: 0 on success, k > 0 when A holds NaN or Inf.

    Returns:
      (Up, H), or Up without compute_h; the status appended with return_status. Up is M x N in
      a's sharding; H is N x N, in a's matrix spec where N divides over the mesh (rows over a's
      row axis otherwise, or whole on every device); both replicated when a is. A
      rank-deficient A gives a positive semi-definite H. On failure Up and H are NaN on every
      device.

    Differentiation (forward and reverse mode, full-rank A): from the SVD A = W S Vᴴ, with
    K = Wᴴ dA V and Ω_ij = (K_ij − conj(K_ji)) / (s_i + s_j), dUp = W Ω Vᴴ + (I − W Wᴴ) dA V S⁻¹ Vᴴ
    and dH = V (K − Ω S) Vᴴ. A square A's SVD comes from its outputs (H = V S Vᴴ by syevd,
    W = Up V; the engine's products); a tall one's from one more distributed SVD (XLA's
    products).

    Raises:
      TypeError: a flag that is not a Python bool (the message names it).
      ValueError, TypeError: on bad shapes (M < N), dtypes, specs, meshes or tiles, before any
        work.
    """
    return API.public(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        compute_h=compute_h,
        return_status=return_status,
        pad=pad,
        donate=donate,
    )


def _tangent(variant, opts, placement, primals, out, tangents):
    """From the SVD A = W S Vᴴ (Up = W Vᴴ, H = V S Vᴴ): with K = Wᴴ dA V,
    Ω_ij = (K_ij − conj(K_ji)) / (s_i + s_j) (skew-Hermitian), dUp = W Ω Vᴴ
    + (I − W Wᴴ) dA V S⁻¹ Vᴴ and dH = V (K − Ω S) Vᴴ. For a square A the SVD comes from the
    outputs: H = V S Vᴴ (syevd of H, which is N x N and needs no second polar decomposition or
    SVD) and W = Up V; a tall A takes gesvd."""
    (a,), (da,) = primals, tangents
    compute_h = variant["compute_h"]
    pl = placement
    n, dtype = a.shape[1], a.dtype

    def mm(x, y, ax=False, ay=False):  # the engine's product for a square a (factor_product)
        return _rules.factor_product(pl, x, y, ax, ay)

    if a.shape[0] == n:
        up = out[0]
        h = out[1] if compute_h else mm(up, a, ax=True)  # (syevd reads its lower triangle)
        s, v = _syevd.syevd(h, **opts.kwargs())
        s = jnp.maximum(s, 0)
        w = mm(up, v)

        def times_v(x):  # x V
            return mm(x, v)

        def times_vh(x):  # x Vᴴ
            return mm(x, v, ay=True)

        def around(x):  # V x Vᴴ
            return mm(v, times_vh(x))

    else:
        w, s, vh = _gesvd.gesvd(a, **opts.kwargs())

        def times_v(x):
            return mm(x, vh, ay=True)

        def times_vh(x):
            return mm(x, vh)

        def around(x):
            return mm(vh, mm(x, vh), ax=True)

    dav = times_v(da)  # dA V
    k = mm(w, dav, ax=True)
    row = _rules.place(pl, jnp.broadcast_to(s[None, :], (n, n)))  # s_j
    col = _rules.place(pl, jnp.broadcast_to(s[:, None], (n, n)))  # s_i
    total = row + col
    safe = jnp.where(total == 0, 1, total)
    omega = jnp.where(total == 0, 0, (k - _rules.adjoint(pl, k)) / safe.astype(dtype))
    dup = mm(w, times_vh(omega))
    if a.shape[0] > n:
        s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s))
        proj = dav - mm(w, mm(w, dav, ax=True))
        scaled = proj * _rules.place(pl, jnp.broadcast_to(s_inv[None, :], a.shape)).astype(dtype)
        dup = dup + times_vh(scaled)
    grads = (dup.astype(dtype),)
    if compute_h:
        dh_inner = k - omega * row.astype(dtype)
        grads += (around(dh_inner).astype(dtype),)  # V (K − Ω S) Vᴴ
    return grads + (_rules.float0(),)


def _unpack(r, kw, b):
    n = kw["a"].shape[1]
    h = (_place(r.x, r.user, (n, n)),) if kw["compute_h"] else ()
    return (r.matrix, *h, r.status)


# Up and H, replicated when a is; the status.
API = _factory.Routine(
    _factory.Declaration(
        routine=lambda kw: POLAR if kw["compute_h"] else POLAR_UP,
        outputs=(
            _factory.Output("Up", place="replicated"),
            _factory.Output("H", "compute_h", place="replicated", optional=True),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=_unpack,
        variants=("compute_h",),
        tangent=_tangent,
        check_operands=False,
        context_work=False,  # Up takes a's place
        context_replicated=True,  # on Explicit axes (JAXMg's example: Upᴴ Up, diag(H))
    )
)
