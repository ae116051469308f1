"""inv, slogdet and the kept factors (cho_factor / cho_solve, lu_factor / lu_solve) on real
multi-process CPU jobs: the cases of tests/solve_plan.py whose names match ^(inv|slogdet|cho|lu)/,
from one worker per mesh that the modules of a run share (tests/conftest.py).
`pytest tests/routines/test_factors.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check, check_verdict
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^(inv|slogdet|cho|lu)/")]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["inv", "slogdet", "cho", "lu"])
def test_inv_slogdet_and_kept_factors(results, mesh, routine):
    """inv (‖A X − I‖, a's sharding), slogdet (sign and log|det| of a matrix with a nontrivial
    sign), cho_factor + cho_solve and lu_factor + lu_solve(factor, b) (two solves with one
    factor, residuals, logdet/sign), every dtype and tile, a user's jit, donation, the transposed
    LU path; statuses agreed by every rank."""
    records = results(mesh)
    names = [n for n, kind, p in cpu_plan(*mesh) if kind == "factor" and p["routine"] == routine]
    assert len(names) >= at_least(mesh, 10, 5)
    for name in names:
        r = records[name]
        check(r)
        if "sign_error" in r:
            assert r["sign_error"] <= 20 * r["n"] * r["eps"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_inv_slogdet_and_factor_failures(results, mesh):
    """Singular / not positive definite / NaN input: NaN solutions (slogdet: NumPy's 0, -inf for a
    singular matrix, NaN for NaN input) and one status > 0 on every rank."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "factor-failure"]
    assert len(names) == 5
    for name in names:
        check_verdict(records[name])
