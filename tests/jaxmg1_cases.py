"""JAXMg 1.4.1's test cases, re-expressed for jaxmg: code written for JAXMg runs unchanged.

The runner cases of JAXMg's GPU tests (solve layouts: row- and column-major process grids,
padded and unpadded tiles, right-hand sides replicated, row-sharded, 2-D sharded, vectors and
single columns, Explicit mesh axes, one-axis meshes; the public, inferred, abstract-mesh,
context and shard_map interfaces; failures), its public-API checks (names, signatures, return
structures, flags, replicated inputs, a foreign context mesh) and every example
(examples/run_*.py, whose `run()` is called here). Values are compared with NumPy with
tolerances scaled by n * eps of the dtype, and output shardings are asserted.

One module for both workers: tests/mp/jaxmg1_worker.py (CPU processes under mpirun) and
tests/gpu/jaxmg1_gpu.py (GPUs). `run_all()` runs every case in this process and returns the
records; every process runs the same cases in the same order.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# JAXMg 1.4.1's public names and the parameters of each function, in order.
JAXMG1_SIGNATURES = {
    "potrs": (
        "a b T_A mesh matrix_specs in_specs return_status return_logdet pad donate",
        "potrs_shardmap_ctx",
        "a b T_A mesh matrix_specs in_specs return_logdet pad",
    ),
    "lu_solve": (
        "a b T_A mesh matrix_specs in_specs return_status pad donate",
        "lu_solve_shardmap_ctx",
        "a b T_A mesh matrix_specs in_specs pad",
    ),
    "syevd": (
        "a T_A mesh matrix_specs in_specs return_eigenvectors return_status pad donate",
        "syevd_shardmap_ctx",
        "a T_A mesh matrix_specs in_specs return_eigenvectors pad",
    ),
    "qr": (
        "a T_A mesh matrix_specs in_specs return_status pad donate",
        "qr_shardmap_ctx",
        "a T_A mesh matrix_specs in_specs pad",
    ),
    "least_squares": (
        "a b T_A mesh matrix_specs in_specs return_status pad donate",
        "least_squares_shardmap_ctx",
        "a b T_A mesh matrix_specs in_specs pad",
    ),
    "gesvd": (
        "a T_A mesh matrix_specs in_specs compute_u compute_vh full_matrices return_status pad "
        "donate",
        "gesvd_shardmap_ctx",
        "a T_A mesh matrix_specs in_specs compute_u compute_vh full_matrices pad",
    ),
    "polar": (
        "a T_A mesh matrix_specs in_specs compute_h return_status pad donate",
        "polar_shardmap_ctx",
        "a T_A mesh matrix_specs in_specs compute_h pad",
    ),
}
JAXMG1_NAMES = sorted(
    [*JAXMG1_SIGNATURES, *(v[1] for v in JAXMG1_SIGNATURES.values()), "device_supports_vmm"]
)

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


# ---------------------------------------------------------------------------------------------
# Sizes, meshes, data


class Env:
    """The run's platform and process count, and its sizes: JAXMg's on GPUs (tiles 64 and 96,
    N >= 512), smaller ones on CPUs (tiles 8 and 12, N >= 48)."""

    def __init__(self):
        self.procs = jax.process_count()
        self.devices = jax.device_count()
        self.platform = jax.devices()[0].platform
        gpu = self.platform == "gpu"
        self.tile = 64 if gpu else 8
        self.pad_tile = 96 if gpu else 12
        self.start = 512 if gpu else 48


def balanced(count: int) -> tuple[int, int]:
    """JAXMg's balanced process grid: rows >= cols, as square as the count allows."""
    cols = max(d for d in range(1, int(math.isqrt(count)) + 1) if count % d == 0)
    return count // cols, cols


