"""potri on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^potri/, from one worker per mesh that the modules of a run share
(tests/conftest.py). `pytest tests/routines/test_potri.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^potri/")]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_potri_inverse_in_the_matrix_sharding(results, mesh):
    """potri: ‖A X − I‖ <= 20 n eps ‖A‖ ‖X‖, X Hermitian, a's sharding, logdet, every dtype and
    tile, no padding, redistribution, donation and a user's jit."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "inverse"]
    assert len(names) >= at_least(mesh, 12, 8)
    for name in names:
        r = records[name]
        assert "error" not in r, r
        assert r["residual"] <= r["residual_tol"], r
        assert r["same_sharding"] and r["status"] == 0 and r["ranks_agree"] and r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("kind", ["not-pd", "not-symmetric"])
def test_potri_failure_gives_nan_and_status_everywhere(results, mesh, kind):
    r = results(mesh)[f"potri/{kind}"]
    assert "error" not in r, r
    assert r["ok"], r


@pytest.mark.parametrize("mesh", [m for m in MESHES if m[1] == 1], ids=lambda m: f"{m[0]}x1")
def test_potri_jaxmg_0x_call_unchanged(results, mesh):
    r = results(mesh)["potri/jaxmg-0.x-call"]
    assert "error" not in r and r["ok"], r
