"""gesvd: the singular value decomposition of a distributed matrix."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import syevd as _syevd
from jaxmg.routines.qdwh import POLAR


def _variant(name, u, vh):
    # The engine is handed aᵀ, so it holds A (M x N, M >= N), redistributed into tiles of its
    # exact extents; U comes back in a's sharding, Vᴴ's N rows in x (solution_cols: N columns;
    # 1: no Vᴴ, one unused element) and the singular values in s (csrc/ffi/families.h, svd).
    return _routine.EngineRoutine(
        name=name,
        symmetric=False,
        hand_transpose=_routine.never_transpose,  # (rectangular routines are always handed aᵀ)
        returns_matrix=u,
        takes_rhs=False,
        rectangular=True,
        redistribute=True,
        solution_cols=(lambda n, nrhs: n) if vh else (lambda n, nrhs: 1),
        solution_whole=not vh,  # s alone: whole on every device
    )


_VARIANTS = {
    (True, True): _variant("gesvd", True, True),
    (True, False): _variant("gesvd_u", True, False),
    (False, True): _variant("gesvd_vh", False, True),
    (False, False): _variant("gesvd_values", False, False),
}


def gesvd(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    compute_u=True,
    compute_vh=True,
    full_matrices=False,
    return_status=False,
    pad=True,
    donate=False,
    subset_by_index=None,
):
    """The singular value decomposition A = U diag(s) Vh of an M x N matrix sharded over a mesh.

    Through the polar decomposition (QDWH-SVD): A = Up H by jaxmg's QDWH (as `jaxmg.polar`),
    H = V S Vᴴ by the distributed eigensolver, U = Up V (re-orthonormalized by a distributed QR
    when A is rank-deficient); the singular values alone from H's eigenvalues, without
    vectors. Nothing is gathered. Tall and wide matrices both work (a wide one is decomposed
    through its conjugate transpose). Works inside and outside `jax.jit`, on every 1-D and 2-D
    mesh.

    Args:
      a: (M, N) float32, float64, complex64 or complex128 array sharded over a 1-D or 2-D mesh.
      T_A: block-cyclic tile size. None picks one.
      mesh, matrix_specs, in_specs, pad, donate: as for `jaxmg.qr`.
      compute_u, compute_vh: also compute (and return) U and Vh; without them the engine skips
        the vectors.
      full_matrices: U (M x M) and Vh (N x N) in full. For a tall (wide) matrix the rest of U
        (Vh) is an orthonormal completion from jaxmg's distributed QR of [U, G] for a fixed
        Gaussian G (one more QR of an M x M matrix; M must divide over the devices over a's
        columns); for a square one it is the reduced decomposition.
      return_status: also return an int32 status: 0 on success, k > 0 when the engine did not
        converge or A holds NaN or Inf.
      subset_by_index: None (every singular triplet), or (lo, hi), Python ints with
        0 <= lo < hi <= K = min(M, N): the triplets lo <= i < hi counted from the smallest
        singular value, as `jax.lax.linalg.svd`'s subset_by_index (which indexes H's ascending
        eigenvalues): (K - k, K) keeps the k largest. They come back descending, as every
        singular value. Through the polar decomposition the eigensolver computes those k
        pairs of H alone where it can (`jaxmg.syevd`'s subset_by_index) and U = Up V takes k
        columns; the singular values alone are all computed, then kept. Needs
        full_matrices=False.

    Returns:
      (U, s, Vh), (U, s), (s, Vh) or s, as selected, with the status appended when
      return_status. K = min(M, N): U is M x K with orthonormal columns, s (K,) real,
      descending and the same on every device, Vh K x N with orthonormal rows. U and Vh are in
      a's matrix spec where their extents divide over the mesh (rows over a's row axis
      otherwise, or whole on every device), replicated when a is. With full_matrices U is
      M x M and Vh N x N. With subset_by_index=(lo, hi), k = hi - lo: U is M x k, s (k,)
      and Vh k x N, in a's matrix spec where k divides. On failure every output is NaN on
      every device.

    Differentiation (forward and reverse mode), as `jax.numpy.linalg.svd`'s: ds = Re diag(Uᴴ dA V),
    and U's and Vh's derivatives for distinct nonzero singular values (a loss must not depend on
    each singular pair's phase), with XLA's products of the distributed matrices; the paths
    without vectors compute them for the derivative. With subset_by_index the derivative is
    the whole decomposition's, restricted to the kept triplets (exact: the kept singular
    values' derivative needs only their own vectors, the vectors' need every pair).

    Raises:
      TypeError: a flag that is not a Python bool (the message names it); a subset_by_index
        that is not a pair of ints.
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, a subset out of
        range or with full_matrices=True, before any work.
    """
    return API.public(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        compute_u=compute_u,
        compute_vh=compute_vh,
        full_matrices=full_matrices,
        return_status=return_status,
        pad=pad,
        donate=donate,
        subset_by_index=subset_by_index,
    )


def _svd_keywords(args) -> dict:
    kw = {"subset_by_index": args["subset_by_index"]}
    if not args["compute_uv"]:
        return {**kw, "compute_u": False, "compute_vh": False}
    return {**kw, "full_matrices": bool(args["full_matrices"])}


def _check(args) -> dict:
    """{"svd_subset": (lo, hi)} of a call that keeps some triplets (an option of the
    derivative rule: the polar path computes those alone), else {}."""
    a = args["a"]
    if len(a.shape) != 2:
        raise ValueError(f"a must be a 2-D matrix, got shape {tuple(a.shape)}")
    _placement.check_dtype(a)
    subset = check_subset(args.get("subset_by_index"), min(a.shape))
    if subset is None:
        return {}
    if args["full_matrices"]:
        raise ValueError(
            f"subset_by_index={subset} needs full_matrices=False (the kept triplets' U and Vh "
            "have k = hi - lo columns and rows)"
        )
    return {"svd_subset": subset}


def check_subset(subset_by_index, k: int):
    """(lo, hi) from subset_by_index for K = k singular values, or None for every triplet."""
    return _syevd.check_subset(subset_by_index, k, what="singular values")


def _kept(subset, k: int) -> tuple[int, int]:
    """The positions (start, stop) in the descending singular values of the triplets
    lo <= i < hi counted from the smallest, of K = k."""
    lo, hi = subset
    return k - hi, k - lo


def _around(args):
    """A wide a (M < N) runs as its adjoint: Aᴴ = U' s Vh' gives U = Vh'ᴴ and Vh = U'ᴴ (and
    the work array's adjoint); full_matrices completes U of a tall a (Vh of a wide one); a
    subset_by_index keeps its triplets of outputs computed whole (`_keep`)."""
    args = dict(args)
    subset = check_subset(args.pop("subset_by_index", None), min(args["a"].shape))
    spec = _routine._matrix_spec(args["matrix_specs"], args["in_specs"])
    placement = _placement.resolve_placement(args["a"], args["mesh"], spec)  # (a's, as given)
    args, finish = _oriented(args)
    if subset is None:
        return args, finish
    return args, lambda out: _keep(finish(out), subset, placement)


def _keep(out, subset, placement):
    """The kept triplets of outputs (U, s, Vh) computed whole (the singular values alone, the
    context form's engine SVD); the polar path's are the kept ones already (k values)."""
    k = out["s"].shape[0]
    if k == subset[1] - subset[0]:
        return out
    start, stop = _kept(subset, k)
    kept = {**out, "s": out["s"][start:stop]}
    if "U" in out:
        kept["U"] = _syevd.kept_columns(out["U"], start, stop, placement)
    if "Vh" in out:
        vh = _placement.constrain(out["Vh"], placement.mesh, P(None, placement.col_axis))
        kept["Vh"] = _place(vh[start:stop], placement, (stop - start, vh.shape[1]))
    return kept


def _oriented(args):
    """(args, finish) of a tall a as given, or of a wide one through its adjoint."""
    a = args["a"]
    m, n = a.shape
    spec = _routine._matrix_spec(args["matrix_specs"], args["in_specs"])
    placement = _placement.resolve_placement(a, args["mesh"], spec)
    full = args["full_matrices"]
    if m >= n:

        def finish_tall(out):
            if full and "U" in out and m > n:
                out["U"] = _complete(out["U"], placement)
            return out

        return args, finish_tall
    spec = placement.matrix_spec
    flipped = {
        **args,
        "a": _conj_transpose(a),
        "mesh": placement.mesh,
        "matrix_specs": P(spec[1], spec[0]),
        "in_specs": None,
        "compute_u": args["compute_vh"],
        "compute_vh": args["compute_u"],
    }

    def finish_wide(out):
        u_t, vh_t = out.pop("U", None), out.pop("Vh", None)
        if full and u_t is not None:
            u_t = _complete(u_t, _placement.transposed(placement))
        if vh_t is not None:
            out["U"] = _adjoint(vh_t, placement, (m, m))
        if u_t is not None:
            out["Vh"] = _adjoint(u_t, placement, (u_t.shape[1], n))
        if "work" in out:
            out["work"] = _adjoint(out["work"], placement, (m, n))
        return out

    return flipped, finish_wide


def _complete(u, placement):
    """[U, U⊥]: the M x K orthonormal U (M > K) completed to an M x M unitary matrix. The
    complement is Q[:, K:] of jaxmg's distributed QR of [U, G] for a fixed Gaussian G (the
    Householder QR's first K columns span U's range, its others are orthonormal to them); the
    matrix is never gathered."""
    m, k = u.shape
    if m % placement.mesh_cols:
        raise ValueError(
            f"full_matrices=True on a {m}-row matrix needs {m} divisible by the "
            f"{placement.mesh_cols} devices over its columns; pad the matrix or pass "
            "full_matrices=False"
        )
    return _completion(placement, m, k, np.dtype(u.dtype))(u)


@functools.cache
def _completion(placement, m, k, dtype):
    from jaxmg.routines import qr as _qr  # (it builds on this module's neighbours)

    spec = placement.matrix_spec
    # Columns joined: the operands split by rows alone, alike (or whole where m does not divide).
    rows = P(spec[0], None) if m % placement.mesh_rows == 0 else P()

    def join(x, y):  # (on Explicit axes, concatenate wants operands sharded alike)
        rows_of = functools.partial(_placement.constrain, mesh=placement.mesh, spec=rows)
        return jnp.concatenate([rows_of(x), rows_of(y)], axis=1)

    def complete(u):
        real = np.finfo(dtype).dtype
        key = jax.random.key(20240611)
        g = jax.random.normal(key, (m, m - k), real)
        if np.issubdtype(dtype, np.complexfloating):
            g = g + 1j * jax.random.normal(jax.random.fold_in(key, 1), (m, m - k), real)
        c = _placement.constrain(join(u, g.astype(dtype)), placement.mesh, spec)
        q, _ = _qr.qr(c, mesh=placement.mesh, matrix_specs=spec)
        return _place(join(u, q[:, k:]), placement, (m, m))

    return jax.jit(complete)


_conj_transpose = jax.jit(_adjoint_mod.transpose)


def _adjoint(x, placement, shape):
    return _adjointer(placement, shape)(x)


@functools.cache
def _adjointer(placement, shape):
    """xᴴ placed as an M x N matrix, jitted once per placement (as `_polar_finish`)."""
    return jax.jit(lambda x: _place(_conj_transpose(x), placement, shape))


_place = _placement.constrain_divisible


# Platforms where gesvd with vectors goes through the polar decomposition (measured faster than
# the engine's SVD: docs/gpu.md, bench/results/gesvd_*): A = Up H (jaxmg's QDWH), H = V S Vᴴ
# (jaxmg's syevd of -H, whose ascending eigenvalues are the singular values descending), U = Up V.
POLAR_SVD_PLATFORMS = {"cuda", "cpu"}


def _compute(kw, donate, a):
    """The outputs computed, (U,) s (, Vh), status, of a tall a: through the polar
    decomposition with vectors (POLAR_SVD_PLATFORMS; a subset's triplets alone), else the
    engine's SVD (every triplet)."""
    if _through_polar(kw, a):
        return _polar_svd(kw["compute_u"], kw["compute_vh"], kw, donate, a)
    return API.engine(kw, donate, a)


def _through_polar(kw, a) -> bool:
    """Whether the call computes its vectors through the polar decomposition."""
    if not (kw["compute_u"] or kw["compute_vh"]):
        return False
    spec = _routine._matrix_spec(kw["matrix_specs"], kw["in_specs"])
    return _placement.resolve_placement(a, kw["mesh"], spec).platform in POLAR_SVD_PLATFORMS


def _unpack(r, kw, b):
    """The outputs computed, (U,) s (, Vh), status, of an engine call's result."""
    s = _placement.constrain(jnp.real(r.s), r.user.mesh, P())
    out = (r.matrix,) if kw["compute_u"] else ()
    out += (s,)
    n = kw["a"].shape[1]
    out += (_place(r.x, r.user, (n, n)),) if kw["compute_vh"] else ()
    return out + (r.status,)


def _polar_svd(compute_u, compute_vh, kw, donate, a):
    """The SVD of a tall a through its polar decomposition (QDWH-SVD): A = Up H, then
    -H = V (-S) Vᴴ by the distributed eigensolver (ascending eigenvalues of -H: the singular
    values in descending order, with no reordering of V's columns), U = Up V, Vh = Vᴴ. The
    products are the engine's (a square a) or XLA's of the factors (tall a); nothing is
    gathered. The singular values are H's eigenvalues, clipped at 0 (H is positive
    semi-definite; rounding can leave values of order ε‖A‖ below 0)."""
    n = a.shape[1]
    call = {k: kw[k] for k in ("T_A", "mesh", "matrix_specs", "in_specs", "pad")}
    subset = kw.get("svd_subset")
    r = _routine.call(POLAR, a, None, donate=donate, **call)
    pl = r.user
    h = _negated_h(pl, n)(r.x)  # (donated: a temporary)
    if subset is None:
        kw = dict(mesh=pl.mesh, check_symmetry=False, return_eigenvectors=True)
        w, v, eig_status = _syevd.API.primal(kw, True, h)
    else:  # -H's ascending eigenvalues are s descending: the kept positions' pairs alone
        w, v, eig_status = _syevd.syevd(
            h,
            mesh=pl.mesh,
            check_symmetry=False,
            return_status=True,
            donate=True,
            subset_by_index=_kept(subset, n),
        )
    return _polar_finish(pl, n, compute_u, compute_vh)(r.matrix, w, v, r.status, eig_status)


# The steps between and after the engine's calls, jitted once per placement: run eagerly, their
# dozen small operations compiled one by one on every new shape.


@functools.cache
def _negated_h(pl, n):
    """-H, from the polar call's x, placed as an N x N matrix."""
    return jax.jit(lambda x: -_place(x, pl, (n, n)))


@functools.cache
def _polar_finish(pl, n, compute_u, compute_vh):
    """(U,) s (, Vh), status from Up, -H's eigenvalues and eigenvectors and both statuses."""

    @jax.jit
    def finish(up, w, v, polar_status, eig_status):
        s = _placement.constrain(jnp.maximum(-w, 0).astype(w.dtype), pl.mesh, P())
        status = jnp.where(polar_status != 0, polar_status, eig_status)
        out = (_rank_corrected(_full_product(pl, up, v), s, pl),) if compute_u else ()
        out += (s,)
        if compute_vh:
            out += (_place(_conj_transpose(v), pl, (v.shape[1], n)),)
        return out + (status.astype(polar_status.dtype),)

    return finish


def _full_product(placement, up, v):
    """Up V at the working precision (XLA's products of a tall factor default to TF32 on
    GPUs, which leaves U orthonormal to 1e-3 only); V's k columns (a subset's) padded with
    zeros to a multiple of the mesh's rows and columns for the product, then dropped."""

    def product(v):
        with jax.default_matmul_precision("highest"):
            return _rules.factor_product(placement, up, v)

    return _on_padded_columns(product, v, placement)


def _on_padded_columns(fn, x, placement):
    """fn(x) of an M x k x whose k does not divide over the mesh's rows and columns: on x
    padded with zero columns to a k' that does, fn's first k columns (rows sharded as a's)."""
    k = x.shape[1]
    step = math.lcm(placement.mesh_rows, placement.mesh_cols)
    padded = -(-k // step) * step
    if padded == k:
        return fn(x)
    rows_only = P(placement.row_axis, None)
    x = jnp.pad(_placement.constrain(x, placement.mesh, rows_only), ((0, 0), (0, padded - k)))
    out = fn(_placement.constrain(x, placement.mesh, placement.matrix_spec))
    return _placement.constrain(out, placement.mesh, rows_only)[:, :k]


def _rank_corrected(u, s, placement):
    """U = Up V is orthonormal only on A's range: for a rank-deficient A (s[-1] <= N ε s[0]),
    Up maps H's null space to zero and U's last columns with it. Then U is replaced by Q of
    jaxmg's distributed QR of U, each column's sign that of R's diagonal: the columns of the
    nonzero singular values are kept, the others completed to an orthonormal set. Every
    process takes the same branch (s is the same everywhere)."""
    # Under jax.vmap one call per batch element (each with its own branch), as the routines.
    return _routine._batchable(_corrector(placement), u, s)


@functools.cache
def _corrector(placement):
    """The jitted correction for one placement: an eager gesvd compiles its branches once
    (a condition built anew per call compiled them on every call)."""
    from jaxmg.routines import qr as _qr

    def orthonormalize(u):  # (a subset's k columns padded: `_on_padded_columns`)
        q, rr = _qr.qr(u, mesh=placement.mesh, matrix_specs=placement.matrix_spec)
        sign = jnp.where(jnp.real(_rules.diagonal(placement, rr)) >= 0, 1, -1).astype(u.dtype)
        return q * _placement.constrain(sign[None, :], placement.mesh, P())

    def orthonormalize_padded(u):
        return _on_padded_columns(orthonormalize, u, placement)

    def placed(fn):
        return lambda u: _place(fn(u), placement, u.shape)

    @jax.jit
    def corrected(u, s):
        n, eps = s.shape[0], float(np.finfo(s.dtype).eps)
        deficient = s[-1] <= n * eps * s[0]
        # (placed after the branches too: the branches' constraints alone left the result
        # replicated under JAX 0.11 on GPUs)
        return placed(lambda u: u)(
            jax.lax.cond(deficient, placed(orthonormalize_padded), placed(lambda u: u), u)
        )

    return corrected


def _tangent(variant, opts, placement, primals, out, tangents):
    """The thin SVD's derivative (M >= N; as jax.numpy.linalg.svd's): with dS = Uᴴ dA V,
    ds = Re diag(dS), dU = U (F ∘ (dS S + S dSᴴ) + i Im(diag dS) / S) + (I − U Uᴴ) dA V S⁻¹,
    dV = V (F ∘ (S dS + dSᴴ S)), F_ij = 1 / (s_j² − s_i²)."""
    (a,), (da,) = primals, tangents
    compute_u, compute_vh = variant["compute_u"], variant["compute_vh"]
    kw = opts.kwargs()
    # A subset's triplets alone where the polar path computed them (else every one, kept after
    # the rule: `_keep`); their derivative is the whole decomposition's, restricted.
    subset = kw.get("svd_subset") if _through_polar({**kw, **variant}, a) else None
    if compute_u and compute_vh and subset is None:
        u, s, vh, _ = out
    else:  # the derivative needs both, of every triplet
        whole = _rules.options(**{k: v for k, v in kw.items() if k != "svd_subset"})
        u, s, vh, _ = API.differentiable(compute_u=True, compute_vh=True)(whole, False, a)
    grads = _whole_tangent(placement, a, da, u, s, vh, compute_u, compute_vh)
    if subset is not None:
        grads = _kept_tangent(placement, subset, grads, u, vh, out, compute_u, compute_vh)
    return grads + (_rules.float0(),)


def _kept_tangent(pl, subset, grads, u, vh, out, compute_u, compute_vh):
    """The kept triplets' tangents ((dU,) ds (, dVh)) from the whole decomposition's (u, vh;
    `grads`): its positions start..stop-1, each column of dU (row of dVh) turned by its
    triplet's phase, since the kept vectors (`out`, computed apart) need not have the whole
    decomposition's."""
    start, stop = _kept(subset, vh.shape[0])
    rows_only, cols_only = P(pl.row_axis, None), P(None, pl.col_axis)

    def columns(x):  # x[:, start:stop], x's rows sharded as a's
        return _placement.constrain(x, pl.mesh, rows_only)[:, start:stop]

    def rows(x):  # x[start:stop], x's columns sharded as a's
        return _placement.constrain(x, pl.mesh, cols_only)[start:stop]

    if compute_vh:  # ⟨v_j, v'_j⟩ = Σ vh_j conj(vh'_j)
        dots = jnp.sum(rows(vh) * jnp.conj(_placement.constrain(out[-2], pl.mesh, cols_only)), 1)
    else:
        dots = jnp.sum(jnp.conj(columns(u)) * _placement.constrain(out[0], pl.mesh, rows_only), 0)
    phase = _syevd.unit_phase(dots).astype(vh.dtype)
    k = stop - start
    kept = ()
    if compute_u:
        kept += (_syevd.kept_columns(grads[0], start, stop, pl) * phase[None, :],)
    kept += (grads[1 if compute_u else 0][start:stop],)
    if compute_vh:  # placed as the primal's Vh: (dV's k columns in V's placement)ᴴ
        n = vh.shape[1]
        dv = _placement.constrain(_conj_transpose(rows(grads[-1])), pl.mesh, rows_only)
        dv = _place(dv * phase[None, :], pl, (n, k))
        kept += (_place(_conj_transpose(dv), pl, (k, n)),)
    return kept


def _whole_tangent(pl, a, da, u, s, vh, compute_u, compute_vh):
    """(dU,) ds (, dVh) of the whole thin decomposition (`_tangent`'s formulas)."""

    def mm(x, y, ax=False, ay=False):  # the engine's product for a square a (factor_product)
        return _rules.factor_product(pl, x, y, ax, ay)

    dav = mm(da, vh, ay=True)  # dA V
    ds_mat = mm(u, dav, ax=True)
    ds = jnp.real(_rules.diagonal(pl, ds_mat)).astype(s.dtype)
    grads = (ds,)
    if compute_u or compute_vh:
        n, dtype = s.shape[0], a.dtype
        row = _rules.place(pl, jnp.broadcast_to(s[None, :], (n, n)))  # s_j
        col = _rules.place(pl, jnp.broadcast_to(s[:, None], (n, n)))  # s_i
        diffs = (row + col) * (row - col)
        zeros = (diffs == 0).astype(s.dtype)
        f = (1 / (diffs + zeros) - zeros).astype(dtype)
        eye = _rules.place(pl, jnp.eye(n, dtype=s.dtype))
        s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s))
        inv_diag = (eye * _rules.place(pl, jnp.broadcast_to(s_inv[None, :], (n, n)))).astype(dtype)
        dss = row.astype(dtype) * ds_mat
        sds = col.astype(dtype) * ds_mat
        ds_h = _rules.adjoint(pl, ds_mat)
        if compute_u:
            inner = f * (dss + _rules.adjoint(pl, dss)) + 0.5 * (ds_mat - ds_h) * inv_diag
            du = mm(u, inner)
            if a.shape[0] > n:
                proj = dav - mm(u, mm(u, dav, ax=True))
                du = du + proj * _rules.place(pl, jnp.broadcast_to(s_inv[None, :], a.shape))
            grads = (du.astype(dtype),) + grads
        if compute_vh:
            # dVh = (V X)ᴴ = Xᴴ Vh for X = F ∘ (S dS + dSᴴ S)
            x = f * (sds + _rules.adjoint(pl, sds))
            grads = grads + (mm(x, vh, ax=True),)
    return grads


# U, s and Vh (U and Vh replicated when a is), the status; a tall a's, with a wide one's through
# its adjoint and full_matrices' completion around them.
class _Gesvd(_factory.Routine):
    """gesvd's forms: a wide matrix runs as its adjoint and full_matrices completes U or Vh
    (`_around`, in every form); the vectors come through the polar decomposition
    (`_compute`, the derivative rule's primal)."""

    def around(self, args):
        return _around(args)

    def primal(self, kw, donate, a, b=None):
        return _compute(kw, donate, a)


API = _Gesvd(
    _factory.Declaration(
        routine=lambda kw: _VARIANTS[(kw["compute_u"], kw["compute_vh"])],
        outputs=(
            _factory.Output("U", "compute_u", place="replicated", optional=True),
            _factory.Output("s"),
            _factory.Output("Vh", "compute_vh", place="replicated", optional=True),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=_unpack,
        variants=("compute_u", "compute_vh"),
        tangent=_tangent,
        check=_check,
        check_operands=False,
        # jaxmg.linalg.svd: compute_uv, full_matrices; subset_by_index refused.
        linalg=_factory.Alias(gesvd, keywords=_svd_keywords),
    )
)
