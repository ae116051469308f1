"""syevd: eigenvalues and eigenvectors of a distributed Hermitian matrix."""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The engine redistributes the matrix into block-cyclic tiles (relabeling's padding would add
# eigenvalues) and writes the eigenvectors back into a's sharding (csrc/routines/syevd.h).
_COMMON = dict(
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    takes_rhs=False,
    redistribute=True,
    solution_cols=lambda n, nrhs: 1,  # the eigenvalues
    solution_whole=True,
    # cuSOLVERMp's Syevd is fastest at tile 256 of the tiles measured on 2 H200s
    # (bench/results/syevd_tiles_16384_h200x2_50138e9.json).
    tile_target={"cuda": 256},
)
SYEVD = _routine.EngineRoutine(name="syevd", returns_matrix=True, **_COMMON)
EIGVALSH = _routine.EngineRoutine(name="eigvalsh", **_COMMON)


def engine_subset(placement, standard: bool) -> bool:
    """Whether the engine takes a subset_by_index and writes its pairs first (the eigenvalues'
    first k = hi - lo entries, the vectors' first k columns): the CPU engine always (ScaLAPACK's
    p?syevr / p?heevr, or its own two stages with Q₂ and Q₁ on the k columns); the GPU engine
    for the standard problem on meshes of one row (its own two stages on the k columns, or
    cuSOLVERMp's Syevd with the kept pairs moved first on each device). A 1 x P mesh is the
    engine's grid of P x 1 (layout.h: the engine reads each shard column-major), where every
    device holds every engine column of its rows, so the move stays on the device. Elsewhere
    the engine computes every pair and the wanted ones are kept where they lie."""
    if placement.platform == "cpu":
        return True
    return standard and placement.platform == "cuda" and placement.mesh_rows == 1


def syevd(
    a,
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
    """Eigenvalues and eigenvectors of a Hermitian (real symmetric) A sharded over a mesh.

    The divide-and-conquer eigensolver of the engine (cuSOLVERMp's Syevd on GPUs, ScaLAPACK's
    p?syevd / p?heevd on CPUs) on the matrix copied into block-cyclic tiles; nothing is
    gathered. With return_eigenvectors=False only the eigenvalues are computed (cuSOLVERMp's
    values-only path; ScaLAPACK's p?syev / p?heev).

    Args:
      a: (N, N) float32, float64, complex64 or complex128 array, Hermitian, sharded over a 1-D or
        2-D mesh.
      T_A, mesh, matrix_specs, in_specs, pad, donate, check_symmetry: as for `jaxmg.potrs` (the
        matrix is checked for symmetry first unless check_symmetry=False; the engine reads its
        lower triangle).
      return_eigenvectors: also compute and return the eigenvectors.
      return_status: also return an int32 status: 0 on success, k > 0 when the eigensolver did
        not converge or the matrix holds NaN or Inf, -1 when it is not Hermitian.
      subset_by_index: None (every eigenpair), or (lo, hi), Python ints with
        0 <= lo < hi <= N: only the eigenvalues lo <= i < hi in ascending order and their
        eigenvectors, as `jax.lax.linalg.eigh`'s subset_by_index. The CPU engine computes those
        pairs alone (its two stages with both back-transformations on those k vectors alone on
        1-D grids, else ScaLAPACK's p?syevr / p?heevr); so does the GPU engine's own two-stage
        solver on one GPU (elsewhere on GPUs cuSOLVERMp computes every pair and the wanted
        ones are kept).

    Returns:
      (w, V), or w without eigenvectors; with return_status, (w, V, status) or (w, status). w:
      (N,) real eigenvalues in ascending order, the same on every device; V: (N, N) with the
      eigenvectors in its columns (A V = V diag(w)), in a's sharding (replicated when a is).
      With subset_by_index=(lo, hi), w is (k,) and V (N, k), k = hi - lo, V in a's sharding
      where k divides over a's column axis. On failure w and V are NaN on every device.

    Differentiation (forward and reverse mode, for Hermitian tangents): dw = Re diag(Vᴴ dA V)
    and dV = V (F ∘ Vᴴ dA V), F_ij = 1 / (w_j − w_i), with the engine's distributed products, no
    XLA collective of matrix size (the values-only path computes V for its derivative). As for
    any eigensolver, the eigenvectors' derivative is defined only for distinct eigenvalues (F is
    infinite for a repeated one; losses that depend on an eigenvector only through its
    eigenspace, or on the eigenvalues alone, are fine), and a loss of V must not depend on each
    eigenvector's phase. With subset_by_index the same rule on the whole decomposition gives
    the kept pairs' derivative, exact (for kept eigenvalues distinct from every other); the
    eigenvalues alone need only the subset's own eigenvectors where the engine computes it.

    Raises:
      TypeError: a flag that is not a Python bool (the message names it); a subset_by_index
        that is not a pair of ints.
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes or tiles, or a subset out of
        0 <= lo < hi <= N, before any work.
    """
    return API.public(
        a=a,
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


def syevd_blocks(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_eigenvectors=True,
    return_status=False,
    pad=True,
    check_symmetry=True,
    subset_by_index=None,
):
    """syevd on this device's block of A, inside the caller's `jax.shard_map` over `mesh`.

    The per-block form, as `jaxmg.potrs_blocks`. Not differentiable.

    Args:
      a: this device's block of A, sharded as `matrix_specs` over `mesh`.
      T_A, pad, check_symmetry, return_eigenvectors, return_status, subset_by_index: as for
        `jaxmg.syevd`.
      mesh: the mesh of the enclosing shard_map (required).
      matrix_specs, in_specs: as for `jaxmg.potrs_blocks`.

    Returns:
      (w, V block), or w without eigenvectors, the status appended with return_status: the
      eigenvalues (the same on every device) and this device's block of V. With
      subset_by_index=(lo, hi): the k = hi - lo eigenvalues and this device's block of the
      N x k V in the same spec (k must divide over the column axis; the kept columns are
      gathered along that axis, one all_gather of this device row's N / P_rows x N slice).

    Raises:
      ValueError: without mesh=, or on bad shapes, specs, tiles or subsets, before any work.
      TypeError: on bad dtypes, non-boolean flags or a subset_by_index that is not ints.
    """
    return API.blocks(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_eigenvectors=return_eigenvectors,
        return_status=return_status,
        pad=pad,
        check_symmetry=check_symmetry,
        subset_by_index=subset_by_index,
    )


def unpack(r, kw, b):
    """(w[, V], status) of a call's result (the generalized problem's too)."""
    vectors = (r.matrix,) if kw["return_eigenvectors"] else ()
    return (jnp.real(r.x[:, 0]), *vectors, r.status)


def _tangent(variant, opts, placement, primals, out, tangents):
    (a,), (da,) = primals, tangents
    vectors = variant["return_eigenvectors"]
    subset = opts.kwargs().get("subset")
    if subset is not None and not vectors:  # the subset's own eigenvectors suffice
        w, v, _ = API.differentiable(return_eigenvectors=True)(opts, False, a)
        return subset_values_tangent(placement, subset, w, v, da), _rules.float0()
    if vectors and subset is None:
        w, v, _ = out
    else:  # the values' derivative needs the vectors; a subset's vectors', every pair
        w, v, _ = API.differentiable(return_eigenvectors=True)(whole(opts), False, a)
    dw, dv = _rules.eigen_tangent(placement, w, v, da)
    if subset is not None:
        dw, dv = kept_first(placement, subset, dw, dv, v, out[1] if vectors else None)
    return (dw, dv, _rules.float0()) if vectors else (dw, _rules.float0())


def whole(opts):
    """The options without an engine's subset: every eigenpair."""
    return _rules.options(**{k: v for k, v in opts.kwargs().items() if k != "subset"})


def subset_values_tangent(placement, subset, w, v, da, db=None):
    """The tangent of a subset's eigenvalues from their own eigenvectors (the engine's, first in
    v; B-orthonormal for the generalized problem): dw_i = Re v_iᴴ dA v_i − w_i Re v_iᴴ dB v_i
    for the k = hi − lo pairs, first, the rest zero (never returned). One product of dA with k
    columns instead of a whole decomposition: the other pairs do not enter."""
    k = subset[1] - subset[0]
    vk = _placement.constrain(v, placement.mesh, P(placement.row_axis, None))[:, :k]

    def quadratic(m):  # Re diag(Vₖᴴ m Vₖ): m Vₖ's rows lie as Vₖ's
        return jnp.real(jnp.sum(jnp.conj(vk) * _rules.matvec(placement, m, vk), axis=0))

    dw = quadratic(da)
    if db is not None:
        dw = dw - w[:k] * quadratic(db)
    return jnp.pad(dw, (0, w.shape[0] - k)).astype(w.dtype)


def kept_first(placement, subset, dw, dv, v, kept):
    """The whole decomposition's tangents (dw, dV), of its eigenvectors v, with the pairs
    lo..hi-1 first, where the engine writes a subset's (the rest is never returned). kept: the
    engine's eigenvectors of the subset (first), or None (eigenvalues only): each column of dV
    turns with its eigenvector's phase, and the engine's eigenvectors need not have the whole
    decomposition's. The columns are whole on each device row for the move (a's spec after)."""
    lo = subset[0]
    mesh, rows_only = placement.mesh, P(placement.row_axis, None)

    def first(m):  # m's columns lo... first
        return jnp.roll(_placement.constrain(m, mesh, rows_only), -lo, axis=1)

    dv = first(dv)
    if kept is not None:
        dots = jnp.sum(jnp.conj(first(v)) * _placement.constrain(kept, mesh, rows_only), axis=0)
        dv = dv * unit_phase(dots)[None, :]
    return jnp.roll(dw, -lo), _placement.constrain(dv, mesh, placement.matrix_spec)


def unit_phase(dots):
    """dots / |dots| (1 where a dot is 0): each kept vector's phase against the whole
    decomposition's, from their inner products."""
    size = jnp.abs(dots)
    return jnp.where(size > 0, dots / jnp.where(size > 0, size, 1), 1)


def subset_keyword(kw, standard: bool = True) -> dict:
    """{"subset": (lo, hi)} for the engine's call where it takes the subset_by_index of a call
    on global arrays (`engine_subset`), else {} (the per-block forms set "subset" themselves).
    standard: the standard problem (False: the generalized one)."""
    if "subset" in kw:
        return {}
    subset = check_subset(kw.get("subset_by_index"), kw["a"].shape[-1])
    if subset is None:
        return {}
    spec = _routine._matrix_spec(kw.get("matrix_specs"), kw.get("in_specs"))
    placement = _placement.resolve_placement(kw["a"], kw.get("mesh"), spec)
    return {"subset": subset} if engine_subset(placement, standard) else {}


def check_subset(subset_by_index, n: int, what: str = "eigenvalues"):
    """(lo, hi) from subset_by_index for a problem of order n, or None for every pair; what:
    the values counted, for the message."""
    if subset_by_index is None:
        return None
    pair = subset_by_index
    if (
        not isinstance(pair, tuple | list)
        or len(pair) != 2
        or not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in pair)
    ):
        raise TypeError(
            f"subset_by_index must be None or a pair of ints (lo, hi), got {subset_by_index!r}"
        )
    lo, hi = int(pair[0]), int(pair[1])
    if not 0 <= lo < hi <= n:
        raise ValueError(
            f"subset_by_index=({lo}, {hi}) must satisfy 0 <= lo < hi <= {n} "
            f"(the {what} lo <= i < hi, ascending)"
        )
    return None if (lo, hi) == (0, n) else (lo, hi)


def kept_columns(v, lo, hi, placement):
    """V's columns lo:hi: V's columns made whole on each device row (an all-gather along a's
    column axis, N x N / P_rows a device), sliced, then in the placement's matrix spec where
    they divide over the mesh."""
    rows_only = P(placement.row_axis, None)
    whole = _placement.constrain(v, placement.mesh, rows_only)
    kept = jax.lax.slice_in_dim(whole, lo, hi, axis=1)
    return _placement.constrain_divisible(kept, placement, (v.shape[0], hi - lo))


def _kept_block(v, lo, hi, mesh, col_axis):
    """This device's block of V[:, lo:hi] from its block of V, inside the caller's shard_map:
    the block row's columns gathered along the column axis, then this device's share."""
    if col_axis is None:
        return v[:, lo:hi]
    names = col_axis if isinstance(col_axis, tuple) else (col_axis,)
    cols = math.prod(mesh.shape[name] for name in names)
    k = hi - lo
    if k % cols:
        raise ValueError(
            f"subset_by_index=({lo}, {hi}) keeps {k} eigenvectors, which must divide over the "
            f"{cols} devices of the column axis {col_axis!r} in the per-block form"
        )
    whole = jax.lax.all_gather(v, col_axis, axis=1, tiled=True)[:, lo:hi]
    share = k // cols
    return jax.lax.dynamic_slice_in_dim(whole, jax.lax.axis_index(col_axis) * share, share, 1)


class EigenRoutine(_factory.Routine):
    """The eigensolvers' forms (syevd, and eigh's generalized problem): subset_by_index keeps
    the eigenpairs lo <= i < hi (`around` in the forms on global arrays, `_kept` on blocks),
    which the engine computes alone where it can (`engine_subset`: then first); the derivative
    is the whole decomposition's (the eigenvalues alone: the subset's own vectors'), exact.
    standard: the standard problem."""

    def __init__(self, declaration, standard: bool):
        super().__init__(declaration)
        self.standard = standard

    def around(self, args):
        args = dict(args)
        subset = check_subset(args.pop("subset_by_index", None), args["a"].shape[-1])
        if subset is None:
            return args, lambda outputs: outputs
        spec = _routine._matrix_spec(args["matrix_specs"], args["in_specs"])
        placement = _placement.resolve_placement(args["a"], args["mesh"], spec)
        # Where the engine took the subset, its pairs come first.
        lo = 0 if engine_subset(placement, self.standard) else subset[0]
        hi = lo + subset[1] - subset[0]

        def finish(outputs):
            kept = {**outputs, "w": outputs["w"][lo:hi]}
            if "V" in outputs:
                kept["V"] = kept_columns(outputs["V"], lo, hi, placement)
            return kept

        return args, finish

    def blocks(self, **args):
        kept = self._block_subset(args)
        return self._kept(super().blocks(**args), kept, args, work=False)

    def _context_blocks(self, args):
        args = dict(args)
        if args.get("mesh") is None:
            args["mesh"] = _placement.manual_mesh()
        kept = self._block_subset(args)
        return self._kept(super()._context_blocks(args), kept, args, work=True)

    def _block_subset(self, args):
        """((lo, hi), column axis) of a call on blocks, checked against the global order, or
        None; subset_by_index taken out of args."""
        subset_by_index = args.pop("subset_by_index", None)
        if subset_by_index is None:
            return None
        a, _, spec, _ = _routine._block_standins(
            args["a"], None, args.get("mesh"), args.get("matrix_specs"), args.get("in_specs")
        )
        subset = check_subset(subset_by_index, a.shape[1])
        if subset is None:
            return None
        placement = _placement.resolve_placement(a, args.get("mesh"), spec)
        if engine_subset(placement, self.standard):
            args["subset"] = subset  # the engine takes it: its pairs first
            subset = (0, subset[1] - subset[0])
        entries = tuple(spec) + (None,) * (2 - len(spec))
        return subset, entries[1]

    @staticmethod
    def _kept(out, kept, args, work):
        """The per-block outputs `out` ((work,) w, V block, status...) for the kept pairs."""
        if kept is None:
            return out
        (lo, hi), col_axis = kept
        out = list(out) if isinstance(out, tuple) else [out]
        at = 1 if work else 0  # w's position; V follows it
        out[at] = out[at][lo:hi]
        if args.get("return_eigenvectors", True):
            out[at + 1] = _kept_block(out[at + 1], lo, hi, args["mesh"], col_axis)
        return out[0] if len(out) == 1 else tuple(out)


# w, V (replicated when a is) and the status; the matrix is checked by the call itself.
API = EigenRoutine(
    _factory.Declaration(
        routine=lambda kw: SYEVD if kw["return_eigenvectors"] else EIGVALSH,
        outputs=(
            _factory.Output("w"),
            _factory.Output("V", "return_eigenvectors", place="replicated", optional=True),
            _factory.Output("status", "return_status", status=True),
        ),
        unpack=unpack,
        keywords=("check_symmetry",),
        variants=("return_eigenvectors",),
        tangent=_tangent,
        check=subset_keyword,
        check_operands=False,
    ),
    standard=True,
)
