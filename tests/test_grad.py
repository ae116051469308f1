"""Derivatives through jaxmg's routines on real multi-process CPU jobs (tests/mp/grad_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

WORKER = Path(__file__).parent / "mp" / "grad_worker.py"


@pytest.mark.parametrize("mesh", [(1, 1), (2, 1), (2, 2)], ids=["1x1", "2x1", "2x2"])
def test_potrs_solution_and_logdet_gradients(tmp_path, mesh):
    """check_grads (finite differences, forward and reverse mode) of Re(Σ w ⊙ x) and of
    Re(Σ w ⊙ x) + logdet, float64 and complex128, a matrix and a vector b, a tile that pads and
    the automatic one; the compiled gradient moves no matrix (largest collective < one shard)."""
    out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 600)
    assert len(out["records"]) == 8
    for r in out["records"]:
        assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
        assert r["ok"], r
