"""Runs the solve cases of one mesh (tests/solve_plan.py) on every process of an MPI job.

Usage: mpirun -n P python solve_worker.py MESH_ROWS MESH_COLS OUT.json
Every process builds the same matrices from fixed seeds, places its shard, calls jaxmg and gathers
the distributed results; process 0 writes one record per case, named as in the plan.
"""

import json
import os
import re
import sys
from pathlib import Path

import jax

jax.distributed.initialize()

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from eigh_cases import (  # noqa: E402
    eigh_case,
    eigh_failure_case,
    eigh_subset_case,
    eigh_subset_checks,
    generalized_case,
    generalized_failure_case,
)
from factor_cases import factor_case, factor_failure_case  # noqa: E402
from linalg_cases import (  # noqa: E402
    A_SPEC,
    B_SPEC,
    MATRICES,
    engine_path,
    gather,
    inside_jit_case,
    inverse_case,
    inverse_failure_case,
    local_scalars,
    measure,
    not_symmetric_case,
    rhs,
    routine_fn,
    run_named,
    singular_case,
    solve_case,
    spd,
)
from linalg_cases import place as _place  # noqa: E402
from matmul_cases import matmul_case  # noqa: E402
from qr_cases import qr_case, qr_failure_case  # noqa: E402
from solve_plan import cpu_plan  # noqa: E402
from svd_cases import svd_case, svd_failure_case, svd_subset_case  # noqa: E402
from triangular_cases import triangular_kinds  # noqa: E402

jax.config.update("jax_enable_x64", True)

mesh_rows, mesh_cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((mesh_rows, mesh_cols), ("pr", "pc"))

COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce")
# "%name = <result shape> <collective>(" in compiled HLO text
COLLECTIVE_OP = re.compile(r"=\s*(.*?)\s(" + "|".join(COLLECTIVES) + r")(-start)?\(")


def place(x, spec):
    return _place(x, mesh, spec)


def matrix(routine, n, dtype, seed):
    return MATRICES[routine](n, dtype, seed)


def case_replicated_b(routine, n):
    a, b = matrix(routine, n, np.float64, 3), rhs(n, 2, np.float64, 3)
    x = routine_fn(routine)(place(a, A_SPEC), place(b, P(None, None)), T_A=4)
    return measure("", a, b, gather(x))


def case_permuted_devices(routine, n):
    """A mesh whose device order is not the process order: the grid follows the mesh."""
    order = np.random.default_rng(1).permutation(mesh_rows * mesh_cols)[::-1]
    devices = np.asarray(jax.devices(), dtype=object)[order].reshape(mesh_rows, mesh_cols)
    permuted = jax.sharding.Mesh(devices, ("pr", "pc"))
    a, b = matrix(routine, n, np.complex128, 9), rhs(n, 2, np.complex128, 9)
    x, logdet = routine_fn(routine)(
        _place(a, permuted, A_SPEC), _place(b, permuted, B_SPEC), T_A=4, return_logdet=True
    )
    return measure("", a, b, gather(x), local_scalars(logdet)[0][0])


def case_inside_jit(routine, n):
    return inside_jit_case(mesh, routine, n)


def case_donate(routine, n):
    a, b = matrix(routine, n, np.float32, 5), rhs(n, 1, np.float32, 5)
    x = routine_fn(routine)(place(a, A_SPEC), place(b, B_SPEC), T_A=4, donate=True)
    return measure("", a, b, gather(x))


def case_singular(routine, n, path="default"):
    return singular_case(mesh, routine, n, 4, path)


def case_not_symmetric(routine, n):
    return not_symmetric_case(mesh, n)


def case_nan_input(routine, n):
    return singular_case(mesh, routine, n, 4, nan=True)


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


