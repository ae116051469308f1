"""Resolving where a matrix lives: its mesh, its partition spec and the process grid behind it.

Every check here runs in Python before tracing, identically on every process, and raises
ValueError/TypeError with a message that says what to change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import warnings
from dataclasses import dataclass

import jax
import numpy as np
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxmg._core import config as _config

SUPPORTED_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)

# Where padding a matrix whose order does not divide over the mesh is explained.
PADDING_DOCS = "docs/bigmatrix.md#padding"

# Default tile targets per engine: ScaLAPACK likes small tiles, cuSOLVERMp large ones.
TILE_TARGET = {"cpu": 128, "cuda": 1024}


@dataclass(frozen=True)
class MatrixPlacement:
    """A square matrix's mesh, the mesh axes over its rows and columns, and the process grid."""

    mesh: Mesh | AbstractMesh
    row_axis: str | None
    col_axis: str | None
    mesh_rows: int
    mesh_cols: int
    platform: str  # "cpu" or "cuda"
    # JAX process and device id of mesh position (u, v), row-major; None for an abstract mesh
    # (inside jit), whose process map the engine then discovers when it runs.
    process_ids: tuple[int, ...] | None
    device_ids: tuple[int, ...] | None

    @property
    def matrix_spec(self) -> P:
        return P(self.row_axis, self.col_axis)

    @property
    def rhs_spec(self) -> P:
        return P(self.row_axis, None)


def _find_mesh(a, mesh):
    """The mesh of `a`: concrete (with devices) where it can be known, else abstract (in jit)."""
    if mesh is not None:
        if not isinstance(mesh, Mesh | AbstractMesh):
            raise TypeError(
                f"mesh must be a jax.sharding.Mesh (e.g. from jax.make_mesh), got {type(mesh)}"
            )
        return mesh
    if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
        sharding = getattr(a, "sharding", None)
        if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh):
            return sharding.mesh
    else:
        try:
            sharding = jax.typeof(a).sharding
        except Exception:  # noqa: BLE001 - abstract values without a sharding
            sharding = None
        if isinstance(sharding, NamedSharding) and not sharding.mesh.empty:
            return sharding.mesh
    try:
        context = jax.sharding.get_mesh()
    except ValueError:  # inside jit: only the abstract mesh is visible
        context = jax.sharding.get_abstract_mesh()
    if context is not None and not context.empty:
        return context
    raise ValueError(
        "jaxmg needs the device mesh of the matrix: pass mesh=..., place the matrix with "
        "jax.device_put(a, NamedSharding(mesh, P(rows_axis, cols_axis))), or call "
        "jax.set_mesh(mesh) first."
    )


def _spec_of(a) -> P | None:
    sharding = None
    if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
        sharding = getattr(a, "sharding", None)
    else:
        try:
            sharding = jax.typeof(a).sharding
        except Exception:  # noqa: BLE001 - abstract values without a sharding
            sharding = None
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (2 - len(sharding.spec))
        if any(s is not None for s in spec):
            return P(*spec)
    return None


def _axis_name(entry, what: str, mesh: Mesh) -> str | None:
    if entry is None:
        return None
    if isinstance(entry, tuple):
        if len(entry) == 1:
            entry = entry[0]
        else:
            raise ValueError(
                f"the matrix {what} are sharded over several mesh axes {entry}; jaxmg shards each "
                "matrix dimension over at most one mesh axis: reshape the mesh so one axis "
                f"covers the {what}."
            )
    if entry not in mesh.axis_names:
        raise ValueError(
            f"the matrix spec names mesh axis {entry!r}, which the mesh {mesh.axis_names} "
            "does not have."
        )
    return entry


