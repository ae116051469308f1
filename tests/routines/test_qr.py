"""qr and least_squares on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^(qr|lstsq)/, from one worker per mesh that the modules of a run share
(tests/conftest.py). `pytest tests/routines/test_qr.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from mpirun import run_cases
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, WORKER, at_least, check, check_verdict
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^(qr|lstsq)/")]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["qr", "lstsq"])
def test_qr_and_least_squares(results, mesh, routine):
    """qr (‖QR − A‖/‖A‖ and ‖QᴴQ − I‖ within 10 m eps, exact zeros below R's diagonal, Q in a's
    sharding) and least_squares (normal-equation residual within 10 m eps, x's shape), four
    dtypes, tiles that divide and pad, square and tall matrices, a user's jit, donation, one
    right-hand side and a vector b; statuses agreed by every rank."""
    records = results(mesh)
    names = [n for n, kind, p in cpu_plan(*mesh) if kind == "qr" and p["routine"] == routine]
    assert len(names) >= at_least(mesh, 10, 5)
    for name in names:
        check(records[name])


def test_the_1d_qr_on_four_process_columns(tmp_path, monkeypatch):
    """qr on a 1 x 4 mesh, a 1 x 4 engine grid, where the CPU engine runs its 1-D QR with
    look-ahead (on the meshes above, only 1 x 1 and 1 x 2 give 1-D grids): the cases that depend
    on the mesh (float64 in every tile, complex128 in the padding one, a square matrix, the
    variants, ScaLAPACK's path) and the failures, within the same tolerances."""
    monkeypatch.setenv("JAXMG_CASES", r"^qr/")
    out = run_cases(4, WORKER, ["1", "4"], tmp_path, 600)
    records = {r["case"]: r for r in out["records"]}
    names = [n for n, _, _ in cpu_plan(1, 4) if n.startswith("qr/")]
    assert sorted(records) == sorted(names) and len(names) >= 10
    for name in names:
        check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_qr_and_least_squares_failures(results, mesh):
    """NaN input and a rank-deficient least-squares problem: NaN outputs and one status > 0 on
    every rank; M < N or b with the wrong rows: a ValueError before any work."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "qr-failure"]
    assert len(names) == 5
    for name in names:
        check_verdict(records[name])
