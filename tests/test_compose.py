"""jaxmg under jax.set_mesh (Auto and Explicit axes, eager and inside jit), a user's jit with
donation, tracing on an AbstractMesh, and the per-block routines (potrs_blocks,
lu_solve_blocks, syevd_blocks) on blocks inside a user's shard_map, on real multi-process CPU
jobs (tests/mp/compose_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

WORKER = Path(__file__).parent / "mp" / "compose_worker.py"


@pytest.mark.parametrize("mesh", [(2, 1), (1, 2), (2, 2)], ids=["2x1", "1x2", "2x2"])
def test_set_mesh_jit_donation_and_abstract_mesh(tmp_path, mesh):
    out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 300)
    names = {r["case"] for r in out["records"]}
    assert names == {
        "set_mesh_auto",
        "set_mesh_explicit",
        "jit_donation",
        "abstract_mesh_trace",
        "shard_map_blocks",
    }
    for r in out["records"]:
        assert r["ok"], r
