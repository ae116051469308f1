"""The GPU cases with ranks sharing one GPU (tests/gpu/solve_gpu.py shared) cover what their
selection says, on every mesh of 2, 4 and 6 ranks: every routine in four dtypes, with a tile
that divides the pieces and one that pads; every engine path and failure of the full GPU plan.
The GPU machine runs them; this holds the selection itself, which needs no GPU."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from solve_plan import _GRID_CASE, MESH_FREE_VARIANTS, SHARED_MESHES, gpu_plan, shared_pick

SHARED = [shape for shapes in SHARED_MESHES.values() for shape in shapes]
IDS = [f"{r}x{c}" for r, c in SHARED]
DTYPES = {"float32", "float64", "complex64", "complex128"}


def picked(shape, twostage=False):
    pick = shared_pick(shape, twostage)
    return [name for name, _, _ in gpu_plan(*shape) if pick(name)]


def routine(name):
    return name.split("/")[0]


@pytest.mark.parametrize("shape", SHARED, ids=IDS)
def test_every_routine_in_four_dtypes_dividing_and_padding(shape):
    n = 64 if 64 % math.lcm(*shape) == 0 else 48
    piece = n // math.lcm(*shape)
    names = picked(shape)
    for r in {routine(name) for name, _, _ in gpu_plan(*shape)}:
        grid = [_GRID_CASE.match(name) for name in names if routine(name) == r]
        grid = [m for m in grid if m]
        if not grid:  # (the routines without a dtype x tile grid: its variants are below)
            continue
        assert {m.group(1) for m in grid} == DTYPES, r
        tiles = {int(m.group(2)) for m in grid if m.group(2).isdigit()}
        assert any(piece % t == 0 for t in tiles), (r, tiles)
        assert any(piece % t for t in tiles), (r, tiles)


@pytest.mark.parametrize("shape", SHARED, ids=IDS)
def test_every_path_failure_and_jit_case_runs(shape):
    """Beside the grids, only the grid-free variants and the orders above 64 are left out, and
    only on the meshes after a rank count's first."""
    names = set(picked(shape))
    count = shape[0] * shape[1]
    first = shape == SHARED_MESHES[count][0] and count <= 4
    order = re.compile(r"/n(\d+)/|/(\d+)x(\d+)/")
    for name, _, _ in gpu_plan(*shape):
        m = order.search(name)
        large = m is not None and max(int(g) for g in m.groups() if g) > (400 if first else 64)
        free = name.rsplit("/", 1)[-1] in MESH_FREE_VARIANTS
        if _GRID_CASE.match(name) or large or (free and not first):
            assert name not in names or not (large or (free and not first)), name
            continue
        assert name in names, name


@pytest.mark.parametrize("count", sorted(set(SHARED_MESHES) - {6}))
def test_grid_free_variants_run_once_per_rank_count(count):
    first = picked(SHARED_MESHES[count][0])
    assert {name.rsplit("/", 1)[-1] for name in first} >= MESH_FREE_VARIANTS - {"nopad"}
    for shape in SHARED_MESHES[count][1:]:
        assert not {name.rsplit("/", 1)[-1] for name in picked(shape)} & MESH_FREE_VARIANTS


def test_two_stage_stage_keeps_every_order():
    for shape in ((2, 1), (1, 2)):
        assert set(picked(shape, twostage=True)) >= set(picked(shape))
        assert any("/n640/" in name for name in picked(shape, twostage=True))


JOB_LISTS = Path(__file__).resolve().parents[1] / "scripts" / "gpu_jobs"


def jobs_of(path):
    """The jobs of one list of scripts/gpu_jobs: (stage, its variables) each."""
    jobs = [j.split() for j in path.read_text().replace("\n", " ").split(";") if j.strip()]
    return [(stage, dict(s.split("=", 1) for s in settings)) for stage, *settings in jobs]


def gate_jobs():
    """Every job of the gate_*.txt lists."""
    return [job for path in sorted(JOB_LISTS.glob("gate_*.txt")) for job in jobs_of(path)]


