"""The one pipeline every solve routine takes: checks, placement, tile, engine, call, result.

A routine module (jaxmg/routines/) declares a `EngineRoutine` (its name, whether it assumes a
symmetric matrix, when the engine is handed aᵀ) and calls `solve`. This module owns everything
else: argument checks, the mesh and process grid, the tile, the native engine and its GPU context,
and the jitted `shard_map` + `ffi_call` with donation. One FFI call per device runs the native
handler of the routine's family (csrc/ffi/families.h) on that device's shard.
"""

from __future__ import annotations

import functools
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import config as _config
from jaxmg._core import gpu as _gpu
from jaxmg._core import native as _native
from jaxmg._core import placement as _placement


@dataclass(frozen=True)
class EngineRoutine:
    """What a solve routine declares.

    name: the routine's FFI target suffix (jaxmg_<engine>_<name>).
    symmetric: the routine reads a symmetric (Hermitian) matrix: one tile permutation on rows and
      columns; otherwise independent row and column permutations (every grid relabels).
    hand_transpose: (placement, donate) -> whether to hand the engine aᵀ (aᴴ for symmetric
      routines) sharded the other way, a transpose local to each device.
    returns_matrix: the routine's result is the matrix it overwrites (an inverse, a factor), in
      a's sharding; it takes no right-hand side.
    takes_rhs: the routine solves with a right-hand side b (False: slogdet, inverses, factors).
    reads_factor: `a` is a factor kept by a factor routine: read, never written (no aliasing),
      already in the engine's placement.
    pivots_in, pivots_out: the routine takes (returns) LU pivots, one int32 per row of the
      engine matrix, replicated.
    redistribute: the engine always redistributes the matrix (no relabeling).
    keeps_factor: the matrix returned is a factor kept for solves: where the engine pads, it
      is the padded engine-local matrix (a larger array, sharded like a), not a's buffer.
    rectangular: the routine takes an M x N matrix, M >= N (QR, least squares); the engine is
      handed aᵀ (its columns keep their order: redistributed when they are split over devices);
      b has M rows and x has N, with `solution_cols` columns (0: b's).
    solution_cols: x's columns given N and b's columns, when x is not shaped like b; its rows
      are split like b's where N divides, or whole on every device with `solution_whole`.
    second_matrix: b is a second N x N matrix (the generalized eigenproblem's B), sharded like
      a and read by the engine as a is (csrc/routines/contract.h: MatrixIn).
    rhs_like_a: b (N x K) and x are sharded like a, both axes over the mesh (K divisible by the
      devices over a's columns), and read by the engine as a is (csrc/routines/contract.h:
      RhsMatrixIn), rather than their rows split like a's rows.
    tile_target: per platform, the tile the automatic choice aims at when the engine's routine
      has measured better near it than the default.
    """

    name: str
    symmetric: bool
    hand_transpose: Callable[[_placement.MatrixPlacement, bool], bool]
    returns_matrix: bool = False
    takes_rhs: bool = True
    reads_factor: bool = False
    pivots_in: bool = False
    pivots_out: bool = False
    redistribute: bool = False
    keeps_factor: bool = False
    rectangular: bool = False
    solution_cols: Callable[[int, int], int] | None = None  # (N, nrhs) -> columns of x
    solution_whole: bool = False  # x (solution_cols) whole on every device (eigenvalues)
    # {platform: automatic tile near this} (else placement's); not hashed (a dict)
    tile_target: dict | None = field(default=None, hash=False)
    second_matrix: bool = False  # b is an N x N matrix sharded like a
    rhs_like_a: bool = False  # b and x (N x K) sharded like a


@dataclass(frozen=True)
class KeptFactor:
    """How a factor kept by a factor routine lies, for the routines that solve with it: the
    engine's placement of the factored matrix (aᵀ's when the engine was handed aᵀ), the user's
    placement (of a, b and x), the tile, the padding, the pivots (LU; None for Cholesky) and
    the order of A (the factor's matrix is larger where the engine padded)."""

    engine_placement: _placement.MatrixPlacement
    placement: _placement.MatrixPlacement
    tile: int
    pad: bool
    pivots: jax.Array | None
    order: int


@dataclass(frozen=True)
class Result:
    """What one routine call gives back (unused fields are None)."""

    x: object = None  # the solution, shaped like b
    matrix: object = None  # the matrix written (inverse or factor), in a's sharding
    logdet: object = None  # log det (Cholesky) or log |det| (LU), real scalar
    status: object = None  # int32 scalar
    sign: object = None  # sign (phase) of det, a's dtype (LU routines)
    pivots: object = None  # int32 (engine rows,), replicated
    s: object = None  # the singular values (svd family: x holds Vᴴ's rows), a's dtype, real
    placement: object = None  # the engine's placement (a factor keeps it)
    user: object = None  # the placement of a as given (and of b and x)
    tile: int = 0


