"""jaxmg.linalg (jax.numpy/SciPy-style names) and jax.vmap over the distributed routines, on 2
and 4 processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

WORKER = Path(__file__).parent / "mp" / "linalg_worker.py"


@pytest.mark.parametrize("mesh", [(2, 1), (2, 2)], ids=["2x1", "2x2"])
def test_linalg_names_match_numpy(tmp_path, mesh):
    out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 300)
    names = {r["case"] for r in out["records"]}
    assert names == {
        "solve",
        "solve_batched",
        "inv",
        "slogdet",
        "cho",
        "lu",
        "qr",
        "qr_batched",
        "eigh",
        "vmap_qr_lstsq_syevd",
        "vmap_potrs",
        "vmap_lu_solve_in_jit",
        "vmap_slogdet",
        "vmap_grad",
        "svd",
        "polar",
        "lstsq",
        "eigh_generalized",
        "vmap_gesvd",
    }
    for r in out["records"]:
        assert r["ok"], r
