"""Calls that never hang: MPI starts at import, so programs over a sub-mesh work."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

MP = Path(__file__).parent / "mp"


def test_program_over_a_sub_mesh(tmp_path):
    """Processes 0 and 1 solve on their two devices; processes 2 and 3 make no jaxmg call."""
    out = run_cases(4, MP / "submesh_worker.py", [], tmp_path, timeout=240)
    assert out["seen"] == [0, 1, 2, 3]
    assert out["record"]["potrs"] < 1e-12 and out["record"]["lu_solve"] < 1e-12, out