def _check_same_layout(given: P, actual: P, mesh) -> None:
    """A matrix_specs that disagrees with a's own sharding is an error: honouring it would move
    the whole matrix between devices before the call."""
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True))

    def norm(spec):
        entries = tuple(spec) + (None,) * (2 - len(spec))
        out = []
        for e in entries[:2]:
            names = e if isinstance(e, tuple) else (e,)
            out.append(tuple(x for x in names if x is not None and sizes.get(x, 1) > 1))
        return tuple(out)

    if norm(given) != norm(actual):
        raise ValueError(
            f"matrix_specs {given} disagrees with the sharding of a, {actual}: jaxmg would have "
            "to move the whole matrix. Pass a's own spec (or leave matrix_specs out), or place "
            "a as the spec says first (jax.device_put(a, NamedSharding(mesh, spec)))."
        )


def resolve_placement(a, mesh=None, spec=None) -> MatrixPlacement:
    """Finds the mesh, row/column axes and process grid of the square matrix `a`."""
    mesh = _find_mesh(a, mesh)
    actual = _spec_of(a)
    if spec is not None and actual is not None and isinstance(spec, P):
        _check_same_layout(spec, actual, mesh)
    if spec is None:
        spec = actual
    if spec is None:
        names = mesh.axis_names
        spec = P(names[0], names[1] if len(names) > 1 else None)
    if not isinstance(spec, P):
        raise TypeError(f"the matrix spec must be a PartitionSpec, got {spec!r}")
    entries = tuple(spec) + (None,) * (2 - len(spec))
    if len(entries) != 2:
        raise ValueError(f"the matrix spec must have 2 entries (rows, columns), got {spec}")
    row_axis = _axis_name(entries[0], "rows", mesh)
    col_axis = _axis_name(entries[1], "columns", mesh)
    if row_axis is not None and row_axis == col_axis:
        raise ValueError(f"rows and columns are both sharded over mesh axis {row_axis!r}")
    shape = dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True))
    unused = [n for n in mesh.axis_names if n not in (row_axis, col_axis) and shape[n] > 1]
    if unused:
        raise ValueError(
            f"mesh axes {unused} are not used by the matrix spec {spec} but have more than one "
            "device; jaxmg solves one matrix per call: use a mesh whose other axes have size 1."
        )
    mesh_rows, mesh_cols = shape.get(row_axis, 1), shape.get(col_axis, 1)
    if isinstance(mesh, Mesh):
        devices = device_grid(mesh, row_axis, col_axis)
        platforms = {d.platform for d in devices.flat}
        if len(platforms) != 1:
            raise ValueError(f"the mesh mixes device platforms {sorted(platforms)}")
        platform = platforms.pop()
        process_ids = tuple(int(d.process_index) for d in devices.flat)
        device_ids = tuple(int(d.id) for d in devices.flat)
    else:
        platform = mesh.abstract_device.platform if mesh.abstract_device else jax.default_backend()
        if mesh_rows * mesh_cols != jax.device_count():
            raise ValueError(
                "inside jax.jit jaxmg only sees the abstract mesh; a mesh over a subset of the "
                "devices needs its concrete mesh: pass mesh=... to the jaxmg call."
            )
        process_ids = device_ids = None
    if platform == "gpu":
        platform = "cuda"
    if platform not in TILE_TARGET:
        raise ValueError(f"jaxmg has no engine for {platform} devices (supported: cpu, cuda)")
    return MatrixPlacement(
        mesh=mesh,
        row_axis=row_axis,
        col_axis=col_axis,
        mesh_rows=mesh_rows,
        mesh_cols=mesh_cols,
        platform=platform,
        process_ids=process_ids,
        device_ids=device_ids,
    )


def device_grid(mesh: Mesh, row_axis: str | None, col_axis: str | None) -> np.ndarray:
    """The devices of mesh positions (u, v) (u along row_axis, v along col_axis), as a 2-D array.

    Mesh axes other than the two have size 1 (checked by resolve_placement).
    """
    order = [mesh.axis_names.index(x) for x in (row_axis, col_axis) if x is not None]
    rest = [i for i in range(len(mesh.axis_names)) if i not in order]
    shape = dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))
    return np.transpose(mesh.devices, order + rest).reshape(
        shape.get(row_axis, 1), shape.get(col_axis, 1)
    )