class Triangular(NamedTuple):
    """solve_triangular's options, which the engine reads as named attributes
    (csrc/routines/contract.h CallAttrs): A's lower triangle (else the upper one), op(A) (0: A,
    1: Aᵀ, 2: Aᴴ), a unit diagonal (not read)."""

    lower: bool = False
    op: int = 0
    unit_diagonal: bool = False


class EngineOutputs(NamedTuple):
    """What one device's engine call returns (`_local`), each family's own (the others None):
    solve and factor families: x (shaped like b, or n x solution_cols), logdet, status, sign,
    pivots, work (the matrix written, in a's place); eigen: x the eigenvalues (n, 1), status,
    work the eigenvectors; svd: x Vᴴ's rows, status, work U, s the singular values; polar: x
    H's rows, status, work U; product: work the product."""

    x: object = None
    logdet: object = None
    status: object = None
    sign: object = None
    pivots: object = None
    work: object = None
    s: object = None


def never_transpose(placement: _placement.MatrixPlacement, donate: bool) -> bool:
    """The `hand_transpose` policy of routines that always run on a as it is."""
    return False


def transpose_when(*, always: set[str], by_shape: set[str], tall: bool):
    """A `hand_transpose` policy: aᵀ on `always` platforms, and on `by_shape` platforms for meshes
    taller than wide (`tall`) or wider than tall; never with donation (the in-place path saves a
    shard of memory). The sets are read at call time, so tests can steer the path."""

    def decide(placement: _placement.MatrixPlacement, donate: bool) -> bool:
        if donate:
            return False
        rows, cols = placement.mesh_rows, placement.mesh_cols
        shaped = rows > cols if tall else rows < cols
        return placement.platform in always or (shaped and placement.platform in by_shape)

    return decide


def solve(routine: EngineRoutine, a, b, **kwargs):
    """Runs `routine` on (a, b) (keywords as for `call`); returns (x, logdet, status), x shaped
    like b; for a routine that returns a matrix (b is None), (the new matrix in a's sharding,
    logdet, status). Raises ValueError/TypeError for bad arguments before any work, identically
    on every process."""
    r = call(routine, a, b, **kwargs)
    return (r.matrix if routine.returns_matrix else r.x), r.logdet, r.status


@dataclass(frozen=True)
class Plan:
    """A routine call made ready (`plan`): the arrays it takes and everything its compiled
    function depends on. Made before any work, identically on every process.

    call: the frozen key of the compiled function (`_Call`), None for an empty matrix (N = 0),
      whose results `run` makes directly.
    a, b, pivots: the arrays handed to the engine's function (b None without a right-hand
      side; pivots those of a kept LU factor, else None).
    blocks: (a's block, b's block) for a call on blocks inside the caller's shard_map, else
      None (a and b are then stand-ins of the global arrays).
    ctx: the context form (inside the caller's jit, no jit of jaxmg's own).
    placement: the engine's placement; user: the placement of a as given (and of b and x).
    tile: the engine's tile.
    """

    call: _Call | None
    a: object
    b: object
    pivots: object
    blocks: tuple | None
    ctx: bool
    placement: _placement.MatrixPlacement
    user: _placement.MatrixPlacement
    tile: int = 0


def call(routine: EngineRoutine, a, b, **kwargs) -> Result:
    """Runs `routine` and returns every output it has (a `Result`): `plan`, `build`, `run`
    (the keywords are `plan`'s)."""
    p = plan(routine, a, b, **kwargs)
    fn = build(p)
    return run(p, fn, p.a, p.b, p.pivots)


