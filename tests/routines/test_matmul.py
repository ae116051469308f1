"""matmul on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^matmul/, from one worker per mesh that the modules of a run share
(tests/conftest.py). `pytest tests/routines/test_matmul.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^matmul/")]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_matmul(results, mesh):
    """matmul: A B, Aᴴ B and A Bᴴ within 10 n eps ‖A‖ ‖B‖ of NumPy's, in a's sharding; four
    dtypes, the automatic tile and one that does not divide, a user's jit."""
    records = results(mesh)
    names = [n for n, k, _ in cpu_plan(*mesh) if k == "matmul"]
    assert len(names) == at_least(mesh, 25, 10)
    for name in names:
        check(records[name])