def first_n(env: Env, rows: int, cols: int, tile: int, padded: bool) -> int:
    """A matrix order for the grid and tile: divisible by the grid; with `padded`, one whose
    shards the tile does not divide, every process owning tiles; else one of whole tiles."""
    divisor = math.lcm(rows, cols)
    if not padded:
        whole = math.lcm(divisor, tile * divisor)
        return max(whole, -(-env.start // whole) * whole)
    for n in range(env.start, 64 * env.start):
        if n % divisor:
            continue
        owns = -(-n // tile) >= max(rows, cols)
        if owns and (n // rows % tile or n // cols % tile):
            return n
    raise ValueError("no padded size")


def mesh_of(rows, cols, *, order="row_major", explicit=False, names=("pr", "pc")):
    devices = np.asarray(jax.devices(), dtype=object)
    if order == "row_major":
        grid = devices.reshape(rows, cols)
    elif order == "column_major":
        grid = devices.reshape(cols, rows).T
    else:  # neither row- nor column-major: the first two devices swapped
        flat = devices.copy()
        if flat.size > 1:
            flat[[0, 1]] = flat[[1, 0]]
        grid = flat.reshape(rows, cols)
    types = (AxisType.Explicit if explicit else AxisType.Auto,) * 2
    return Mesh(grid, names, axis_types=types)


def one_axis_mesh(name="x"):
    return Mesh(np.asarray(jax.devices(), dtype=object), (name,))


def spd(n, dtype, seed):
    """JAXMg's Hermitian positive-definite test matrix: X Xᴴ + n I."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x @ x.conj().T + n * np.eye(n)).astype(dtype)


def general(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x + np.sqrt(n) * np.eye(n)).astype(dtype)


def tall(m, n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((m, n))
    return x.astype(dtype)


def rhs(n, k, dtype):
    """JAXMg's right-hand side: 1..n*k by rows (with an imaginary part for complex)."""
    values = np.arange(1, n * k + 1, dtype=np.float64).reshape(n, k) / (n * k)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 0.25j * values
    return values.astype(dtype)


def place(x, mesh, spec):
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda i: x[i])


def owned(x):
    """x copied into a buffer of XLA's own: a placed NumPy array may share the host's memory
    on CPUs, which XLA cannot reuse for a donated input."""
    return jax.jit(jnp.copy)(x)


def gather(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def scalar(x):
    return np.asarray(x.addressable_data(0)).item()


def eps(dtype):
    return float(np.finfo(dtype).eps)


def sharded_as(x, mesh, spec) -> bool:
    return bool(x.sharding.is_equivalent_to(NamedSharding(mesh, spec), x.ndim))


def solve_error(a, x, b):
    """‖A X − B‖ / (n ‖A‖ ‖X‖) in complex128, and its tolerance 10 eps."""
    a64, x64, b64 = (np.asarray(m, dtype=np.complex128) for m in (a, x, b))
    n = a.shape[0]
    resid = np.linalg.norm(a64 @ x64 - b64) / (
        n * np.linalg.norm(a64, 2) * max(np.linalg.norm(x64), 1e-300)
    )
    return float(resid), 10 * eps(a.dtype)


def pointer(x):
    return x.addressable_data(0).unsafe_buffer_pointer()


# ---------------------------------------------------------------------------------------------
# The registry

CASES: list[tuple[str, object]] = []


def case(name):
    def register(fn):
        CASES.append((name, fn))
        return fn

    return register


def run_all(select=None, on_record=None):
    """Runs every case (or those whose name contains one of `select`'s "|"-separated parts);
    returns the records (`on_record(records)` after each: progress, a partial result)."""
    env = Env()
    records = []
    for name, fn in CASES:
        if select and not any(part in name for part in select.split("|")):
            continue
        start = time.perf_counter()
        try:
            rec = fn(env) or {}
            rec = {"case": name, **rec}
            rec["ok"] = bool(rec.get("ok", False))
            rec["seconds"] = round(time.perf_counter() - start, 2)
        except Exception as ex:  # noqa: BLE001 - recorded, asserted by the test
            rec = {
                "case": name,
                "ok": False,
                "exception": f"{type(ex).__name__}: {ex}"[:2000],
                "trace": traceback.format_exc()[-3000:],
            }
        records.append(rec)
        if on_record is not None:
            on_record(records)
    return records


def check(ok, **values):
    return {"ok": bool(ok), **{k: _plain(v) for k, v in values.items()}}


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, P):
        return str(v)
    return v


# ---------------------------------------------------------------------------------------------
# Solve layouts (JAXMg's solver_case) for potrs and lu_solve

# name -> (grid, tile kind, padded, nrhs rule, rhs mode, explicit axes)
LAYOUTS = {
    "row_major_no_padding": ("row", "tile", False, "cols", "matrix_2d_sharded", False),
    "column_major_padding": ("balanced_cm", "pad", True, "max2cols", "matrix_2d_sharded", False),
    "column_grid_padding": ("column", "pad", True, "one", "matrix_2d_sharded", False),
    "column_grid_no_padding": ("column", "tile", False, "one", "matrix_row_sharded", False),
    "skinny_rhs": ("row", "tile", False, "one", "matrix_row_sharded", False),
    "skinny_rhs_explicit_mesh": ("row", "tile", False, "one", "matrix_row_sharded", True),
    "vector_rhs_replicated": ("row", "tile", False, "one", "vector_replicated", False),
    "single_column_rhs_replicated": ("row", "tile", False, "one", "matrix_replicated", False),
    "single_column_rhs_row_sharded": (
        "balanced",
        "tile",
        False,
        "one",
        "matrix_row_sharded",
        False,
    ),
    "documented_degenerate_rhs": ("column", "tile", False, "one", "matrix_row_sharded", False),
}


def layout(env, name):
    """(mesh, matrix spec, n, tile, nrhs, rhs spec, vector, explicit) of a named layout."""
    grid, tile_kind, padded, nrhs_rule, rhs_mode, explicit = LAYOUTS[name]
    p = env.devices
    order = "row_major"
    if grid == "row":
        rows, cols = 1, p
    elif grid == "column":
        rows, cols = p, 1
    else:
        rows, cols = balanced(p)
        order = "column_major" if grid == "balanced_cm" else "row_major"
    tile = env.tile if tile_kind == "tile" else env.pad_tile
    nrhs = {"cols": max(1, cols), "max2cols": max(2, cols), "one": 1}[nrhs_rule]
    n = first_n(env, rows, cols, tile, padded)
    mesh = mesh_of(rows, cols, order=order, explicit=explicit)
    spec = P("pr", "pc")
    rhs_spec = {
        "matrix_2d_sharded": spec,
        "matrix_row_sharded": P("pr", None),
        "vector_replicated": P(None),
        "matrix_replicated": P(None, None),
    }[rhs_mode]
    return mesh, spec, n, tile, nrhs, rhs_spec, rhs_mode.startswith("vector"), explicit


def _solve_case(env, routine, name, dtype, interface="public", logdet=False):
    mesh, spec, n, tile, nrhs, rhs_spec, vector, explicit = layout(env, name)
    a = spd(n, dtype, 1234) if routine == "potrs" else general(n, dtype, 1234)
    b = rhs(n, nrhs, dtype)
    if vector:
        b = b[:, 0]
    a_dev, b_dev = place(a, mesh, spec), place(b, mesh, rhs_spec)
    fn = jaxmg.potrs if routine == "potrs" else jaxmg.lu_solve
    extra = {"return_logdet": True} if logdet else {}
    # The solution keeps b's sharding where it is known: b placed (outside jit), or Explicit.
    out_spec = rhs_spec
    donated = None
    if interface == "public":
        x, *rest = fn(a_dev, b_dev, tile, mesh=mesh, matrix_specs=spec, return_status=True, **extra)
    elif interface == "jit":  # inside the caller's jit: Auto shardings are not in the type
        solve = jax.jit(
            lambda m, v: fn(m, v, tile, mesh=mesh, matrix_specs=spec, return_status=True, **extra)
        )
        x, *rest = solve(a_dev, b_dev)
        if not explicit:
            out_spec = P("pr") if vector else P("pr", None)
    elif interface == "inferred":  # no mesh, no specs: from the types and the context mesh
        with jax.set_mesh(mesh):
            x, *rest = jax.jit(lambda m, v: fn(m, v, tile, return_status=True, **extra))(
                a_dev, b_dev
            )
        if not explicit:
            out_spec = P("pr") if vector else P("pr", None)
    elif interface == "abstract_mesh":
        solve = jax.jit(
            lambda m, v: fn(
                m,
                v,
                tile,
                mesh=jax.sharding.get_abstract_mesh(),
                matrix_specs=spec,
                return_status=True,
                **extra,
            )
        )
        with jax.set_mesh(mesh):
            x, *rest = solve(a_dev, b_dev)
        if not explicit:
            out_spec = P("pr") if vector else P("pr", None)
    elif interface == "context":  # the ctx form in the caller's jit, a and b donated
        ctx = jaxmg.potrs_shardmap_ctx if routine == "potrs" else jaxmg.lu_solve_shardmap_ctx

        @functools.partial(jax.jit, donate_argnums=(0, 1))
        def solve(m, v):
            return ctx(m, v, tile, mesh=mesh, matrix_specs=spec, **extra)

        a_dev, b_dev = owned(a_dev), owned(b_dev)
        before = pointer(a_dev)
        a_work, x, *rest = solve(a_dev, b_dev)
        donated = bool(a_dev.is_deleted()) and pointer(a_work) == before
        donated = donated and sharded_as(a_work, mesh, spec) and a_work.shape == a.shape
        if not explicit:
            out_spec = P("pr") if vector else P("pr", None)
    elif interface == "blocks":  # the per-block form inside the caller's shard_map
        blocks = jaxmg.potrs_blocks if routine == "potrs" else jaxmg.lu_solve_blocks
        b_spec = P("pr") if vector else P("pr", None)
        outs = (b_spec, P(), P()) if logdet else (b_spec, P())
        solve = jax.jit(
            jax.shard_map(
                lambda m, v: blocks(m, v, tile, mesh=mesh, return_status=True, **extra),
                mesh=mesh,
                in_specs=(spec, b_spec),
                out_specs=outs,
                check_vma=False,
            )
        )
        x, *rest = solve(a_dev, place(b, mesh, b_spec))
        out_spec = b_spec
    status = rest[-1]
    resid, tol = solve_error(a, gather(x).reshape(b.shape), b)
    ok = resid <= tol and scalar(status) == 0 and sharded_as(x, mesh, out_spec)
    ok = ok and x.shape == b.shape and np.dtype(x.dtype) == np.dtype(dtype)
    rec = dict(n=n, tile=tile, nrhs=nrhs, residual=resid, tol=tol, spec=str(x.sharding.spec))
    if logdet:
        ref = float(np.linalg.slogdet(a.astype(np.complex128))[1])
        err = abs(scalar(rest[0]) - ref)
        rec["logdet_error"] = err
        ok = ok and err <= 20 * n * eps(dtype) * max(1.0, abs(ref))
        ok = ok and np.dtype(rest[0].dtype) == np.dtype(np.finfo(dtype).dtype)
    if donated is not None:
        rec["donated"] = donated
        ok = ok and donated
    return check(ok, **rec)


def _register_solves():
    for i, name in enumerate(LAYOUTS):
        for j, routine in enumerate(("potrs", "lu_solve")):
            dtype = DTYPES[(i + j) % 4]
            case(f"{routine}:{name}:{dtype.__name__}")(
                functools.partial(_solve_case, routine=routine, name=name, dtype=dtype)
            )
    for interface in ("jit", "inferred", "abstract_mesh", "context", "blocks"):
        for routine, name in (("potrs", "column_major_padding"), ("lu_solve", "skinny_rhs")):
            case(f"{routine}:{name}:{interface}")(
                functools.partial(
                    _solve_case,
                    routine=routine,
                    name=name,
                    dtype=np.float64,
                    interface=interface,
                )
            )
        if interface != "abstract_mesh":
            case(f"potrs:skinny_rhs_explicit_mesh:{interface}:logdet")(
                functools.partial(
                    _solve_case,
                    routine="potrs",
                    name="skinny_rhs_explicit_mesh",
                    dtype=np.complex128,
                    interface=interface,
                    logdet=True,
                )
            )
    case("potrs:row_major_no_padding:public:logdet")(
        functools.partial(
            _solve_case, routine="potrs", name="row_major_no_padding", dtype=np.float32, logdet=True
        )
    )


_register_solves()


@case("potrs:single_axis_row_vector:foreign_abstract_mesh")
def _single_axis_row_vector(env):
    """A one-axis mesh, a sharded as P('x') (rows), b a replicated vector, called eagerly
    while the caller keeps another (abstract) mesh in context."""
    mesh, n = one_axis_mesh(), first_n(env, env.devices, 1, env.tile, False)
    a, b = spd(n, np.float64, 7), rhs(n, 1, np.float64)[:, 0]
    a_dev, b_dev = place(a, mesh, P("x")), place(b, mesh, P(None))
    caller = one_axis_mesh("caller")
    with jax.sharding.use_abstract_mesh(caller.abstract_mesh):
        x, status = jaxmg.potrs(a_dev, b_dev, env.tile, return_status=True)
    resid, tol = solve_error(a, gather(x), b)
    ok = resid <= tol and scalar(status) == 0 and sharded_as(x, mesh, P(None))
    return check(ok, residual=resid, tol=tol)


@case("potrs:single_axis_column_rhs")
def _single_axis_column_rhs(env):
    """A one-axis mesh, a's columns sharded (P(None, 'x')), b one column row-replicated."""
    mesh, n = one_axis_mesh(), first_n(env, 1, env.devices, env.tile, False)
    a, b = spd(n, np.float64, 8), rhs(n, 1, np.float64)
    a_dev, b_dev = place(a, mesh, P(None, "x")), place(b, mesh, P(None, None))
    x, status = jaxmg.potrs(a_dev, b_dev, env.tile, return_status=True)
    resid, tol = solve_error(a, gather(x), b)
    ok = resid <= tol and scalar(status) == 0 and sharded_as(x, mesh, P(None, None))
    return check(ok, residual=resid, tol=tol)


@case("potrs:singular")
def _potrs_singular(env):
    """A matrix that is not positive definite: status > 0 and NaN x and logdet everywhere."""
    mesh, n = one_axis_mesh(), 4 * env.devices
    d = np.ones(n)
    d[n // 2] = -1.0
    a_dev, b_dev = place(np.diag(d), mesh, P("x", None)), place(np.ones(n), mesh, P(None))
    a_work, x, logdet, status = jax.jit(
        lambda m, v: jaxmg.potrs_shardmap_ctx(m, v, 2, mesh=mesh, return_logdet=True)
    )(a_dev, b_dev)
    ok = scalar(status) > 0 and np.all(np.isnan(gather(x))) and np.isnan(scalar(logdet))
    return check(ok, status=scalar(status))


@case("lu_solve:singular")
def _lu_singular(env):
    mesh, n = one_axis_mesh(), 4 * env.devices
    d = np.ones(n)
    d[n - 1] = 0.0
    a_dev, b_dev = place(np.diag(d), mesh, P("x", None)), place(np.ones(n), mesh, P(None))
    x, status = jaxmg.lu_solve(a_dev, b_dev, 2, return_status=True)
    ok = scalar(status) > 0 and np.all(np.isnan(gather(x)))
    return check(ok, status=scalar(status))


@case("potrs:any_device_order")
def _any_order(env):
    """A device order that is neither row- nor column-major: JAXMg 1.4.1 rejects it; jaxmg
    solves (its engine maps mesh positions to processes)."""
    rows, cols = balanced(env.devices)
    mesh = mesh_of(rows, cols, order="swapped")
    n = first_n(env, rows, cols, env.tile, False)
    a, b = spd(n, np.float64, 9), rhs(n, 2, np.float64)
    x = jaxmg.potrs(place(a, mesh, P("pr", "pc")), place(b, mesh, P("pr", None)), env.tile)
    resid, tol = solve_error(a, gather(x), b)
    return check(resid <= tol, residual=resid, tol=tol)


def _per_device_status(status, env):
    """A status out of the caller's shard_map with out_spec over the mesh's axes: one entry per
    device (JAXMg's per-device status vectors), every one 0."""
    values = gather(status)
    return values.shape == (env.devices,) and not np.any(values), values.tolist()


@case("potrs:shardmap_ctx:in_caller_shard_map")
def _potrs_ctx_blocks(env):
    """potrs_shardmap_ctx called in the body of the caller's own jax.shard_map (type-checked,
    inside a jit that donates a and b), as JAXMg's later tests call it: the body sees this
    device's blocks, so the shapes checked are those of the global arrays the blocks make up.
    A column grid of Auto axes with log det A (JAXMg's column_grid_no_padding) and a balanced
    grid of Explicit axes; x's blocks keep b's row sharding, the status comes back one entry
    per device. A b split over a's column axis is refused before any work."""
    spec, rhs_spec, status_spec = P("pr", "pc"), P("pr", None), P(("pr", "pc"))
    rows, cols = balanced(env.devices)
    ok, out = True, {}
    for grid, (r, c), explicit, logdet in (
        ("column", (env.devices, 1), False, True),
        ("balanced", (rows, cols), True, False),
    ):
        mesh = mesh_of(r, c, explicit=explicit)
        n = first_n(env, r, c, env.tile, False)
        a, b = spd(n, np.float64, 31), rhs(n, 3, np.float64)
        body = functools.partial(
            jaxmg.potrs_shardmap_ctx, T_A=env.tile, matrix_specs=spec, return_logdet=logdet
        )
        outs = (spec, rhs_spec, *((P(),) if logdet else ()), status_spec)
        solve = jax.jit(
            jax.shard_map(body, mesh=mesh, in_specs=(spec, rhs_spec), out_specs=outs),
            donate_argnums=(0, 1),
        )
        a_dev, b_dev = owned(place(a, mesh, spec)), owned(place(b, mesh, rhs_spec))
        before = pointer(a_dev)
        a_work, x, *rest = solve(a_dev, b_dev)
        resid, tol = solve_error(a, gather(x), b)
        good_status, statuses = _per_device_status(rest[-1], env)
        donated = bool(a_dev.is_deleted()) and pointer(a_work) == before
        good = resid <= tol and good_status and donated and sharded_as(x, mesh, rhs_spec)
        good = good and a_work.shape == a.shape and x.shape == b.shape
        rec = dict(n=n, residual=resid, tol=tol, statuses=statuses, donated=donated)
        if logdet:
            ref = float(np.linalg.slogdet(a)[1])
            rec["logdet_error"] = abs(scalar(rest[0]) - ref)
            good = good and rec["logdet_error"] <= 20 * n * eps(np.float64) * abs(ref)
        out[grid] = rec
        ok = ok and good
    if env.devices > 1:  # b split over the columns of a 1 x P grid
        mesh = mesh_of(1, env.devices)
        n = first_n(env, 1, env.devices, env.tile, False)
        bad = jax.jit(
            jax.shard_map(
                functools.partial(jaxmg.potrs_shardmap_ctx, T_A=env.tile),
                mesh=mesh,
                in_specs=(spec, spec),
                out_specs=(spec, spec, status_spec),
            )
        )
        args = (
            place(spd(n, np.float64, 32), mesh, spec),
            place(rhs(n, env.devices, np.float64), mesh, spec),
        )
        try:
            jax.eval_shape(bad, *args)
            out["b_split_over_columns"] = "accepted"
            ok = False
        except ValueError as e:
            out["b_split_over_columns"] = str(e)[:120]
            ok = ok and "column axis" in str(e)
    return check(ok, grids=out)


@case("shardmap_ctx:lu_solve_and_syevd:in_caller_shard_map")
def _ctx_blocks_others(env):
    """lu_solve_shardmap_ctx and syevd_shardmap_ctx in the body of the caller's shard_map
    (types checked), as potrs_shardmap_ctx: the solution's and V's blocks, the eigenvalues
    and the status the same on every device."""
    rows, cols = balanced(env.devices)
    mesh = mesh_of(rows, cols, order="column_major")
    spec, rhs_spec = P("pr", "pc"), P("pr", None)
    n = first_n(env, rows, cols, env.tile, False)
    g, h, b = general(n, np.float64, 33), hermitian(n, np.float64, 34), rhs(n, 2, np.float64)
    solve = jax.jit(
        jax.shard_map(
            lambda m, v: jaxmg.lu_solve_shardmap_ctx(m, v, env.tile),
            mesh=mesh,
            in_specs=(spec, rhs_spec),
            out_specs=(spec, rhs_spec, P()),
        )
    )
    _, x, status = solve(place(g, mesh, spec), place(b, mesh, rhs_spec))
    resid, tol = solve_error(g, gather(x), b)
    eig = jax.jit(
        jax.shard_map(
            lambda m: jaxmg.syevd_shardmap_ctx(m, env.tile),
            mesh=mesh,
            in_specs=spec,
            out_specs=(spec, P(), spec, P(("pr", "pc"))),
        )
    )
    _, w, v, eig_status = eig(place(h, mesh, spec))
    good_eig, rec = _eig_check(h, gather(w), gather(v), np.float64)
    good_status, statuses = _per_device_status(eig_status, env)
    ok = resid <= tol and gather(status).tolist() == [0] and good_eig and good_status
    ok = ok and sharded_as(x, mesh, rhs_spec) and sharded_as(v, mesh, spec)
    return check(ok, solve_residual=resid, solve_tol=tol, eig_statuses=statuses, **rec)


# ---------------------------------------------------------------------------------------------
# Decompositions: syevd, qr, least_squares, gesvd, polar


def decomposition_mesh(env, grid):
    if grid == "row":
        return mesh_of(1, env.devices), 1, env.devices
    if grid == "column":
        return mesh_of(env.devices, 1), env.devices, 1
    rows, cols = balanced(env.devices)
    return mesh_of(rows, cols, order="column_major"), rows, cols


def hermitian(n, dtype, seed):
    x = tall(n, n, dtype, seed)
    return ((x + x.conj().T) / 2).astype(dtype)


def _eig_check(a, w, v, dtype):
    n = a.shape[0]
    a64 = a.astype(np.complex128)
    w_ref = np.linalg.eigvalsh(a64)
    scale = max(np.abs(w_ref).max(), 1.0)
    w_err = float(np.abs(np.asarray(w) - w_ref).max() / scale)
    tol = 20 * n * eps(dtype)
    out = dict(value_error=w_err, tol=tol)
    ok = w_err <= tol
    if v is not None:
        v64 = np.asarray(v, dtype=np.complex128)
        resid = float(np.abs(a64 @ v64 - v64 * np.asarray(w)).max() / scale)
        orth = float(np.abs(v64.conj().T @ v64 - np.eye(n)).max())
        out.update(residual=resid, orthogonality=orth)
        ok = ok and resid <= tol and orth <= tol
    return ok, out


def _syevd_case(env, grid, dtype, padded):
    mesh, rows, cols = decomposition_mesh(env, grid)
    tile = env.pad_tile if padded else env.tile
    n = first_n(env, rows, cols, tile, padded)
    a = hermitian(n, dtype, 11)
    w, v, status = jaxmg.syevd(
        place(a, mesh, P("pr", "pc")),
        tile,
        mesh=mesh,
        matrix_specs=P("pr", "pc"),
        return_status=True,
    )
    ok, rec = _eig_check(a, gather(w), gather(v), dtype)
    ok = ok and scalar(status) == 0 and sharded_as(v, mesh, P("pr", "pc"))
    ok = ok and sharded_as(w, mesh, P()) and np.dtype(w.dtype) == np.finfo(dtype).dtype
    return check(ok, n=n, **rec)


for _i, (_grid, _padded) in enumerate(
    (("row", False), ("balanced", True), ("column", True), ("balanced", False))
):
    case(f"syevd:{_grid}:{'padding' if _padded else 'no_padding'}:{DTYPES[_i].__name__}")(
        functools.partial(_syevd_case, grid=_grid, dtype=DTYPES[_i], padded=_padded)
    )


@case("syevd:values_only")
def _syevd_values(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a = hermitian(n, np.float64, 12)
    w = jaxmg.syevd(place(a, mesh, P("pr", "pc")), env.tile, return_eigenvectors=False)
    ok, rec = _eig_check(a, gather(w), None, np.float64)
    return check(ok and w.shape == (n,), **rec)


@case("syevd:context_donated")
def _syevd_context(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a = hermitian(n, np.float64, 13)
    a_dev = owned(place(a, mesh, P("pr", "pc")))
    fn = jax.jit(lambda m: jaxmg.syevd_shardmap_ctx(m, env.tile), donate_argnums=0)
    before = pointer(a_dev)
    a_work, w, v, status = fn(a_dev)
    ok, rec = _eig_check(a, gather(w), gather(v), np.float64)
    donated = bool(a_dev.is_deleted()) and pointer(a_work) == before
    ok = ok and donated and scalar(status) == 0 and sharded_as(a_work, mesh, P("pr", "pc"))
    fn = jax.jit(
        lambda m: jaxmg.syevd_shardmap_ctx(m, env.tile, return_eigenvectors=False),
        donate_argnums=0,
    )
    a_work, w2, status = fn(place(a, mesh, P("pr", "pc")))
    ok = ok and np.allclose(gather(w2), gather(w), atol=rec["tol"]) and a_work.shape == (n, n)
    return check(ok, donated=donated, **rec)


@case("syevd:replicated_input")
def _syevd_replicated(env):
    mesh = mesh_of(1, env.devices, explicit=True)
    n = first_n(env, 1, env.devices, env.tile, False)
    a = hermitian(n, np.float64, 14)
    a_dev = place(a, mesh, P())
    w, v = jaxmg.syevd(a_dev, env.tile)
    a_work, w2, v2, _ = jax.jit(lambda m: jaxmg.syevd_shardmap_ctx(m, env.tile))(a_dev)
    ok, rec = _eig_check(a, gather(w), gather(v), np.float64)
    ok = ok and sharded_as(v, mesh, P()) and sharded_as(v2, mesh, P())
    ok = ok and sharded_as(a_work, mesh, P("pr", "pc"))  # the work array: the engine's layout
    return check(ok, v_spec=str(v.sharding.spec), **rec)


def _qr_check(a, q, r, dtype):
    m, n = a.shape
    a64, q64, r64 = (np.asarray(x, dtype=np.complex128) for x in (a, q, r))
    resid = float(np.linalg.norm(q64 @ r64 - a64) / (n * np.linalg.norm(a64)))
    orth = float(np.abs(q64.conj().T @ q64 - np.eye(n)).max())
    tol = 10 * m * eps(dtype)
    ok = resid <= tol and orth <= tol and np.all(np.tril(r64, -1) == 0)
    return ok, dict(residual=resid, orthogonality=orth, tol=tol)


def _qr_case(env, grid, dtype, padded):
    mesh, rows, cols = decomposition_mesh(env, grid)
    tile = env.pad_tile if padded else env.tile
    n = first_n(env, rows, cols, tile, padded)
    a = tall(2 * n, n, dtype, 21)
    q, r, status = jaxmg.qr(place(a, mesh, P("pr", "pc")), tile, return_status=True)
    ok, rec = _qr_check(a, gather(q), gather(r), dtype)
    ok = ok and scalar(status) == 0 and sharded_as(q, mesh, P("pr", "pc"))
    return check(ok and sharded_as(r, mesh, P("pr", "pc")), n=n, **rec)


for _i, (_grid, _padded) in enumerate((("row", False), ("balanced", True), ("column", False))):
    case(f"qr:{_grid}:{'padding' if _padded else 'no_padding'}:{DTYPES[_i + 1].__name__}")(
        functools.partial(_qr_case, grid=_grid, dtype=DTYPES[_i + 1], padded=_padded)
    )


@case("qr:context_donated")
def _qr_context(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a = tall(2 * n, n, np.float64, 22)
    a_dev = place(a, mesh, P("pr", "pc"))
    fn = jax.jit(lambda m: jaxmg.qr_shardmap_ctx(m, env.tile), donate_argnums=0)
    q, r, status = fn(a_dev)
    ok, rec = _qr_check(a, gather(q), gather(r), np.float64)
    ok = ok and bool(a_dev.is_deleted()) and scalar(status) == 0
    return check(ok and sharded_as(q, mesh, P("pr", "pc")), **rec)


@case("qr:replicated_input")
def _qr_replicated(env):
    mesh = mesh_of(1, env.devices, explicit=True)
    n = first_n(env, 1, env.devices, env.tile, False)
    a = tall(2 * n, n, np.float64, 23)
    a_dev = place(a, mesh, P())
    q, r = jaxmg.qr(a_dev, env.tile)
    q2, r2, _ = jax.jit(lambda m: jaxmg.qr_shardmap_ctx(m, env.tile))(a_dev)
    ok, rec = _qr_check(a, gather(q), gather(r), np.float64)
    ok = ok and all(sharded_as(x, mesh, P()) for x in (q, r, q2, r2))
    return check(ok, q_spec=str(q.sharding.spec), **rec)


def _lstsq_check(a, b, x, dtype):
    ref = np.linalg.lstsq(a.astype(np.complex128), b.astype(np.complex128), rcond=None)[0]
    err = float(np.abs(np.asarray(x) - ref).max() / max(np.abs(ref).max(), 1e-300))
    tol = 100 * a.shape[0] * eps(dtype)
    return err <= tol, dict(error=err, tol=tol)


@case("least_squares:layouts")
def _lstsq_layouts(env):
    """b row-sharded, 2-D sharded, replicated, a vector: x keeps b's sharding (replicated
    with b replicated)."""
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    out, ok = {}, True
    for i, (b_spec, k) in enumerate(
        ((P("pr", None), 2), (P("pr", "pc"), cols), (P(), 3), (P(None), 0), (P("pr"), 0))
    ):
        dtype = DTYPES[i % 4]
        a = tall(2 * n, n, dtype, 30 + i)
        b = tall(2 * n, max(k, 1), dtype, 40 + i)
        b = b[:, 0] if k == 0 else b
        x = jaxmg.least_squares(place(a, mesh, P("pr", "pc")), place(b, mesh, b_spec), env.tile)
        good, rec = _lstsq_check(a, b, gather(x), dtype)
        good = good and sharded_as(x, mesh, b_spec) and x.shape == (n,) + b.shape[1:]
        out[f"{b_spec}"] = dict(rec, spec=str(x.sharding.spec))
        ok = ok and good
    return check(ok, layouts=out)


@case("least_squares:context_donated")
def _lstsq_context(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a, b = tall(2 * n, n, np.float64, 50), tall(2 * n, 1, np.float64, 51)
    a_dev, b_dev = place(a, mesh, P("pr", "pc")), place(b, mesh, P("pr", None))
    fn = jax.jit(
        lambda m, v: jaxmg.least_squares_shardmap_ctx(m, v, env.tile), donate_argnums=(0, 1)
    )
    a_work, b_work, x, status = fn(a_dev, b_dev)
    ok, rec = _lstsq_check(a, b, gather(x), np.float64)
    ok = ok and np.allclose(gather(b_work)[:n], gather(x)) and b_work.shape == b.shape
    ok = ok and not np.any(gather(b_work)[n:]) and sharded_as(b_work, mesh, P("pr", None))
    ok = ok and a_work.shape == a.shape and bool(a_dev.is_deleted()) and scalar(status) == 0
    return check(ok and sharded_as(x, mesh, P("pr", None)), **rec)


def _svd_check(a, u, s, vh, dtype, full=False):
    m, n = a.shape
    k = min(m, n)
    a64 = a.astype(np.complex128)
    s_ref = np.linalg.svd(a64, compute_uv=False)
    tol = 20 * max(m, n) * eps(dtype)
    scale = max(s_ref.max(), 1.0)
    rec = dict(value_error=float(np.abs(np.asarray(s) - s_ref).max() / scale), tol=tol)
    ok = rec["value_error"] <= tol
    if u is not None and vh is not None:
        u64, vh64 = np.asarray(u, dtype=np.complex128), np.asarray(vh, dtype=np.complex128)
        rec["residual"] = float(np.abs((u64[:, :k] * s_ref) @ vh64[:k] - a64).max() / scale)
        ok = ok and rec["residual"] <= tol
    for name, x, rows_are_vectors in (("u", u, False), ("vh", vh, True)):
        if x is None:
            continue
        x64 = np.asarray(x, dtype=np.complex128)
        gram = x64 @ x64.conj().T if rows_are_vectors else x64.conj().T @ x64
        rec[f"{name}_orthogonality"] = float(np.abs(gram - np.eye(gram.shape[0])).max())
        ok = ok and rec[f"{name}_orthogonality"] <= tol
    if full:
        ok = ok and (u is None or u.shape == (m, m)) and (vh is None or vh.shape == (n, n))
    return ok, rec


def _gesvd_case(env, shape, dtype, compute_u=True, compute_vh=True, full=False):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    m_, n_ = (2 * n, n) if shape == "tall" else (n, 2 * n)
    a = tall(m_, n_, dtype, 60)
    out = jaxmg.gesvd(
        place(a, mesh, P("pr", "pc")),
        env.tile,
        compute_u=compute_u,
        compute_vh=compute_vh,
        full_matrices=full,
        return_status=True,
    )
    out = list(out)
    u = out.pop(0) if compute_u else None
    s = out.pop(0)
    vh = out.pop(0) if compute_vh else None
    ok, rec = _svd_check(
        a,
        None if u is None else gather(u),
        gather(s),
        None if vh is None else gather(vh),
        dtype,
        full,
    )
    # (each condition recorded, so that a failure says which)
    rec["status"] = int(scalar(out[0]))
    rec["s_spec"] = str(s.sharding.spec)
    ok = ok and rec["status"] == 0 and sharded_as(s, mesh, P())
    for name, x in (("u", u), ("vh", vh)):
        if x is not None:
            rec[f"{name}_shape"] = list(x.shape)
            rec[f"{name}_spec"] = str(getattr(x.sharding, "spec", x.sharding))
            ok = ok and sharded_as(x, mesh, P("pr", "pc"))
    return check(ok, shape=[m_, n_], mesh=[rows, cols], **rec)


for _i, (_shape, _u, _vh, _full) in enumerate(
    (
        ("tall", True, True, False),
        ("wide", True, True, False),
        ("tall", True, False, False),
        ("tall", False, True, False),
        ("wide", False, False, False),
        ("tall", True, True, True),
        ("wide", True, True, True),
    )
):
    _name = f"gesvd:{_shape}:u={int(_u)}:vh={int(_vh)}:full={int(_full)}:{DTYPES[_i % 4].__name__}"
    case(_name)(
        functools.partial(
            _gesvd_case,
            shape=_shape,
            dtype=DTYPES[_i % 4],
            compute_u=_u,
            compute_vh=_vh,
            full=_full,
        )
    )


@case("gesvd:context_donated")
def _gesvd_context(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a = tall(2 * n, n, np.float64, 61)
    a_dev = place(a, mesh, P("pr", "pc"))
    fn = jax.jit(lambda m: jaxmg.gesvd_shardmap_ctx(m, env.tile), donate_argnums=0)
    a_work, u, s, vh, status = fn(a_dev)
    ok, rec = _svd_check(a, gather(u), gather(s), gather(vh), np.float64)
    ok = ok and bool(a_dev.is_deleted()) and a_work.shape == a.shape and scalar(status) == 0
    shapes = {}
    for kw in (
        dict(compute_vh=False),
        dict(compute_u=False),
        dict(compute_u=False, compute_vh=False),
    ):
        out = jax.jit(lambda m, kw=kw: jaxmg.gesvd_shardmap_ctx(m, env.tile, **kw))(
            place(a, mesh, P("pr", "pc"))
        )
        shapes[str(kw)] = [list(o.shape) for o in out]
    ok = ok and shapes == {
        "{'compute_vh': False}": [[2 * n, n], [2 * n, n], [n], []],
        "{'compute_u': False}": [[2 * n, n], [n], [n, n], []],
        "{'compute_u': False, 'compute_vh': False}": [[2 * n, n], [n], []],
    }
    return check(ok, shapes=shapes, **rec)


@case("gesvd:replicated_input")
def _gesvd_replicated(env):
    mesh = mesh_of(1, env.devices, explicit=True)
    n = first_n(env, 1, env.devices, env.tile, False)
    a = tall(2 * n, n, np.float64, 62)
    a_dev = place(a, mesh, P())
    u, s, vh = jaxmg.gesvd(a_dev, env.tile)
    a_work, u2, s2, vh2, _ = jax.jit(lambda m: jaxmg.gesvd_shardmap_ctx(m, env.tile))(a_dev)
    ok, rec = _svd_check(a, gather(u), gather(s), gather(vh), np.float64)
    ok = ok and all(sharded_as(x, mesh, P()) for x in (u, vh, u2, vh2))
    return check(ok, u_spec=str(u.sharding.spec), **rec)


def _polar_check(a, up, h, dtype):
    m, n = a.shape
    a64 = a.astype(np.complex128)
    w, s, vh = np.linalg.svd(a64, full_matrices=False)
    up_ref, h_ref = w @ vh, (vh.conj().T * s) @ vh
    tol = 100 * m * eps(dtype)
    rec = dict(up_error=float(np.abs(np.asarray(up) - up_ref).max()), tol=tol)
    ok = rec["up_error"] <= tol
    if h is not None:
        rec["h_error"] = float(np.abs(np.asarray(h) - h_ref).max() / s.max())
        ok = ok and rec["h_error"] <= tol
    return ok, rec


@case("polar:layouts")
def _polar_layouts(env):
    ok, out = True, {}
    for i, grid in enumerate(("row", "balanced", "column")):
        mesh, rows, cols = decomposition_mesh(env, grid)
        n = first_n(env, rows, cols, env.tile, False)
        dtype = DTYPES[(i + 1) % 4]
        a = tall(2 * n, n, dtype, 70 + i)
        up, h, status = jaxmg.polar(place(a, mesh, P("pr", "pc")), env.tile, return_status=True)
        good, rec = _polar_check(a, gather(up), gather(h), dtype)
        good = good and sharded_as(up, mesh, P("pr", "pc")) and scalar(status) == 0
        up_only = jaxmg.polar(place(a, mesh, P("pr", "pc")), env.tile, compute_h=False)
        good = good and np.allclose(gather(up_only), gather(up), atol=rec["tol"])
        out[grid] = rec
        ok = ok and good
    return check(ok, layouts=out)


@case("polar:context_donated")
def _polar_context(env):
    mesh, rows, cols = decomposition_mesh(env, "balanced")
    n = first_n(env, rows, cols, env.tile, False)
    a = tall(2 * n, n, np.float64, 73)
    a_dev = place(a, mesh, P("pr", "pc"))
    up, h, status = jax.jit(lambda m: jaxmg.polar_shardmap_ctx(m, env.tile), donate_argnums=0)(
        a_dev
    )
    ok, rec = _polar_check(a, gather(up), gather(h), np.float64)
    up2, status2 = jax.jit(lambda m: jaxmg.polar_shardmap_ctx(m, env.tile, compute_h=False))(
        place(a, mesh, P("pr", "pc"))
    )
    ok = ok and bool(a_dev.is_deleted()) and scalar(status) == 0 and up2.shape == a.shape
    return check(ok and sharded_as(up, mesh, P("pr", "pc")), **rec)


@case("polar:replicated_input")
def _polar_replicated(env):
    mesh = mesh_of(1, env.devices, explicit=True)
    n = first_n(env, 1, env.devices, env.tile, False)
    a = tall(2 * n, n, np.float64, 74)
    a_dev = place(a, mesh, P())
    up, h = jaxmg.polar(a_dev, env.tile)
    up2, h2, _ = jax.jit(lambda m: jaxmg.polar_shardmap_ctx(m, env.tile))(a_dev)
    ok, rec = _polar_check(a, gather(up), gather(h), np.float64)
    return check(ok and all(sharded_as(x, mesh, P()) for x in (up, h, up2, h2)), **rec)


def _explicit_context_example(env, routine):
    """JAXMg's context examples for qr and polar, re-expressed: jax.make_mesh's mesh (Explicit
    axes, two columns where the process count is even) as the context mesh, a jit that builds
    A = [diag(d); 0] (d from 1 to 2) already sharded P('pr', 'pc') and decomposes it, and the
    example's checks with JAX's own operators on the results: Qᴴ Q = I and diag(R) = d (Upᴴ Up
    = I and diag(H) = d). On Explicit axes those operators need unsharded operands, so both
    results come back replicated."""
    cols = 2 if env.devices % 2 == 0 else 1
    rows = env.devices // cols
    n = env.tile * 2 * math.lcm(rows, cols)
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    spec = P("pr", "pc")
    fn = jaxmg.qr_shardmap_ctx if routine == "qr" else jaxmg.polar_shardmap_ctx

    @jax.jit
    def build_and_decompose():
        d = jnp.linspace(1.0, 2.0, n, dtype=jnp.float64)
        a = jnp.zeros((2 * n, n), jnp.float64).at[jnp.arange(n), jnp.arange(n)].set(d)
        a = jax.reshard(a, NamedSharding(mesh, spec))
        first, second, status = fn(a, T_A=env.tile, mesh=mesh, matrix_specs=spec)
        return first, second, status, d

    with jax.set_mesh(mesh):
        first, second, status, d = build_and_decompose()
        gram = first.conj().T @ first
        passed = (
            jnp.all(status == 0)
            & jnp.allclose(gram, jnp.eye(n, dtype=jnp.float64))
            & jnp.allclose(jnp.diag(second), d)
        )
        passed = bool(passed)
        # (what a failure looks like: the statuses and the two checks' largest errors)
        errors = dict(
            status=np.asarray(gather(status)).ravel().tolist(),
            gram_error=float(jnp.max(jnp.abs(gram - jnp.eye(n, dtype=jnp.float64)))),
            diag_error=float(jnp.max(jnp.abs(jnp.diag(second) - d))),
        )
    specs = [str(x.sharding.spec) for x in (first, second)]
    ok = passed and all(sharded_as(x, mesh, P()) for x in (first, second))
    return check(ok, n=n, grid=[rows, cols], specs=specs, **errors)


for _routine in ("qr", "polar"):
    case(f"{_routine}:context_explicit_mesh_example")(
        functools.partial(_explicit_context_example, routine=_routine)
    )


# ---------------------------------------------------------------------------------------------
# A foreign context mesh: every routine called while another mesh is the context mesh


def _every_routine(mesh, env):
    """Each routine once on small inputs of `mesh`; returns {name: ok}."""
    rows, cols = mesh.devices.shape
    n = first_n(env, rows, cols, env.tile, False)
    h, g, t = spd(n, np.float64, 80), general(n, np.float64, 81), tall(2 * n, n, np.float64, 82)
    b = rhs(n, 2, np.float64)
    spec = P("pr", "pc")
    hd, gd, td = place(h, mesh, spec), place(g, mesh, spec), place(t, mesh, spec)
    bd, tb = place(b, mesh, P("pr", None)), place(tall(2 * n, 2, np.float64, 83), mesh, P())
    results = {}
    results["potrs"] = solve_error(h, gather(jaxmg.potrs(hd, bd, env.tile)), b)[0] < 1e-12
    results["lu_solve"] = solve_error(g, gather(jaxmg.lu_solve(gd, bd, env.tile)), b)[0] < 1e-12
    w = gather(jaxmg.syevd(hd, env.tile, return_eigenvectors=False))
    results["syevd"] = np.allclose(w, np.linalg.eigvalsh(h), atol=1e-10 * n)
    q, r = jaxmg.qr(td, env.tile)
    results["qr"] = _qr_check(t, gather(q), gather(r), np.float64)[0]
    x = jaxmg.least_squares(td, tb, env.tile)
    results["least_squares"] = _lstsq_check(t, gather(tb), gather(x), np.float64)[0]
    s = jaxmg.gesvd(td, env.tile, compute_u=False, compute_vh=False)
    results["gesvd"] = _svd_check(t, None, gather(s), None, np.float64)[0]
    up = jaxmg.polar(td, env.tile, compute_h=False)
    results["polar"] = _polar_check(t, gather(up), None, np.float64)[0]
    # jaxmg's other routines too
    results["cho_solve"] = solve_error(h, gather(jaxmg.cho_solve(jaxmg.cho_factor(hd), bd)), b)[0]
    results["cho_solve"] = results["cho_solve"] < 1e-12
    results["inv"] = bool(np.abs(gather(jaxmg.inv(gd)) @ g - np.eye(n)).max() < 1e-10)
    w = gather(jaxmg.eigh(hd)[0])
    results["eigh"] = np.allclose(w, np.linalg.eigvalsh(h), atol=1e-10 * n)
    _, xc, _ = jax.jit(lambda m, v: jaxmg.potrs_shardmap_ctx(m, v, env.tile, mesh=mesh))(hd, bd)
    results["potrs_shardmap_ctx"] = solve_error(h, gather(xc), b)[0] < 1e-12
    return results


@case("foreign_context:set_mesh")
def _foreign_set_mesh(env):
    rows, cols = balanced(env.devices)
    mesh = mesh_of(rows, cols, explicit=True)
    other = mesh_of(rows, cols, explicit=True, names=("caller_r", "caller_c"))
    with jax.set_mesh(other):
        results = _every_routine(mesh, env)
    return check(all(results.values()), results=results)


@case("foreign_context:use_abstract_mesh")
def _foreign_abstract(env):
    rows, cols = balanced(env.devices)
    mesh = mesh_of(rows, cols)
    other = one_axis_mesh("caller")
    with jax.sharding.use_abstract_mesh(other.abstract_mesh):
        results = _every_routine(mesh, env)
    return check(all(results.values()), results=results)


# ---------------------------------------------------------------------------------------------
# Public-API checks (JAXMg's cpu_only interface tests)


@case("api:names_and_signatures")
def _api(env):
    """Every JAXMg 1.4.1 name exists, with 1.4.1's parameters in 1.4.1's order (jaxmg may add
    keyword-only ones after them)."""
    missing = [name for name in JAXMG1_NAMES if not callable(getattr(jaxmg, name, None))]
    wrong = {}
    for public, (params, ctx, ctx_params) in JAXMG1_SIGNATURES.items():
        for name, expected in ((public, params), (ctx, ctx_params)):
            fn = getattr(jaxmg, name, None)
            if fn is None:
                continue
            params = inspect.signature(fn).parameters
            positional = [
                p for p, v in params.items() if v.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
            ]
            want = expected.split()
            # 1.4.1's positional parameters in its order; its keywords present (any order)
            if positional != want[: len(positional)] or not set(want) <= set(params):
                wrong[name] = list(params)
    vmm = inspect.signature(jaxmg.device_supports_vmm).parameters
    ok = not missing and not wrong and list(vmm) == ["device"] and vmm["device"].default == 0
    return check(ok, missing=missing, wrong=wrong)


@case("api:return_structures")
def _api_returns(env):
    """The ctx forms' return structures on a 1 x 1-shaped problem per routine, inside a jit
    (JAXMg's interface tests), and the public routines' output ranks."""
    mesh = mesh_of(env.devices, 1)
    n = 4 * env.devices
    a = place(spd(n, np.float32, 90), mesh, P("pr", "pc"))
    t = place(tall(2 * n, n, np.float32, 91), mesh, P("pr", "pc"))
    bv = place(np.ones(n, np.float32), mesh, P("pr"))
    tb = place(np.ones((2 * n, 1), np.float32), mesh, P("pr", None))
    shapes = {}
    w = place(tall(n, 2 * n, np.float32, 92), mesh, P("pr", "pc"))
    calls = {  # name: (function, its arrays); the ctx forms inside a jit
        "potrs_shardmap_ctx": (lambda m, v: jaxmg.potrs_shardmap_ctx(m, v, 2), (a, bv)),
        "potrs_shardmap_ctx:logdet": (
            lambda m, v: jaxmg.potrs_shardmap_ctx(m, v, 2, return_logdet=True),
            (a, bv),
        ),
        "lu_solve_shardmap_ctx": (lambda m, v: jaxmg.lu_solve_shardmap_ctx(m, v, 2), (a, bv)),
        "syevd_shardmap_ctx": (lambda m: jaxmg.syevd_shardmap_ctx(m, 2), (a,)),
        "qr_shardmap_ctx": (lambda m: jaxmg.qr_shardmap_ctx(m, 2), (t,)),
        "least_squares_shardmap_ctx": (
            lambda m, v: jaxmg.least_squares_shardmap_ctx(m, v, 2),
            (t, tb),
        ),
        "polar_shardmap_ctx": (lambda m: jaxmg.polar_shardmap_ctx(m, 2), (t,)),
        "gesvd_shardmap_ctx": (lambda m: jaxmg.gesvd_shardmap_ctx(m, 2), (t,)),
        "potrs": (
            lambda m, v: jaxmg.potrs(m, v, 2, return_status=True, return_logdet=True),
            (a, bv),
        ),
        "lu_solve": (lambda m, v: jaxmg.lu_solve(m, v, 2, return_status=True), (a, bv)),
        "least_squares": (lambda m, v: jaxmg.least_squares(m, v[:, 0], 2), (t, tb)),
        "gesvd:values": (
            lambda m: jaxmg.gesvd(m, 2, compute_u=False, compute_vh=False),
            (t,),
        ),
        "gesvd:full_wide": (lambda m: jaxmg.gesvd(m, 2, full_matrices=True), (w,)),
    }
    for name, (fn, args) in calls.items():
        out = jax.jit(fn)(*args) if name.endswith("ctx") else fn(*args)
        out = out if isinstance(out, tuple) else (out,)
        shapes[name] = [list(o.shape) for o in out]
    want = {
        "potrs_shardmap_ctx": [[n, n], [n], []],
        "potrs_shardmap_ctx:logdet": [[n, n], [n], [], []],
        "lu_solve_shardmap_ctx": [[n, n], [n], []],
        "syevd_shardmap_ctx": [[n, n], [n], [n, n], []],
        "qr_shardmap_ctx": [[2 * n, n], [n, n], []],
        "least_squares_shardmap_ctx": [[2 * n, n], [2 * n, 1], [n, 1], []],
        "polar_shardmap_ctx": [[2 * n, n], [n, n], []],
        "gesvd_shardmap_ctx": [[2 * n, n], [2 * n, n], [n], [n, n], []],
        "potrs": [[n], [], []],
        "lu_solve": [[n], []],
        "least_squares": [[n]],
        "gesvd:values": [[n]],
        "gesvd:full_wide": [[n, n], [n], [2 * n, 2 * n]],
    }
    return check(shapes == want, shapes=shapes)


@case("api:rank_1_matrix_specs")
def _api_rank1(env):
    """P('pr') means P('pr', None) (JAXMg normalizes the short form)."""
    mesh = Mesh(np.asarray(jax.devices(), dtype=object), ("pr",))
    n = 4 * env.devices
    t = tall(2 * n, n, np.float64, 93)
    s = jaxmg.gesvd(
        place(t, mesh, P("pr")),
        2,
        mesh=mesh,
        matrix_specs=P("pr"),
        compute_u=False,
        compute_vh=False,
    )
    return check(_svd_check(t, None, gather(s), None, np.float64)[0])


@case("api:non_boolean_flags")
def _api_flags(env):
    """A flag that is not a bool raises a TypeError naming it, before any work."""
    mesh = mesh_of(env.devices, 1)
    n = 4 * env.devices
    a = place(spd(n, np.float64, 94), mesh, P("pr", "pc"))
    t = place(tall(2 * n, n, np.float64, 95), mesh, P("pr", "pc"))
    b = place(np.ones(n), mesh, P("pr"))
    calls = {
        "compute_u": lambda v: jaxmg.gesvd(t, 2, compute_u=v),
        "compute_vh": lambda v: jaxmg.gesvd(t, 2, compute_vh=v),
        "full_matrices": lambda v: jaxmg.gesvd(t, 2, full_matrices=v),
        "compute_h": lambda v: jaxmg.polar(t, 2, compute_h=v),
        "return_eigenvectors": lambda v: jaxmg.syevd(a, 2, return_eigenvectors=v),
        "return_status": lambda v: jaxmg.qr(t, 2, return_status=v),
        "return_logdet": lambda v: jaxmg.potrs(a, b, 2, return_logdet=v),
        "pad": lambda v: jaxmg.lu_solve(a, b, 2, pad=v),
        "donate": lambda v: jaxmg.least_squares(
            t, place(np.ones(2 * n), mesh, P("pr")), 2, donate=v
        ),
        "check_symmetry": lambda v: jaxmg.potrs(a, b, 2, check_symmetry=v),
    }
    ctx_calls = {
        "compute_u": lambda v: jaxmg.gesvd_shardmap_ctx(t, 2, compute_u=v),
        "full_matrices": lambda v: jaxmg.gesvd_shardmap_ctx(t, 2, full_matrices=v),
        "compute_h": lambda v: jaxmg.polar_shardmap_ctx(t, 2, compute_h=v),
        "return_eigenvectors": lambda v: jaxmg.syevd_shardmap_ctx(a, 2, return_eigenvectors=v),
        "return_logdet": lambda v: jaxmg.potrs_shardmap_ctx(a, b, 2, return_logdet=v),
    }
    failures = []
    for group, table in (("public", calls), ("ctx", ctx_calls)):
        for flag, fn in table.items():
            for value in (1, "yes", None, jnp.bool_(True)):
                try:
                    fn(value)
                except TypeError as e:
                    if flag not in str(e):
                        failures.append(f"{group}:{flag}={value!r}: {e}")
                else:
                    failures.append(f"{group}:{flag}={value!r}: no TypeError")
    return check(not failures, failures=failures[:20])


# ---------------------------------------------------------------------------------------------
# The examples (examples/run_*.py): each one's run()


def _example(env, path):
    spec = importlib.util.spec_from_file_location(f"jaxmg_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rec = module.run()
    return check(rec.pop("ok"), **{k: _plain(v) for k, v in rec.items()})


for _path in sorted(EXAMPLES.glob("run_*.py")):
    case(f"example:{_path.stem}")(functools.partial(_example, path=_path))


@case("api:replicated_outputs_traced")
def _api_replicated_traced(env):
    """JAXMg's replicated-output check: traced (jax.eval_shape) on a replicated a of a
    one-axis Explicit mesh, the matrix results are replicated and the work arrays in the
    engine's layout, P('pr', None)."""
    mesh = Mesh(np.asarray(jax.devices(), dtype=object), ("pr",), axis_types=(AxisType.Explicit,))
    n = 4 * env.devices
    specs = {}
    with jax.set_mesh(mesh):
        a = place(np.eye(n), mesh, P())
        for name, fn, results, work in (
            ("syevd", jaxmg.syevd_shardmap_ctx, (2,), 0),
            ("gesvd", jaxmg.gesvd_shardmap_ctx, (1, 3), 0),
            ("qr", jaxmg.qr_shardmap_ctx, (0, 1), None),
            ("polar", jaxmg.polar_shardmap_ctx, (0, 1), None),
        ):
            out = jax.eval_shape(functools.partial(fn, T_A=2), a)
            specs[name] = dict(
                results=[str(out[i].sharding.spec) for i in results],
                work=None if work is None else str(out[work].sharding.spec),
            )
    replicated = str(P(None, None))
    ok = all(
        all(s == replicated for s in v["results"]) and v["work"] in (None, str(P("pr", None)))
        for v in specs.values()
    )
    return check(ok, specs=specs)