def plan(
    routine: EngineRoutine,
    a,
    b,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    in_specs=None,
    pad=True,
    donate=False,
    check_symmetry=False,
    kept=None,
    blocks=False,
    ctx=False,
    triangular=None,
    subset=None,
) -> Plan:
    """Checks the arguments of a call of `routine` and decides everything about it: the
    placement, the tile, the engine and its placement, and the frozen key of its compiled
    function. Raises ValueError/TypeError for bad arguments before any work, identically on
    every process (nothing here depends on a process's data).

    blocks: a and b are this device's blocks, inside the caller's `jax.shard_map` over `mesh`
      with a sharded as `matrix_specs` (default: the mesh's first two axes) and b's rows like
      a's; the results are blocks too (x's rows like b's, the matrix like a's, scalars the same
      on every device). Routines that hand the engine aᵀ are not available there (the
      transpose moves blocks between devices): ValueError.

    check_symmetry: (symmetric routines) the engine compares uᴴ A v with conj(vᴴ A u) for fixed
    probe vectors u, v first (each device multiplies its shard; sums of vector size over the
    processes; csrc/common/symmetry.h) and returns NaN with status NOT_SYMMETRIC on every device
    when they differ beyond rounding.
    kept: for routines that read a kept factor, the factor `a`'s `KeptFactor`; T_A, mesh, specs
      and pad are then the factor's.
    ctx: the JAXMg-style context form (jaxmg.routines.context): the global arrays inside the
      caller's jit, not wrapped in a jit of jaxmg's own; the engine takes a as it lies (the
      in-place path) and the result's `matrix` is the work array in a's shape and sharding,
      so that a jit donating a can reuse its buffer. Concrete arrays run in a jit without
      donation.
    triangular: solve_triangular's `Triangular` options (None for the other routines).
    subset: the eigensolvers' (lo, hi) (None: every pair): the engine computes the eigenpairs
      lo <= i < hi alone and writes them first (x's first hi - lo entries, the matrix's first
      hi - lo columns; the rest undefined).
    """
    config = _config.current()  # (its errors before any work, like the arguments')
    local_blocks = None
    if blocks:
        local_blocks = (a, b)
        a, b, matrix_specs, in_specs = _block_standins(a, b, mesh, matrix_specs, in_specs)
    m, n, b = _checked_operands(routine, a, b, kept)
    if kept is not None:  # the factor's plan
        placement, pivots = kept.placement, kept.pivots
        engine_placement, tile, pad = kept.engine_placement, kept.tile, kept.pad
    else:
        placement, pivots = _new_placement(routine, a, b, m, n, mesh, matrix_specs, in_specs), None
    if n == 0:
        return Plan(None, a, b, pivots, local_blocks, bool(ctx), placement, placement)
    # The test hook config.redistribute: redistribute even where relabeling would do.
    redistribute = routine.redistribute or config.redistribute
    if routine.rectangular:  # the columns keep their order: on one device column, or moved
        redistribute = redistribute or placement.mesh_cols > 1
    if kept is None or routine.rectangular:
        tile = _tile(routine, placement, m, n, T_A, pad, redistribute)
    if placement.platform == "cpu":
        _placement.check_cpu_placement(placement)
    _native.engine(placement.platform)
    if kept is None:
        # (On blocks the engine takes a as it lies: the policy's in-place choice.)
        in_place = bool(donate) or local_blocks is not None or bool(ctx)
        engine_placement = _engine_placement(routine, placement, in_place, local_blocks)
    c = _call_key(
        routine,
        config,
        placement,
        engine_placement,
        m=m,
        n=n,
        b=b,
        tile=tile,
        pad=pad,
        redistribute=redistribute,
        donate=donate,
        check_symmetry=check_symmetry,
        thread=0 if local_blocks is not None else _thread_tag(a),
        ctx=ctx,
        triangular=triangular or Triangular(),
        subset=tuple(subset) if subset else (0, 0),
    )
    return Plan(c, a, b, pivots, local_blocks, bool(ctx), engine_placement, placement, tile)


def _block_standins(a_blk, b_blk, mesh, matrix_specs, in_specs):
    """A call on blocks: stand-ins of the global arrays the blocks make up, checked as those
    (a, b, matrix_specs, in_specs=None)."""
    if mesh is None:
        raise ValueError("a call on blocks inside shard_map needs mesh=... (the shard_map's)")
    matrix_specs = _matrix_spec(matrix_specs, in_specs)
    a, b, matrix_specs = _global_standins(a_blk, b_blk, mesh, matrix_specs)
    return a, b, matrix_specs, None


def _checked_operands(routine: EngineRoutine, a, b, kept):
    """(m, n, b) of a call: a's shape checked for the routine (a kept factor's order), its
    dtype, and b's; b None for a routine without a right-hand side."""
    if routine.rectangular:
        m, n = _placement.check_tall_matrix(a)
    else:
        m = n = _placement.check_square_matrix(a) if kept is None else kept.order
    dtype = _placement.check_dtype(a)
    if not routine.takes_rhs:
        return m, n, None  # the call takes an empty right-hand side (made inside the call)
    _check_rhs(b, m, dtype)
    if routine.rhs_like_a and b.ndim != 2:
        raise ValueError(f"{routine.name}: b must be an (N, K) matrix, got shape {b.shape}")
    return m, n, b


def _new_placement(routine: EngineRoutine, a, b, m, n, mesh, matrix_specs, in_specs):
    """The placement of a (without a kept factor), checked: its mesh divides the matrix (and
    b's columns, for a b sharded like a)."""
    matrix_specs = _matrix_spec(matrix_specs, in_specs)
    placement = _placement.resolve_placement(a, mesh, matrix_specs)
    _placement.check_divisible(m, placement, cols=n if routine.rectangular else None)
    if routine.rhs_like_a and b.shape[1] % placement.mesh_cols:
        raise ValueError(
            f"b's {b.shape[1]} columns are not divisible by the {placement.mesh_cols} "
            "devices over a's columns: b cannot be sharded like a (split only its rows)"
        )
    return placement


def _tile(routine: EngineRoutine, placement, m, n, T_A, pad, redistribute) -> int:
    """The engine's tile: T_A checked, or one chosen for the matrix and the mesh."""
    if routine.rectangular:
        return _placement.choose_rectangular_tile(m, n, placement, T_A, pad, redistribute)
    return _placement.choose_tile(
        n,
        placement,
        T_A,
        pad,
        symmetric=routine.symmetric and not routine.redistribute,
        target=(routine.tile_target or {}).get(placement.platform),
    )