def transposed(placement: MatrixPlacement) -> MatrixPlacement:
    """The placement of aᵀ: the mesh axes over rows and columns swapped."""

    def swap(ids):
        if ids is None:
            return None
        return tuple(np.asarray(ids).reshape(placement.mesh_rows, placement.mesh_cols).T.flat)

    return dataclasses.replace(
        placement,
        row_axis=placement.col_axis,
        col_axis=placement.row_axis,
        mesh_rows=placement.mesh_cols,
        mesh_cols=placement.mesh_rows,
        process_ids=swap(placement.process_ids),
        device_ids=swap(placement.device_ids),
    )


def constrain(x, mesh: Mesh, spec: P):
    """Places x (inside jit) with `spec`: a reshard on Explicit mesh axes, a constraint on Auto.
    Under another context mesh too (`mesh_scope`)."""
    sharding = NamedSharding(mesh, spec)
    types = dict(zip(mesh.axis_names, mesh.axis_types, strict=True))
    names = [name for name in spec if name is not None]
    # Replicated (P()) on a mesh with Explicit axes: a reshard too (the constraint would assert).
    axes = names or list(mesh.axis_names)
    with mesh_scope(mesh):
        if any(types[name] == AxisType.Explicit for name in axes):
            return jax.reshard(x, sharding)
        return jax.lax.with_sharding_constraint(x, sharding)


def constrain_divisible(x, placement, shape):
    """x in the placement's matrix spec where its extents `shape` (rows, cols) divide over the
    mesh; x as it is otherwise."""
    rows, cols = shape
    if rows % placement.mesh_rows == 0 and cols % placement.mesh_cols == 0:
        return constrain(x, placement.mesh, placement.matrix_spec)
    return x


@contextlib.contextmanager
def mesh_scope(mesh):
    """Makes `mesh` (its abstract mesh) the context mesh while jaxmg traces its own shard_map
    and placements, where the caller's context mesh is another one (`jax.set_mesh(other)`,
    `jax.sharding.use_abstract_mesh(...)`): JAX requires a shard_map's mesh to match the
    context mesh. A no-op where no context mesh is set or it is this one, and inside the
    caller's shard_map (`manual_mesh`), whose manual axes the call on blocks names."""
    abstract = mesh if isinstance(mesh, AbstractMesh) else mesh.abstract_mesh
    current = jax.sharding.get_abstract_mesh()
    if current is None or current.empty or current == abstract or manual_mesh() is not None:
        yield
        return
    setter = None
    if isinstance(mesh, Mesh):  # outside jit, the concrete mesh (eager operations need it)
        try:
            setter = jax.set_mesh(mesh)
        except ValueError:  # inside jit: the abstract mesh
            setter = None
    if setter is not None:
        with setter:
            yield
        return
    with jax.sharding.use_abstract_mesh(abstract):
        yield


