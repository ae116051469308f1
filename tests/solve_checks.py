"""What the tests of tests/solve_plan.py's cases share (tests/test_solve.py and the per-routine
modules in tests/routines/): the meshes, the worker, and the checks of a case's record."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available

WORKER = Path(__file__).parent / "mp" / "solve_worker.py"
MESHES = [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (3, 2)]
MESH_IDS = [f"{r}x{c}" for r, c in MESHES]
NEEDS_MPI = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")


def at_least(mesh, full, reduced):
    """The number of cases of a kind a mesh's plan holds (or the fewest): on meshes of more than
    two processes the plan keeps the cases that depend on the mesh (solve_plan.mesh_dependent)."""
    return full if mesh[0] * mesh[1] <= 2 else reduced


def check(r):
    """A case's record: no error, its residual and log-determinant within their tolerances, a
    zero status agreed by every rank, and its own verdict."""
    assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
    if "residual" in r:
        assert r["residual"] <= r["residual_tol"], (
            f"{r['case']}: residual {r['residual']:.3e} > {r['residual_tol']:.3e}"
        )
    if "logdet_err" in r:
        assert r["logdet_err"] <= r["logdet_tol"], (
            f"{r['case']}: logdet error {r['logdet_err']:.3e} > {r['logdet_tol']:.3e}"
        )
    if "status" in r:
        assert r["status"] == 0, r
    if "ranks_agree" in r:
        assert r["ranks_agree"], r
    assert r["ok"], r


def check_verdict(r):
    """A failure case's record: it ran (no error) and its own checks held."""
    assert "error" not in r, r
    assert r["ok"], r