def _engine_placement(routine: EngineRoutine, placement, in_place: bool, local_blocks):
    """The placement the engine sees: a's, or its transpose's where the routine hands the
    engine aᵀ (rectangular routines always; others by their policy)."""
    if local_blocks is not None and routine.rectangular:
        raise ValueError(
            f"{routine.name} hands the engine aᵀ, which moves blocks between devices: it "
            "has no form on blocks inside shard_map; call it outside"
        )
    if routine.rectangular or routine.hand_transpose(placement, in_place):
        return _placement.transposed(placement)
    return placement


def _call_key(
    routine: EngineRoutine,
    config,
    placement,
    engine_placement,
    *,
    m,
    n,
    b,
    tile,
    pad,
    redistribute,
    donate,
    check_symmetry,
    thread,
    ctx,
    triangular,
    subset,
) -> _Call:
    """The frozen key of the call's compiled function: the routine's traits, the placements,
    the engine's order and the GPU context."""
    context = None
    if placement.platform == "cuda":
        context = _gpu.context_for(engine_placement, routine.symmetric, redistribute)
    relabels, order = False, n
    if not routine.rectangular:
        relabels, order = _native.layout_plan(
            n,
            engine_placement.mesh_rows,
            engine_placement.mesh_cols,
            tile,
            bool(pad),
            routine.symmetric,
            redistribute,
        )
    # A factor of a padded plan is the padded engine-local matrix (csrc/routines/factor.h).
    factor_order = order if routine.keeps_factor and relabels and order != n else 0
    solution_cols = 0
    if routine.solution_cols is not None:
        solution_cols = routine.solution_cols(n, 1 if b is None or b.ndim == 1 else b.shape[1])
    return _Call(
        routine=routine,
        user=placement,
        placement=engine_placement,
        n=n,
        cols=m,
        solution_cols=solution_cols,
        tile=tile,
        pad=bool(pad),
        redistribute=redistribute,
        b_ndim=2 if b is None else b.ndim,
        donate=bool(donate),
        context=context,
        check_symmetry=bool(check_symmetry and routine.symmetric),
        thread=thread,
        pivots_in=order if routine.pivots_in else 0,
        pivots_out=order if routine.pivots_out else 0,
        factor_order=factor_order,
        ctx=bool(ctx),
        config=config,
        triangular=triangular,
        subset=subset,
    )


def build(p: Plan):
    """The plan's compiled function (a donated with donate=True), cached by its `_Call`; None
    for a call on blocks (traced into the caller's shard_map) and for an empty matrix."""
    if p.call is None or p.blocks is not None:
        return None
    return _build(p.call)


def run(p: Plan, fn, a, b, pivots) -> Result:
    """Runs a plan's call on (a, b, pivots) (`fn`: `build(p)`) in the form the call takes: on
    the caller's blocks, traced into the caller's jit (the context form), traced with a rule
    for jax.vmap, or on concrete arrays."""
    if p.call is None:  # an empty matrix: nothing to compute
        dtype = np.dtype(a.dtype)
        real = np.finfo(dtype).dtype
        return Result(
            x=None if b is None else jnp.zeros(b.shape, dtype),
            matrix=jnp.zeros((0, 0), dtype),
            logdet=jnp.zeros((), real),
            status=jnp.zeros((), jnp.int32),
            sign=jnp.ones((), dtype),
            pivots=jnp.zeros((0,), jnp.int32),
            placement=p.placement,
            user=p.user,
        )
    c = p.call
    if p.blocks is not None:
        out = _on_blocks(c, *p.blocks)
    elif p.ctx and traced(a, b, pivots):  # inside the caller's jit: no jit of jaxmg's own
        out = _pipeline(c)(a, b, pivots)
    elif traced(a, b, pivots):
        with _placement.mesh_scope(p.placement.mesh):
            out = _batchable(fn, a, b, pivots)
    else:  # concrete arrays: no transformation to serve, none of its cost
        with _placement.mesh_scope(p.placement.mesh):
            out = fn(a, b, pivots)
    return Result(
        x=out.x,
        matrix=out.work,
        logdet=out.logdet,
        status=out.status,
        sign=out.sign,
        pivots=out.pivots,
        s=out.s,
        placement=p.placement,
        user=p.user,
        tile=p.tile,
    )


def _global_standins(a_blk, b_blk, mesh, spec):
    """Stand-ins (ShapeDtypeStruct) of the global a and b whose blocks a call on blocks was
    given, and the matrix spec (default: the mesh's first two axes)."""
    if spec is None:
        names = mesh.axis_names
        spec = P(names[0], names[1] if len(names) > 1 else None)
    entries = tuple(spec) + (None,) * (2 - len(spec))
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True))

    def size(entry):
        names = entry if isinstance(entry, tuple) else (entry,)
        return int(np.prod([sizes[x] for x in names if x is not None]))

    if getattr(a_blk, "ndim", 0) != 2:
        raise ValueError(f"a's block must be 2-D, got shape {tuple(getattr(a_blk, 'shape', ()))}")
    rows, cols = size(entries[0]), size(entries[1])
    a = jax.ShapeDtypeStruct((a_blk.shape[0] * rows, a_blk.shape[1] * cols), a_blk.dtype)
    b = None
    if b_blk is not None:
        b = jax.ShapeDtypeStruct((b_blk.shape[0] * rows, *b_blk.shape[1:]), b_blk.dtype)
    return a, b, spec


