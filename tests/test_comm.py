"""Bootstrap bytes (NCCL ids) reach every process, through the key-value store and through MPI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mpirun import mpirun_available, run_mpi

WORKER = Path(__file__).parent / "mp" / "comm_worker.py"

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")


@pytest.mark.parametrize("transport", ["kv", "mpi"])
def test_every_process_gets_the_owners_bytes(tmp_path, transport, monkeypatch):
    if transport == "mpi":
        pytest.importorskip("mpi4py")
    monkeypatch.setenv("JAXMG_BOOTSTRAP", transport)
    out = tmp_path / "got.json"
    proc = run_mpi(3, WORKER, [str(out)], timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["transport"] == os.environ["JAXMG_BOOTSTRAP"]
    for per_process in got["got"]:
        assert per_process == [[o + 1] * 4 + [128] for o in range(3)]