def manual_mesh() -> AbstractMesh | None:
    """The context mesh inside the caller's `jax.shard_map` (some of its axes Manual: the arrays
    there are this device's blocks), else None."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh is None or mesh.empty:
        return None
    if any(t == AxisType.Manual for t in mesh.axis_types):
        return mesh
    return None


def explicit_axes(placement: MatrixPlacement) -> bool:
    """Whether the matrix's mesh axes are Explicit: its sharding is then part of the type of
    the arrays placed over them, inside jit too."""
    types = dict(zip(placement.mesh.axis_names, placement.mesh.axis_types, strict=True))
    axes = [x for x in (placement.row_axis, placement.col_axis) if x is not None]
    return bool(axes) and all(types[x] == AxisType.Explicit for x in axes)


def scope_of(a, mesh=None):
    """`mesh_scope` of a's mesh (`mesh`, else its sharding's, else the context's), or a
    no-op where none can be found (the routine's own checks then say what is missing)."""
    try:
        found = _find_mesh(a, mesh)
    except (TypeError, ValueError):
        return contextlib.nullcontext()
    return mesh_scope(found)


def known_spec(x) -> P | None:
    """The PartitionSpec of x where it is known: a concrete array's NamedSharding, or inside
    jit the type's sharding on a mesh of Explicit axes (Auto axes are not part of the type:
    None). Padded to x's rank."""
    sharding = None
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        sharding = getattr(x, "sharding", None)
    else:
        try:
            sharding = jax.typeof(x).sharding
        except Exception:  # noqa: BLE001 - abstract values without a sharding
            sharding = None
        if isinstance(sharding, NamedSharding) and not all(
            t == AxisType.Explicit for t in sharding.mesh.axis_types
        ):
            sharding = None
    if not isinstance(sharding, NamedSharding) or sharding.mesh.empty:
        return None
    entries = tuple(sharding.spec) + (None,) * (len(getattr(x, "shape", ())) - len(sharding.spec))
    return P(*entries)


def known_replicated(x) -> bool:
    """Whether x is known to be replicated over its mesh (every entry of its spec None)."""
    spec = known_spec(x)
    return spec is not None and all(entry is None for entry in spec)


def place_like(x, b, mesh):
    """x (a solution, or an array shaped like b) in b's own sharding where it is known
    (`known_spec`) and x's extents divide over it; replicated when b is; else as it is."""
    spec = known_spec(b)
    if spec is None:
        return x
    if all(entry is None for entry in spec):
        return constrain(x, mesh, P())
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True))
    for extent, entry in zip(x.shape, spec, strict=False):
        names = entry if isinstance(entry, tuple) else (entry,)
        count = int(np.prod([sizes.get(name, 1) for name in names if name is not None]))
        if extent % count:
            return x
    return constrain(x, mesh, P(*spec[: x.ndim]))


def check_flags(**flags) -> None:
    """Each flag a Python (or NumPy) bool: TypeError naming the argument otherwise (a traced
    value, a string or None would silently pick a branch)."""
    for name, value in flags.items():
        if not isinstance(value, bool | np.bool_):
            raise TypeError(
                f"{name} must be a Python bool (True or False), got {value!r} "
                f"({type(value).__name__})"
            )


def check_square_matrix(a, what: str = "a") -> int:
    shape = tuple(a.shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{what} must be a square 2-D matrix, got shape {shape}")
    return shape[0]


def check_tall_matrix(a, what: str = "a") -> tuple[int, int]:
    """(M, N) of a 2-D matrix with M >= N >= 1."""
    shape = tuple(a.shape)
    if len(shape) != 2:
        raise ValueError(f"{what} must be a 2-D matrix, got shape {shape}")
    m, n = shape
    if m < n:
        raise ValueError(
            f"{what} is {m} x {n}, wider than tall: this routine takes M >= N (factor the "
            f"transpose, {what}.T, for a wide matrix)"
        )
    if n == 0:
        raise ValueError(f"{what} has no columns (shape {shape})")
    return m, n


def check_dtype(a, what: str = "a") -> np.dtype:
    dtype = np.dtype(a.dtype)
    if dtype.type not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{what} has dtype {dtype}; jaxmg supports float32, float64, complex64 and complex128 "
            f"(cast with {what}.astype(jnp.float64), for example)"
        )
    return dtype