def case_no_matrix_collective(routine, n):
    """No XLA collective at all in the compiled program (one could pair with a peer's unrelated
    collective), on every engine path; the detector must see a deliberate all-gather of the
    matrix (control)."""
    n = 2 * n
    a, b = matrix(routine, n, np.complex128, 7), rhs(n, 2, np.complex128, 7)
    shard = (n // mesh_rows) * (n // mesh_cols)
    big, custom_call = {}, {}
    for path in ("inplace", "transposed"):
        with engine_path(routine, path, "cpu"):
            fn = jax.jit(lambda a, b: routine_fn(routine)(a, b, T_A=4, return_logdet=True))
            ap, bp = place(a, A_SPEC), place(b, B_SPEC)
            hlo = fn.lower(ap, bp).compile().as_text()
            x, logdet = fn(ap, bp)
        rec = measure("", a, b, gather(x), local_scalars(logdet)[0][0])
        assert rec["ok"], rec
        big[path] = [line for line, _ in _collectives(hlo)]
        custom_call[path] = f"jaxmg_scalapack_{routine}" in hlo
    gather_all = jax.jit(lambda a: jax.reshard(a, NamedSharding(mesh, P(None, None))) * 2)
    control = _collectives(gather_all.lower(place(a, A_SPEC)).compile().as_text())
    rec = dict(
        big_collectives=big,
        has_custom_call=custom_call,
        control_detected=any(size >= shard for _, size in control),
    )
    rec["ok"] = (
        all(not v for v in big.values())
        and all(custom_call.values())
        and (rec["control_detected"] or mesh_rows * mesh_cols == 1)
    )
    return rec


def current_rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def case_repeated(n, calls=1000):
    """1000 calls alternating potrs and lu_solve: right answers, flat memory."""
    a, b = matrix("potrs", n, np.float64, 8), rhs(n, 1, np.float64, 8)
    ap, bp = place(a, A_SPEC), place(b, B_SPEC)
    fns = [jax.jit(lambda a, b, r=r: routine_fn(r)(a, b, T_A=4)) for r in ("potrs", "lu_solve")]
    for i in range(100):  # warm up: caches, allocator pools
        x = fns[i % 2](ap, bp)
    x.block_until_ready()
    rss0 = current_rss_kib()
    for i in range(calls):
        x = fns[i % 2](ap, bp)
    x.block_until_ready()
    rec = measure("", a, b, gather(x))
    rec.update(calls=calls, rss_growth_kib=current_rss_kib() - rss0)
    rec["ok"] = rec["ok"] and rec["rss_growth_kib"] < 4096
    return rec


def case_potri_0x_call(n):
    """JAXMg 0.x's `potri(a, T_A, mesh, in_specs=P(axis, None))` on a 1-D mesh, unchanged."""
    mesh1 = jax.make_mesh((mesh_rows,), ("x",))
    a = spd(n, np.float64, 4)
    ap = jax.device_put(a, NamedSharding(mesh1, P("x", None)))
    inv = jaxmg.potri(ap, 4, mesh1, in_specs=P("x", None))
    err = float(np.abs(gather(inv) - np.linalg.inv(a)).max())
    rec = dict(max_error=err, spec=str(inv.sharding.spec))
    rec["ok"] = err < 1e-10 and inv.sharding.spec == P("x", None)
    return rec


KINDS = {
    "solve": lambda **p: solve_case(mesh, **p),
    "replicated-b": case_replicated_b,
    "permuted-devices": case_permuted_devices,
    "inside-jit": case_inside_jit,
    "donate": case_donate,
    "singular": case_singular,
    "nan-input": case_nan_input,
    "not-symmetric": case_not_symmetric,
    "no-matrix-collective": case_no_matrix_collective,
    "repeated": case_repeated,
    "inverse": lambda **p: inverse_case(mesh, **p),
    "inverse-failure": lambda **p: inverse_failure_case(mesh, **p),
    "factor": lambda **p: factor_case(mesh, **p),
    "factor-failure": lambda **p: factor_failure_case(mesh, **p),
    "qr": lambda **p: qr_case(mesh, **p),
    "qr-failure": lambda **p: qr_failure_case(mesh, **p),
    "eigh": lambda **p: eigh_case(mesh, **p),
    "eigh-failure": lambda **p: eigh_failure_case(mesh, **p),
    "eigh-subset": lambda **p: eigh_subset_case(mesh, **p),
    "eigh-subset-checks": lambda: eigh_subset_checks(mesh),
    "eigh-generalized": lambda **p: generalized_case(mesh, **p),
    "eigh-generalized-failure": lambda **p: generalized_failure_case(mesh, **p),
    "svd": lambda **p: svd_case(mesh, **p),
    "svd-failure": lambda **p: svd_failure_case(mesh, **p),
    "svd-subset": lambda **p: svd_subset_case(mesh, **p),
    "matmul": lambda **p: matmul_case(mesh, **p),
    "potri-0x-call": case_potri_0x_call,
    **triangular_kinds(mesh),
}

# JAXMG_CASES (a regular expression) runs only the matching cases: a development aid (the tests
# check that every planned case ran).
only = re.compile(os.environ.get("JAXMG_CASES", ""))
plan = {
    name: (lambda k=kind, p=params: KINDS[k](**p))
    for name, kind, params in cpu_plan(mesh_rows, mesh_cols)
    if only.search(name)
}
records = run_named(plan, [])
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(dict(mesh=[mesh_rows, mesh_cols], records=records), f, indent=1)
