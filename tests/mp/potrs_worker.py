"""Runs potrs cases on every process of an MPI job and writes the measurements as JSON.

Usage: mpirun -n P python potrs_worker.py MESH_ROWS MESH_COLS SUITE OUT.json
Every process builds the same matrices from fixed seeds, places its shard, calls jaxmg and gathers
the distributed results; process 0 writes one record per case. The test asserts on the records.
"""

import json
import os
import re
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import (  # noqa: E402
    A_SPEC,
    B_SPEC,
    DTYPES,
    gather,
    inside_jit_case,
    local_scalars,
    measure,
    not_positive_definite_case,
    potrs_case,
    rhs,
    spd,
)
from linalg_cases import place as _place  # noqa: E402

jax.config.update("jax_enable_x64", True)

mesh_rows, mesh_cols, suite, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
mesh = jax.make_mesh((mesh_rows, mesh_cols), ("pr", "pc"))


COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce")
# "%name = <result shape> <collective>(" in compiled HLO text
COLLECTIVE_OP = re.compile(r"=\s*(.*?)\s(" + "|".join(COLLECTIVES) + r")(-start)?\(")


def place(x, spec):
    return _place(x, mesh, spec)


def case_basic(dtype_name, n, tile, k, pad=True):
    return potrs_case(mesh, dtype_name, n, tile, k, pad)


def case_inside_jit():
    return inside_jit_case(mesh, 48, 6)


def case_not_positive_definite():
    return not_positive_definite_case(mesh, 48, 4)


def case_transposed_tall_mesh():
    """The path that hands the engine aᴴ on meshes taller than wide (GPU default), on CPUs."""
    import jaxmg.routines.potrs as impl

    n = 48 if max(mesh_rows, mesh_cols) % min(mesh_rows, mesh_cols) == 0 else 60
    saved = set(impl.TRANSPOSE_TALL_MESHES)
    impl.TRANSPOSE_TALL_MESHES.add("cpu")
    try:
        a, b = spd(n, np.complex128, 11), rhs(n, 3, np.complex128, 11)
        fn = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=4, return_logdet=True))
        ap, bp = place(a, A_SPEC), place(b, B_SPEC)
        hlo = fn.lower(ap, bp).compile().as_text()
        x, logdet = fn(ap, bp)
    finally:
        impl.TRANSPOSE_TALL_MESHES.clear()
        impl.TRANSPOSE_TALL_MESHES.update(saved)
    rec = measure("transposed-tall-mesh", a, b, gather(x), local_scalars(logdet)[0][0])
    shard = (n // mesh_rows) * (n // mesh_cols)
    rec["big_collectives"] = [c for c, size in _collectives(hlo) if size >= shard]
    assert x.sharding.spec == B_SPEC, x.sharding.spec
    return rec


def case_replicated_b():
    n = 48
    a, b = spd(n, np.float64, 3), rhs(n, 2, np.float64, 3)
    x = jaxmg.potrs(place(a, A_SPEC), place(b, P(None, None)), T_A=4)
    return measure("replicated-b", a, b, gather(x))


def case_permuted_devices():
    """A mesh whose device order is not the process order: the grid follows the mesh."""
    n = 48 if max(mesh_rows, mesh_cols) % min(mesh_rows, mesh_cols) == 0 else 60
    order = np.random.default_rng(1).permutation(mesh_rows * mesh_cols)[::-1]
    devices = np.asarray(jax.devices(), dtype=object)[order].reshape(mesh_rows, mesh_cols)
    permuted = jax.sharding.Mesh(devices, ("pr", "pc"))
    a, b = spd(n, np.complex128, 9), rhs(n, 2, np.complex128, 9)
    x, logdet = jaxmg.potrs(
        _place(a, permuted, A_SPEC), _place(b, permuted, B_SPEC), T_A=4, return_logdet=True
    )
    return measure("permuted-devices", a, b, gather(x), local_scalars(logdet)[0][0])


def case_donate():
    n = 48
    a, b = spd(n, np.float32, 5), rhs(n, 1, np.float32, 5)
    x = jaxmg.potrs(place(a, A_SPEC), place(b, B_SPEC), T_A=4, donate=True)
    return measure("donate", a, b, gather(x))


def _collectives(hlo):
    """(line, result element count) of every collective op in a compiled HLO text."""
    moves = []
    for line in hlo.splitlines():
        op = COLLECTIVE_OP.search(line)
        if not op:
            continue
        shape = re.search(r"\w+\[([\d,]*)\]", op.group(1))
        size = int(np.prod([int(d) for d in shape.group(1).split(",") if d])) if shape else 0
        moves.append((line.strip()[:160], size))
    return moves


def case_no_allgather():
    n = 96
    a, b = spd(n, np.float64, 7), rhs(n, 2, np.float64, 7)
    fn = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=4, return_logdet=True))
    hlo = fn.lower(place(a, A_SPEC), place(b, B_SPEC)).compile().as_text()
    shard = (n // mesh_rows) * (n // mesh_cols)
    moves = _collectives(hlo)
    # Control: gathering the matrix on purpose must be seen by the same detector.
    gather_all = jax.jit(lambda a: jax.reshard(a, NamedSharding(mesh, P(None, None))) * 2)
    control = _collectives(gather_all.lower(place(a, A_SPEC)).compile().as_text())
    return dict(
        case="no-matrix-collective",
        big_collectives=[line for line, size in moves if size >= shard],
        n_collectives=len(moves),
        has_custom_call="jaxmg_scalapack_potrs" in hlo,
        control_detected=any(size >= shard for _, size in control),
    )


def current_rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def case_repeated(calls=1000):
    n = 48
    a, b = spd(n, np.float64, 8), rhs(n, 1, np.float64, 8)
    ap, bp = place(a, A_SPEC), place(b, B_SPEC)
    fn = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=4))
    for _ in range(100):  # warm up: caches, allocator pools
        x = fn(ap, bp)
    x.block_until_ready()
    rss0 = current_rss_kib()
    for _ in range(calls):
        x = fn(ap, bp)
    x.block_until_ready()
    rec = measure("repeated", a, b, gather(x))
    rec.update(calls=calls, rss_growth_kib=current_rss_kib() - rss0)
    return rec


def suite_cases():
    cases = []
    big = max(mesh_rows, mesh_cols)
    small = min(mesh_rows, mesh_cols)
    n = 48 if big % small == 0 else 60
    shard = n // big
    tiles = sorted({4, 5, shard, None} - {0}, key=lambda t: -1 if t is None else t)
    for dtype_name in DTYPES:
        for tile in tiles:
            cases.append(lambda d=dtype_name, t=tile: case_basic(d, n, t, 3))
    if suite == "full":
        cases += [
            lambda: case_basic("float64", n, 4, 0),
            lambda: case_basic("complex128", n, 7, 1),
            lambda: case_basic("float64", 2 * n, 3, 5),
            lambda: case_basic("float64", n, 4, 3, pad=False),
            case_replicated_b,
            case_transposed_tall_mesh,
            case_permuted_devices,
            case_inside_jit,
            case_donate,
            case_not_positive_definite,
            case_no_allgather,
            case_repeated,
        ]
    return cases


records = []
for fn in suite_cases():
    try:
        records.append(fn())
    except Exception as e:  # noqa: BLE001 - reported to the test
        records.append(
            dict(
                case=getattr(fn, "__name__", "case"),
                error=f"{type(e).__name__}: {e}",
                trace=traceback.format_exc()[-2000:],
            )
        )
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(dict(mesh=[mesh_rows, mesh_cols], records=records), f, indent=1)
