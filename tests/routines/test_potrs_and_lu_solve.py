"""potrs and lu_solve on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^(potrs|lu_solve)/, from one worker per mesh that the modules of a run share
(tests/conftest.py). `pytest tests/routines/test_potrs_and_lu_solve.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^(potrs|lu_solve)/")]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
def test_solutions_and_logdet(results, mesh, routine):
    """Dtypes x tiles (automatic, dividing, padding, one per piece), vector and many-column b,
    no padding, and each engine path (in place, transposed, redistributed; potrs on 1-D meshes
    also by jaxmg's 1-D Cholesky, cpu_cholesky="blocked")."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "solve" and n.startswith(routine + "/")]
    assert len(names) >= at_least(mesh, 20, 10)
    for name in names:
        check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
@pytest.mark.parametrize("kind", ["replicated-b", "permuted-devices", "inside-jit", "donate"])
def test_variants(results, mesh, routine, kind):
    check(results(mesh)[f"{routine}/{kind}"])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
@pytest.mark.parametrize("kind", ["singular", "nan-input"])
def test_failure_gives_nan_and_status_everywhere(results, mesh, routine, kind):
    r = results(mesh)[f"{routine}/{kind}"]
    assert "error" not in r, r
    assert r["x_all_nan"] and r["logdet_nan_all_ranks"] and r["recovers"], r
    assert len(set(r["status_all_ranks"])) == 1 and r["status_all_ranks"][0] > 0, r


ONE_D = [(mesh, name) for mesh, name in zip(MESHES, MESH_IDS, strict=True) if 1 in mesh]


@pytest.mark.parametrize("mesh", [m for m, _ in ONE_D], ids=[i for _, i in ONE_D])
def test_blocked_cholesky_reports_a_matrix_that_is_not_positive_definite(results, mesh):
    """potrs with cpu_cholesky="blocked" (jaxmg's 1-D Cholesky; the engine grid of a 1-D mesh is
    1 x P, in place or transposed), on a matrix with a negative diagonal entry: NaN solution and
    logdet, one positive status on every rank, and the next call works."""
    r = results(mesh)["potrs/singular/blocked"]
    assert "error" not in r, r
    assert r["x_all_nan"] and r["logdet_nan_all_ranks"] and r["recovers"], r
    assert len(set(r["status_all_ranks"])) == 1 and r["status_all_ranks"][0] > 0, r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_potrs_reports_a_matrix_that_is_not_symmetric(results, mesh):
    r = results(mesh)["potrs/not-symmetric"]
    assert "error" not in r, r
    assert r["x_all_nan"] and r["logdet_nan_all_ranks"], r
    assert set(r["status_all_ranks"]) == {-1}, r
    check(r)  # and with check_symmetry=False a symmetric matrix still solves


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
def test_compiled_program_has_no_xla_collective(results, mesh, routine):
    """Neither the matrix nor b is moved by XLA around the call, on both engine paths: an XLA
    collective there could pair with a peer's unrelated collective."""
    r = results(mesh)[f"{routine}/no-matrix-collective"]
    assert "error" not in r, r
    assert all(r["has_custom_call"].values()), r
    assert r["big_collectives"] == {"inplace": [], "transposed": []}, r
    if mesh != (1, 1):  # the detector sees a deliberate all-gather of the matrix
        assert r["control_detected"]
