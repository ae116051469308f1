"""eigh: the standard (syevd) or generalized Hermitian eigenproblem of distributed matrices."""

from __future__ import annotations

from jaxmg._core import factory as _factory
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules
from jaxmg.routines import syevd as _syevd

# As syevd (jaxmg/routines/syevd.py): redistributed, eigenvalues whole in x; B comes as the
# call's b, a second matrix sharded like a (csrc/routines/sygvd.h).
_COMMON = dict(_syevd._COMMON, takes_rhs=True, second_matrix=True)
SYGVD = _routine.EngineRoutine(name="sygvd", returns_matrix=True, **_COMMON)
SYGVD_VALUES = _routine.EngineRoutine(name="sygvd_values", **_COMMON)


def eigh(
    a,
    b=None,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_eigenvectors=True,
    return_status=False,
    pad=True,
    donate=False,
    check_symmetry=True,
    subset_by_index=None,
):
    """Eigenvalues and eigenvectors of A v = λ v, or with b of the generalized problem
    A v = λ B v, for Hermitian A and Hermitian positive definite B sharded over a mesh.

    Without b this is `jaxmg.syevd`. With b: cuSOLVERMp's Sygvd on GPUs; on CPUs ScaLAPACK's
    Cholesky factorization B = L Lᴴ, the reduction to L⁻¹ A L⁻ᴴ (p?sygst / p?hegst), its
    eigensolver and v = L⁻ᴴ y. Both matrices are copied into block-cyclic tiles; nothing is
    gathered.

    Args:
      a: (N, N) Hermitian array, float32, float64, complex64 or complex128, sharded over a 1-D
        or 2-D mesh.
      b: None, or (N, N) Hermitian positive definite array of a's dtype, sharded like a (the
        engine reads the lower triangles of both).
      T_A, mesh, matrix_specs, in_specs, pad, donate, check_symmetry: as for `jaxmg.syevd`
        (check_symmetry checks a).
      return_eigenvectors: also compute and return the eigenvectors.
      return_status: also return an int32 status: 0 on success; -1 when a is not Hermitian;
        N + i when B's leading minor of order i is not positive definite; another k > 0 when
        the eigensolver did not converge or a matrix holds NaN or Inf.
      subset_by_index: None, or (lo, hi): only the eigenpairs lo <= i < hi, as for
        `jaxmg.syevd` (w (k,), V (N, k)).

    Returns:
      (w, V) or w, the status appended with return_status. w: (N,) real, ascending, the same
      on every device; V: (N, N) in a's sharding with A V = B V diag(w) and Vᴴ B V = I. On
      failure w and V are NaN on every device.

    Differentiation (forward and reverse mode, Hermitian tangents of a and b), with
    C = Vᴴ dA V and D = Vᴴ dB V: dw = Re diag(C) − w Re diag(D), dV = V M with
    M_ij = (C_ij − w_j D_ij) / (w_j − w_i) and M_ii = −D_ii / 2 (distinct eigenvalues; a loss
    must not depend on each eigenvector's phase); the engine's distributed products. With
    subset_by_index, the kept pairs' part of the whole decomposition's derivative.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, before any work.
    """
    if b is None:
        return _syevd.syevd(
            a,
            T_A,
            mesh,
            matrix_specs,
            in_specs=in_specs,
            return_eigenvectors=return_eigenvectors,
            return_status=return_status,
            pad=pad,
            donate=donate,
            check_symmetry=check_symmetry,
            subset_by_index=subset_by_index,
        )
    return API.public(
        a=a,
        b=b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_eigenvectors=return_eigenvectors,
        return_status=return_status,
        pad=pad,
        donate=donate,
        check_symmetry=check_symmetry,
        subset_by_index=subset_by_index,
    )


def _check_b(kw):
    a, b = kw["a"], kw["b"]
    if tuple(b.shape) != tuple(a.shape):
        raise ValueError(f"b must have a's shape {tuple(a.shape)}, got {tuple(b.shape)}")
    return _syevd.subset_keyword(kw, standard=False)


def _tangent(variant, opts, pl, primals, out, tangents):
    (a, b), (da, db) = primals, tangents
    vectors = variant["return_eigenvectors"]
    subset = opts.kwargs().get("subset")
    if subset is not None and not vectors:  # the subset's own eigenvectors suffice
        w, v, _ = API.differentiable(return_eigenvectors=True)(opts, False, a, b)
        return _syevd.subset_values_tangent(pl, subset, w, v, da, db), _rules.float0()
    if vectors and subset is None:
        w, v, _ = out
    else:  # the values' derivative needs the vectors; a subset's vectors', every pair
        w, v, _ = API.differentiable(return_eigenvectors=True)(_syevd.whole(opts), False, a, b)
    dw, dv = _rules.eigen_tangent(pl, w, v, da, db)
    if subset is not None:
        dw, dv = _syevd.kept_first(pl, subset, dw, dv, v, out[1] if vectors else None)
    return (dw, dv, _rules.float0()) if vectors else (dw, _rules.float0())


API = _syevd.EigenRoutine(
    _factory.Declaration(
        routine=lambda kw: SYGVD if kw["return_eigenvectors"] else SYGVD_VALUES,
        outputs=(
            _factory.Output("w"),
            _factory.Output("V", "return_eigenvectors", optional=True),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=_syevd.unpack,
        keywords=("check_symmetry",),
        variants=("return_eigenvectors",),
        tangent=_tangent,
        check=_check_b,
        check_operands=False,
    ),
    standard=False,
)