def check_divisible(n: int, placement: MatrixPlacement, cols: int | None = None) -> None:
    """n rows (and `cols` columns, n when None) divisible by the devices over them; else a
    ValueError that says what to pad to, and how (docs/bigmatrix.md#padding)."""
    multiple = int(np.lcm(placement.mesh_rows, placement.mesh_cols))
    square = cols is None
    for extent, count, axis, name in (
        (n, placement.mesh_rows, "rows", placement.row_axis),
        (n if square else cols, placement.mesh_cols, "columns", placement.col_axis),
    ):
        if extent % count:
            to = multiple if square else count
            padded = -(-extent // to) * to
            where = f"the {count} devices over its {axis} (mesh axis {name!r})"
            if square:
                raise ValueError(
                    f"the matrix order {extent} is not divisible by {where}; pad the matrix to "
                    f"a multiple of {to} (here {padded}): A as [[A, 0], [0, I]] with an "
                    f"identity block, b with zero rows; x's first {extent} rows are the "
                    f"solution and log det is unchanged (see {PADDING_DOCS})"
                )
            raise ValueError(
                f"the {extent} matrix {axis} are not divisible by {where}; pad the matrix's "
                f"{axis} to a multiple of {to} (here {padded}) (see {PADDING_DOCS})"
            )


def check_cpu_placement(placement: MatrixPlacement) -> None:
    ids = placement.process_ids
    if (ids is not None and len(set(ids)) != len(ids)) or jax.local_device_count() != 1:
        raise ValueError(
            "the CPU engine runs one device per process, but this mesh has several devices of one "
            "process; launch one process per device (mpirun -n N, or python -m jaxmg launch -n N)"
        )


def choose_tile(
    n: int,
    placement: MatrixPlacement,
    tile: int | None,
    pad: bool,
    symmetric: bool = True,
    target: int | None = None,
) -> int:
    """The block-cyclic tile: `tile` checked, or a default that avoids padding (near `target`,
    default TILE_TARGET's).

    Relabeled plans (docs/layout.md) cut each dimension into lcm(mesh rows, mesh cols) pieces
    (`shard` below), each padded to a multiple of the tile. Symmetric routines relabel when one
    mesh dimension divides the other; general routines always do.
    """
    big = max(placement.mesh_rows, placement.mesh_cols)
    small = min(placement.mesh_rows, placement.mesh_cols)
    relabel = big % small == 0 or not symmetric
    shard = n // int(np.lcm(big, small))
    if tile is not None:
        if isinstance(tile, bool) or not isinstance(tile, int | np.integer) or tile <= 0:
            raise ValueError(f"T_A must be a positive integer, got {tile!r}")
        tile = int(tile)
        if relabel and not pad and shard % tile:
            divisors = [d for d in range(1, shard + 1) if shard % d == 0 and d <= tile]
            raise ValueError(
                f"T_A={tile} does not divide the shard size {shard} (= {n} / {big}) and pad=False; "
                f"use a divisor of {shard} such as {divisors[-1]}, or pass pad=True"
            )
        # A tile larger than the shard only adds padding.
        return min(tile, n) if not relabel else min(tile, shard)
    if target is None:
        target = TILE_TARGET[placement.platform]
        if placement.platform == "cuda" and n >= 65536:
            target = 2048  # measured on 2 x H200 at N = 65536: 2048 beats 1024 by 2-7 %
    if not relabel:
        # Redistributed: every process holds at least two tiles (cuSOLVERMp's eigensolvers
        # were reported to hang, not fail, on 1 x P and P x 1 grids of one tile per process).
        return max(1, min(target, n // (2 * big)))
    if shard <= target:
        return shard
    divisors = [d for d in range(target // 4, target + 1) if d > 0 and shard % d == 0]
    if divisors:
        return divisors[-1]
    if pad:
        return target
    return max(d for d in range(1, target + 1) if shard % d == 0)


def choose_rectangular_tile(
    m: int, n: int, placement: MatrixPlacement, tile: int | None, pad: bool, redistribute: bool
) -> int:
    """The tile of a routine on an M x N matrix (M >= N) whose columns keep their order (QR):
    `tile` checked, or a default that avoids padding. Relabeled, the rows are cut into one piece
    per device over them (M / mesh rows) and the N columns are one piece padded at its end, so
    the default divides both where it can; redistributed, nothing is padded."""
    target = TILE_TARGET[placement.platform]
    piece = m // placement.mesh_rows
    if tile is not None:
        if isinstance(tile, bool) or not isinstance(tile, int | np.integer) or tile <= 0:
            raise ValueError(f"T_A must be a positive integer, got {tile!r}")
        tile = int(tile)
        if not redistribute and not pad and (piece % tile or n % tile):
            common = [d for d in range(1, min(piece, n) + 1) if piece % d == 0 and n % d == 0]
            raise ValueError(
                f"T_A={tile} does not divide both the row shard {piece} and the {n} columns and "
                f"pad=False; use a common divisor such as {common[-1]}, or pass pad=True"
            )
        return min(tile, n) if redistribute else min(tile, piece, n)
    if redistribute:  # at least two tiles per process along the longer grid axis (below)
        return max(1, min(target, n // (2 * max(placement.mesh_rows, placement.mesh_cols))))
    top = min(target, piece, n)
    common = [d for d in range(1, top + 1) if piece % d == 0 and n % d == 0]
    if common[-1] >= top // 4 or not pad:
        return common[-1]  # no padding
    return top


class ReplicatedMatrixWarning(UserWarning):
    """A routine was handed a matrix held whole on every device of a mesh of several
    (replicated), larger than `jaxmg.config.replicated_warning_bytes` (default 1 GiB).

    The call works, but each device holds the whole matrix instead of its shard: shard it over
    the mesh, rows and columns, built where it lies (docs/bigmatrix.md). Python shows it once
    per line of the caller's code that makes the call. Silence it with
    `jaxmg.config.update("replicated_warning_bytes", 0)` or `warnings.filterwarnings("ignore",
    category=jaxmg.ReplicatedMatrixWarning)`.
    """


def replicated_devices(x) -> int:
    """How many devices hold the whole of x, where that is known and more than one: a placed
    array with a fully replicated sharding, a traced one whose type (Explicit mesh axes) says
    it is replicated, or host data (NumPy), which jax.jit copies to every device; else 0."""
    if isinstance(x, np.ndarray):
        devices = jax.device_count()
    elif isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        sharding = getattr(x, "sharding", None)
        if sharding is None or not sharding.is_fully_replicated:
            return 0
        devices = len(sharding.device_set)
    else:
        spec = known_spec(x)
        if spec is None or any(entry is not None for entry in spec):
            return 0
        devices = int(np.prod(jax.typeof(x).sharding.mesh.axis_sizes))
    return devices if devices > 1 else 0


# jaxmg's own source files, less the launcher's (which runs the user's script).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LAUNCHER = os.path.join(_PACKAGE, "cli") + os.sep


def _ours(frame) -> bool:
    path = os.path.abspath(frame.f_code.co_filename)
    return path.startswith(_PACKAGE) and not path.startswith(_LAUNCHER)


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def warn_if_replicated(**arrays) -> None:
    """A `ReplicatedMatrixWarning` for each named matrix held whole on several devices
    (`replicated_devices`) and larger than the configuration's `replicated_warning_bytes`
    (0: never), attributed to the
    line of the caller's code that called jaxmg. A call made by jaxmg itself (a derivative
    rule's) does not warn again. Python only: runs before any collective."""
    threshold = _config.current().replicated_warning_bytes
    if threshold <= 0:
        return
    for name, x in arrays.items():
        if x is None or getattr(x, "ndim", 0) != 2:
            continue
        nbytes = int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
        if nbytes <= threshold:
            continue
        devices = replicated_devices(x)
        if not devices:
            continue
        # The first frame outside jaxmg is the caller's; jaxmg frames beyond it make this a
        # call of jaxmg's own (from a derivative rule, traced by JAX).
        frame, level = sys._getframe(0), 1
        while frame is not None and _ours(frame):
            frame, level = frame.f_back, level + 1
        outer = frame.f_back if frame is not None else None
        while outer is not None:
            if _ours(outer):
                return
            outer = outer.f_back
        rows, cols = x.shape
        warnings.warn(
            f"jaxmg: the matrix {name}, {rows} x {cols} {np.dtype(x.dtype).name} "
            f"({_size(nbytes)}), is replicated: each of the {devices} devices holds all of it, "
            f"where sharded each would hold 1/{devices}. Shard it over the mesh, rows and "
            "columns (NamedSharding(mesh, P(rows_axis, cols_axis))), and build it where it "
            "lies: jax.make_array_from_callback, or inside jax.jit (see docs/bigmatrix.md). "
            "jaxmg.config replicated_warning_bytes (JAXMG_REPLICATED_WARNING_BYTES) sets "
            "this warning's threshold; 0 turns it off.",
            ReplicatedMatrixWarning,
            stacklevel=level,
        )