def _on_blocks(c: _Call, a_blk, b_blk):
    """The call on this device's blocks, inside the caller's shard_map.

    Where that shard_map checks its types (check_vma=True: the blocks vary over manual axes),
    the engine's results, which the FFI call types alike on every device, are marked varying
    where they differ: the work array (V) like a, x's rows like b's; the scalars and the
    eigenvalues are the same on every device."""
    placement = c.placement
    a_axes = _vma(a_blk)
    b_axes = frozenset() if b_blk is None else _vma(b_blk)
    # a's axes of more than one device: the block's own (what its row and column mean).
    sized = frozenset(
        axis
        for axis, count in (
            (placement.row_axis, placement.mesh_rows),
            (placement.col_axis, placement.mesh_cols),
        )
        if axis is not None and count > 1
    )
    if a_axes or b_axes:
        _check_block_axes(c, a_axes, b_axes, sized)
    if b_blk is None:  # an unused right-hand side of one column
        b_blk = jnp.zeros((c.cols // placement.mesh_rows, 1), a_blk.dtype)
    b2 = b_blk.reshape(-1, 1) if c.b_ndim == 1 else b_blk
    piv_in = jnp.zeros((max(c.pivots_in, 1),), jnp.int32)
    out = _local(c)(a_blk, b2, piv_in)
    x, work = out.x, out.work
    if a_axes or b_axes:
        like_a = a_axes | sized
        work = None if work is None else _vary(work, like_a)
        if x is not None and c.routine.rhs_like_a:
            x = _vary(x, like_a)
        elif x is not None and _layout(c)[2] != P():  # rows like b's
            x = _vary(x, b_axes | (sized & {placement.row_axis}))
    x = x.reshape(-1) if c.b_ndim == 1 else x
    return out._replace(x=x, work=work)


def _check_block_axes(c: _Call, a_axes, b_axes, sized) -> None:
    """The blocks' manual axes (where the caller's shard_map checks types) against the call's:
    a must differ along each axis of its spec (of more than one device), and b (rows like a's,
    columns whole) must not differ along a's column axis, unless the routine takes b sharded
    like a. ValueError otherwise: the engine would read wrong blocks."""
    placement = c.placement
    missing = sorted(sized - a_axes)
    if missing:
        raise ValueError(
            f"a's block is the same on every device along mesh axis {missing[0]!r}, which its "
            f"spec {placement.matrix_spec} shards: pass a to the shard_map with in_specs "
            f"{placement.matrix_spec}"
        )
    col = placement.col_axis
    if not (c.routine.rhs_like_a or c.routine.second_matrix) and col in sized and col in b_axes:
        raise ValueError(
            f"b's block differs along a's column axis {col!r}: the engine takes b's rows split "
            f"like a's rows and its columns whole on every device; pass b to the shard_map "
            f"replicated over {col!r}, e.g. in_specs P({placement.row_axis!r}, None)"
        )


def _vma(x) -> frozenset:
    """The manual mesh axes x varies over (empty outside a shard_map checking types)."""
    aval = jax.typeof(x)
    manual = getattr(aval, "mat", None)  # (JAX 0.10; earlier: manual_axis_type, or vma)
    if manual is None:
        manual = getattr(aval, "manual_axis_type", None)
    axes = getattr(aval, "vma", ()) if manual is None else manual.varying
    return frozenset(axes or ())


def _vary(x, axes):
    """x typed as varying over the manual axes `axes` too (`jax.lax.pcast`; no data moves)."""
    missing = tuple(sorted(frozenset(axes) - _vma(x)))
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def _same_vma(*xs):
    """The FFI call's operands typed as varying over the same manual axes, as a shard_map that
    checks types requires of a primitive's operands (a no-op where none varies)."""
    axes = frozenset().union(*(_vma(x) for x in xs))
    return tuple(_vary(x, axes) for x in xs) if axes else xs


def traced(*xs) -> bool:
    """Whether any argument is a tracer (inside jit, grad, vmap, ...): the transformation
    rules are needed only then."""
    return any(isinstance(x, jax.core.Tracer) for x in xs)


def _batchable(fn, *args):
    """fn(*args), with a batching rule for jax.vmap: one call per batch element (each with the
    same plan: the elements have the shapes the plan was made for), results stacked."""
    present = [i for i, x in enumerate(args) if x is not None]

    def full(xs):
        out = [None] * len(args)
        for i, x in zip(present, xs, strict=True):
            out[i] = x
        return out

    @jax.custom_batching.custom_vmap
    def call(*xs):
        return fn(*full(xs))

    @call.def_vmap
    def _loop(axis_size, in_batched, *xs):
        outs = [
            call(*(x[k] if batched else x for x, batched in zip(xs, in_batched, strict=True)))
            for k in range(axis_size)
        ]
        stacked = jax.tree.map(lambda *parts: jnp.stack(parts), *outs)
        return stacked, jax.tree.map(lambda _: True, stacked)

    return call(*(args[i] for i in present))


def _thread_tag(a) -> int:
    """The calling thread's tag in the call agreement: a stable hash of its name for a call made
    outside jit (the processes' threads of the same name are paired; calls of different threads
    meet as an error on every process instead of mixing two systems), 0 inside a jitted function
    (its compiled program runs on whichever thread calls it)."""
    if isinstance(a, jax.core.Tracer):
        return 0
    return zlib.crc32(threading.current_thread().name.encode()) + 1


def check_operands(a, b=None) -> None:
    """The checks of a and b that need only their shapes and dtypes, on the arrays as given
    (before a transformation converts them: without jax_enable_x64 a float64 NumPy array
    becomes float32)."""
    n = _placement.check_square_matrix(a)
    dtype = _placement.check_dtype(a)
    if b is not None:
        _check_rhs(b, n, dtype)


def _matrix_spec(matrix_specs, in_specs):
    if in_specs is None:
        return matrix_specs
    if matrix_specs is not None:
        raise ValueError("pass either matrix_specs or in_specs, not both")
    return in_specs[0] if isinstance(in_specs, tuple | list) else in_specs


def _check_rhs(b, n: int, dtype: np.dtype) -> None:
    shape = tuple(b.shape)
    if len(shape) not in (1, 2) or shape[0] != n:
        raise ValueError(f"b must have shape ({n},) or ({n}, K) to match a, got {shape}")
    if np.dtype(b.dtype) != dtype:
        raise TypeError(
            f"b has dtype {np.dtype(b.dtype)} but a has {dtype}; cast with b.astype(a.dtype)"
        )


def _axis_index(axis):
    return jnp.int32(0) if axis is None else jax.lax.axis_index(axis).astype(jnp.int32)


@dataclass(frozen=True)
class _Call:
    """Everything a compiled call depends on (the key of its cache): the routine (its name and
    traits), the placements, and what the plan decided."""

    routine: EngineRoutine
    user: _placement.MatrixPlacement  # the placement of b and x (and of a, unless reads_factor)
    placement: _placement.MatrixPlacement  # the engine's placement of a
    n: int
    cols: int  # the columns of the matrix handed (M of a rectangular a, which is handed aᵀ)
    solution_cols: int  # columns of x when it is not shaped like b (rectangular routines)
    tile: int
    pad: bool
    redistribute: bool
    b_ndim: int
    donate: bool
    context: int | None
    check_symmetry: bool
    thread: int
    pivots_in: int
    pivots_out: int
    factor_order: int = 0  # the order of a padded factor's engine matrix (0: a's shape)
    ctx: bool = False  # the context form: the work array back, in a's shape and sharding
    config: _config.Config = _config.Config()  # algorithm choices, tuning, test hooks
    triangular: Triangular = Triangular()  # solve_triangular's options (CallAttrs)
    subset: tuple[int, int] = (0, 0)  # the eigensolvers' pairs lo <= i < hi ((0, 0): all)


@functools.cache
def _local(c: _Call):
    """The function one device runs on its blocks, (a_blk, b_blk, pivots) -> `EngineOutputs`:
    one FFI call, where the mesh's axes are manual (inside `_build`'s shard_map, or a caller's
    own). The call is the routine's family's (csrc/ffi/families.h; the family from the
    library's list, `_native.family`)."""
    placement, n = c.placement, c.n
    # MPI rank (= JAX process index, checked by _native.engine) of each mesh position; empty
    # when only the abstract mesh is known (inside jit): the engine then gathers the map.
    ranks = np.asarray(placement.process_ids or (), dtype=np.int64)
    target = _native.target(placement.platform, c.routine.name)
    family = _native.family(placement.platform, c.routine.name)
    # x: shaped like b, or n x solution_cols, its rows split like b's where they divide, else
    # whole on every device (_layout).
    transposed, _, x_spec, _ = _layout(c)
    rhs_procs = placement.mesh_cols if transposed else placement.mesh_rows
    x_split = x_spec != P()
    x_rows = n // rhs_procs if x_split else n
    # The call's attributes (csrc/ffi/families.h FfiAttrs), every family's the same.
    attrs = dict(
        n=np.int64(n),
        mesh_rows=np.int64(placement.mesh_rows),
        mesh_cols=np.int64(placement.mesh_cols),
        tile=np.int64(c.tile),
        pad=np.int64(c.pad),
        force_redistribute=np.int64(c.redistribute),
        transposed=np.int64(transposed),
        ranks=ranks,
        thread=np.int64(c.thread),
        check_symmetry=np.int64(c.check_symmetry),
        cols=np.int64(c.cols),
        config=_config.engine_attribute(c.config),
        lower=np.int64(c.triangular.lower),
        op=np.int64(c.triangular.op),
        unit_diagonal=np.int64(c.triangular.unit_diagonal),
        subset_lo=np.int64(c.subset[0]),
        subset_hi=np.int64(c.subset[1]),
        context=np.int64(c.context or 0),  # the GPU context's id (0 on CPUs)
    )

    def ffi(*results, alias=0):
        # The result that overwrites a (its index; None: none) aliases it (in place, or a copy
        # XLA makes).
        call = jax.ffi.ffi_call(
            target,
            results,
            has_side_effect=True,
            input_output_aliases={} if alias is None else {0: alias},
        )
        return lambda *operands, **kw: call(*_same_vma(*operands), **kw)

    one_call = _FAMILY_CALLS.get(family, _solve_call)

    def local(a_blk, b_blk, piv_in):
        position = jnp.stack([_axis_index(placement.row_axis), _axis_index(placement.col_axis)])

        def run(results, matrices, others=(), alias=0):
            return ffi(*results, alias=alias)(*matrices, position, *others, **attrs)

        return one_call(run, c, x_rows, a_blk, b_blk, piv_in)

    return local


# One FFI call per family (csrc/ffi/families.h): run(results, matrices, others, alias) makes it,
# with this device's mesh position between the matrices and the other operands. No
# zero-sized buffers in a call (XLA:GPU's compiler crashed on them): an unused operand or
# result has one element.


def _eigen_call(run, c, x_rows, a_blk, b_blk, piv_in):
    """w (n,) and the eigenvectors in a's place; b is the second matrix of sygvd."""
    n, dtype = c.n, a_blk.dtype
    b = b_blk if c.routine.second_matrix else jnp.zeros((1,), dtype)
    results = (jax.ShapeDtypeStruct((n,), dtype), _like(a_blk), _STATUS)
    w, vectors, st = run(results, (a_blk, b), alias=1)
    return EngineOutputs(x=w.reshape(n, 1), status=st, work=vectors)


def _svd_call(run, c, x_rows, a_blk, b_blk, piv_in):
    """U in a's place, s, and Vᴴ's rows when the routine has them (solution_cols: n)."""
    n, dtype = c.n, a_blk.dtype
    vh = jax.ShapeDtypeStruct((x_rows, n), dtype) if c.solution_cols == n else _one(dtype)
    results = (_like(a_blk), jax.ShapeDtypeStruct((x_rows,), dtype), vh, _STATUS)
    u, s, vh, st = run(results, (a_blk,))
    return EngineOutputs(x=vh, status=st, work=u, s=s)


def _polar_call(run, c, x_rows, a_blk, b_blk, piv_in):
    """Up in a's place and H's rows (when the routine has them)."""
    n, dtype = c.n, a_blk.dtype
    h = jax.ShapeDtypeStruct((x_rows, n), dtype) if c.solution_cols == n else _one(dtype)
    u, h, st = run((_like(a_blk), h, _STATUS), (a_blk,))
    return EngineOutputs(x=h, status=st, work=u)


def _product_call(run, c, x_rows, a_blk, b_blk, piv_in):
    """The product in a's sharding."""
    (prod,) = run((_like(a_blk),), (a_blk, b_blk))
    return EngineOutputs(work=prod)


def _solve_call(run, c, x_rows, a_blk, b_blk, piv_in):
    """The solve family (every other routine): the work array (the factor, in a's place
    unless the routine reads a kept factor or makes one of another order), x, log det, the
    status, the determinant's sign and the pivots."""
    placement, dtype = c.placement, a_blk.dtype
    if c.routine.reads_factor:
        work_shape = (1,)
    elif c.factor_order:
        work_shape = (c.factor_order // placement.mesh_rows, c.factor_order // placement.mesh_cols)
    else:
        work_shape = a_blk.shape
    x_shape = (x_rows, c.solution_cols) if c.solution_cols else b_blk.shape
    results = (
        jax.ShapeDtypeStruct(work_shape, dtype),
        jax.ShapeDtypeStruct(x_shape, b_blk.dtype),
        jax.ShapeDtypeStruct((), jnp.finfo(dtype).dtype),
        _STATUS,
        jax.ShapeDtypeStruct((), dtype),
        jax.ShapeDtypeStruct((max(c.pivots_out, 1),), jnp.int32),
    )
    alias = 0 if work_shape == a_blk.shape else None
    a_work, x, logdet, st, sign, piv_out = run(results, (a_blk, b_blk), (piv_in,), alias)
    return EngineOutputs(x, logdet, st, sign, piv_out, a_work)


_FAMILY_CALLS = {
    "eigen": _eigen_call,
    "svd": _svd_call,
    "polar": _polar_call,
    "product": _product_call,
}
_STATUS = jax.ShapeDtypeStruct((), jnp.int32)


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _one(dtype):
    return jax.ShapeDtypeStruct((1, 1), dtype)


def _layout(c: _Call):
    """(transposed, b's spec, x's spec, rows of b) of a call."""
    placement, user = c.placement, c.user
    transposed = placement is not user and placement != user
    rhs_procs = placement.mesh_cols if transposed else placement.mesh_rows
    x_split = c.n % rhs_procs == 0 and not c.routine.solution_whole
    rhs_spec = P(placement.col_axis, None) if transposed else placement.rhs_spec
    x_spec = rhs_spec if not c.solution_cols or x_split else P()
    if c.routine.second_matrix:
        rhs_spec = placement.matrix_spec
    if c.routine.rhs_like_a:
        rhs_spec = x_spec = placement.matrix_spec
    return transposed, rhs_spec, x_spec, c.cols


@functools.cache
def _build(c: _Call):
    """The call, jitted (a donated with c.donate)."""
    return jax.jit(_pipeline(c), donate_argnums=(0,) if c.donate else ())


@functools.cache
def _pipeline(c: _Call):
    """The call as a function of the global (a, b, pivots), not jitted: the engine's
    shard_map, the placements around it, and the results in the caller's shardings; traced
    with a's mesh as the context mesh (`placement.mesh_scope`)."""
    placement, user, n = c.placement, c.user, c.n
    local = _local(c)
    transposed, rhs_spec, x_spec, rhs_rows = _layout(c)
    transpose_here = transposed and not c.routine.reads_factor

    work_spec = P() if c.routine.reads_factor else placement.matrix_spec
    # b and x keep the caller's row sharding (over the engine mesh's columns when transposed):
    # resharding them would put an XLA collective before the call, which could pair with a
    # peer's unrelated collective. The engine reads them where they are.
    call = jax.shard_map(
        local,
        mesh=placement.mesh,
        in_specs=(placement.matrix_spec, rhs_spec, P()),
        out_specs=EngineOutputs(x_spec, P(), P(), P(), P(), work_spec, P(*tuple(x_spec)[:1])),
        check_vma=False,
    )

    def run(a, b, piv_in):
        with _placement.mesh_scope(placement.mesh):
            return _run(a, b, piv_in)

    def _run(a, b, piv_in):
        if b is None:  # an unused right-hand side of one column
            b = jnp.zeros((rhs_rows, 1), a.dtype)
        if piv_in is None:
            piv_in = jnp.zeros((max(c.pivots_in, 1),), jnp.int32)
        b2 = b.reshape(rhs_rows, 1) if c.b_ndim == 1 else b
        if c.routine.reads_factor:
            a = _placement.constrain(a, placement.mesh, placement.matrix_spec)
        else:
            a = _placement.constrain(a, user.mesh, user.matrix_spec)
        if transpose_here:  # aᵀ (aᴴ = a for symmetric routines), sharded the other way
            a = _adjoint_mod.transpose(a, conjugate=c.routine.symmetric)
            a = _placement.constrain(a, placement.mesh, placement.matrix_spec)
        b2 = _placement.constrain(b2, placement.mesh, rhs_spec)
        out = call(a, b2, piv_in)
        x, a_work = out.x, out.work
        if c.routine.rhs_like_a:
            x = _placement.constrain(x, user.mesh, user.matrix_spec)
        elif x_spec == rhs_spec:
            x = _placement.constrain(x, user.mesh, user.rhs_spec)
        x = x.reshape(n) if c.b_ndim == 1 else x
        if c.routine.returns_matrix and not transposed and not c.factor_order:
            a_work = _placement.constrain(a_work, user.mesh, user.matrix_spec)
        elif (c.routine.returns_matrix or c.ctx) and c.solution_cols:
            # a rectangular routine's matrix (handed aᵀ): back to a's shape and sharding
            a_work = _placement.constrain(a_work.T, user.mesh, user.matrix_spec)
        elif c.ctx and not c.routine.reads_factor:
            a_work = _placement.constrain(a_work, user.mesh, user.matrix_spec)
        # With donation, returning the overwritten matrix lets XLA reuse a's buffer in place.
        keep = c.donate or c.routine.returns_matrix or c.ctx
        return out._replace(x=x, work=a_work if keep else None)

    return run


# The status of a symmetric routine whose matrix is not symmetric (Hermitian) (csrc/routines/).
NOT_SYMMETRIC = -1


def solve_blocks(routine: EngineRoutine, a, b, *, return_logdet=False, return_status=False, **kw):
    """A solve routine on this device's blocks inside the caller's shard_map (call(...,
    blocks=True)), with the routines' return structure."""
    r = call(routine, a, b, blocks=True, **kw)
    return assemble(
        r.x, r.logdet, r.status, return_logdet=return_logdet, return_status=return_status
    )


def assemble(x, logdet, status, *, return_logdet: bool, return_status: bool):
    """(x[, logdet][, status]): the routines' fixed return structure."""
    out = (x,)
    if return_logdet:
        out += (logdet,)
    if return_status:
        out += (status,)
    return out[0] if len(out) == 1 else out