def test_gate_job_lists_name_real_stages_and_fit_the_gpu():
    """scripts/gpu_jobs/*.txt: every job is a stage of scripts/gpu_remote.sh and at most
    about 10 processes run side by side; together the gate_*.txt lists run every shared stage
    on every process count the plan has (2, 4, 6)."""
    remote = (JOB_LISTS.parent / "gpu_remote.sh").read_text()
    stages = set(re.findall(r"^    ([a-z0-9|]+)\)$", remote, re.M))
    stages = {s for alt in stages for s in alt.split("|")}
    lists = sorted(JOB_LISTS.glob("*.txt"))
    assert len([p for p in lists if p.name.startswith("gate_")]) == 12
    for path in lists:
        procs = 0
        for stage, env in jobs_of(path):
            assert stage in stages, (path.name, stage)
            procs += sum(int(x) for x in env.get("SHARED_PROCS", "1").split())
        assert procs <= 10, (path.name, procs)
    seen = {(stage, env.get("SHARED_PROCS")) for stage, env in gate_jobs()}
    for stage in ("shared", "sharedtwostage", "sharedfault", "sharedcases"):
        for p in ("2", "4") + (("6",) if stage == "shared" else ()):
            assert (stage, p) in seen, (stage, p)
    assert ("single", None) in seen


@pytest.mark.parametrize("shape", [(1, 1), *SHARED], ids=["1x1", *IDS])
def test_gate_lists_run_every_case_of_every_mesh(shape):
    """The gate's jobs for a mesh (its rank count, its JAXMG_GPU_MESHES) together pick every
    case of that mesh's plan with their JAXMG_GPU_CASES: a job split by routine families loses
    none (the subsets by index were missing from 2x2, 3x2 and 1x4's split jobs)."""
    count = shape[0] * shape[1]
    if count == 1:
        names = [f"mesh1x1/{name}" for name, _, _ in gpu_plan(1, 1)] + ["mesh1x1/eigh-repeated"]
        jobs = [env for stage, env in gate_jobs() if stage == "single"]
    else:
        tag = f"mesh{shape[0]}x{shape[1]}"
        names = [f"{tag}/{name}" for name in picked(shape)]
        jobs = [
            env
            for stage, env in gate_jobs()
            if stage == "shared"
            and env.get("SHARED_PROCS") == str(count)
            and f"{shape[0]}x{shape[1]}" in env.get("JAXMG_GPU_MESHES", f"{shape[0]}x{shape[1]}")
        ]
    assert jobs
    patterns = [env.get("JAXMG_GPU_CASES") for env in jobs]
    missed = [n for n in names if not any(p is None or re.search(p, n) for p in patterns)]
    assert not missed, missed


@pytest.mark.parametrize(
    "platform, rows, cols, standard, taken",
    [
        ("cuda", 1, 1, True, True),
        ("cuda", 1, 4, True, True),  # the engine's 4 x 1 grid: each GPU holds every column
        ("cuda", 2, 1, True, False),  # the engine's 1 x 2 grid: the pairs are kept where they lie
        ("cuda", 4, 1, True, False),
        ("cuda", 2, 2, True, False),
        ("cuda", 1, 2, False, False),  # the generalized problem: every pair, then kept
        ("cpu", 2, 3, False, True),
    ],
)
def test_gpu_engine_takes_a_subset_where_its_move_stays_on_each_device(
    platform, rows, cols, standard, taken
):
    """The GPU engine moves a subset's eigenpairs first on each device only on its grids of one
    column (csrc/engines/cusolvermp/vendor.cc refuses the others): 1 x P meshes, which the
    engine reads transposed. Sending it a subset on any other mesh fails on the GPU."""
    from types import SimpleNamespace

    from jaxmg.routines.syevd import engine_subset

    placement = SimpleNamespace(platform=platform, mesh_rows=rows, mesh_cols=cols)
    assert engine_subset(placement, standard) is taken
