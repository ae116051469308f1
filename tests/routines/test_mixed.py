"""Mixed precision solves (factor_dtype=) of potrs and lu_solve on real multi-process CPU jobs
(tests/mp/mixed_worker.py): against NumPy's float64 solve over condition numbers 1e1 to 1e12,
the path taken, the output sharding, factor once and solve many, gradients, real failures and
the errors of bad arguments.

The low-precision factor of potrs is also jaxmg's 1-D Cholesky (`cpu_cholesky="blocked"`; on
1 x P grids, p?potrf elsewhere) at κ = 1e4 and 1e8. Every case runs on 1x1; the meshes of more
processes run the cases whose code depends on the mesh (the engine calls, the sharded residual
and GMRES's sums over rows) in float64 with the tile that pads and the one that divides (the
dtype is the same code on every mesh: complex128 runs on 1x1 and 2x2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

from jaxmg.routines.mixed import HOPELESS

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

WORKER = Path(__file__).resolve().parents[1] / "mp" / "mixed_worker.py"

MESH_CASES = {
    (1, 1): "",
    (2, 1): r"^(potrs|lu_solve)/(float64/kappa|factor/float64|failure)",
    (1, 2): r"^(lu_solve/float64/kappa|potrs/float64/kappa1e\+02|lu_solve/grad/float64)|/blocked",
    (2, 2): r"^(?!.*/blocked).*(/float64/kappa|complex128/kappa1e\+03|factor/float64|grad/float64"
    r"|inside-jit)",
}
PLANNED = {(1, 1): 33, (2, 1): 19, (1, 2): 12, (2, 2): 18}


def expected_path(case: str) -> str | None:
    """The path a solve case must take: refinement alone where κ ε(float32) is small, GMRES-IR
    at κ = 1e8, where classical refinement stalls, the float64 factorization at κ = 1e12."""
    if "kappa1e+12" in case:
        return "fallback"
    if "kappa1e+08" in case:
        return "gmres"
    if "kappa" in case:
        return "mixed"
    return None


@pytest.mark.parametrize("mesh", list(MESH_CASES), ids=[f"{r}x{c}" for r, c in MESH_CASES])
def test_mixed_precision_solves(tmp_path, mesh, monkeypatch):
    """Each case's x within 4 κ N ε of NumPy's float64 solve (forward) and within twice the
    refinement's criterion, max(N / 64, 4) ε, in backward error (the criterion itself by the
    solve's own count, where refinement converged), in b's sharding and dtype, status 0 on the
    path its κ calls for; the factor kept in float32 (complex64) for three solves; the
    gradients with respect to A and b (reverse) and A (forward) within κ N ε of the float64
    solve's; not positive definite, singular and not symmetric matrices give NaN and the
    status on every process; bad factor_dtype values raise ValueError naming what to pass."""
    monkeypatch.setenv("JAXMG_CASES", MESH_CASES[mesh])
    out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 600)
    assert [r["case"] for r in out["records"]] == out["planned"]
    assert len(out["records"]) == PLANNED[mesh]
    for r in out["records"]:
        assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
        assert r["ok"], r
        want = expected_path(r["case"])
        if want is not None:
            assert r["path"] == want, r
            assert r["info_backward"] <= r["backward_tol"], r
            if want != "fallback":
                assert r["info_backward"] <= r["backward_tol"] / 2, r
            if want == "mixed":
                assert 1 <= r["iterations"] <= 3, r
            # The condition estimate from the low-precision factor: a lower bound of κ₁(A)
            # within a factor of 10 where that factor resolves A (κ ε(float32) ≪ 1); past
            # HOPELESS / ε it rules refinement out, and the solve falls back at once.
            estimate, kappa1 = r["condition_estimate"], r["kappa1"]
            if kappa1 * r["factor_eps"] < 1e-2:
                assert kappa1 / 10 <= estimate <= kappa1 * 1.01, r
            if estimate * r["factor_eps"] > HOPELESS:
                assert r["path"] == "fallback" and r["iterations"] == 0, r
            elif want != "fallback":
                assert estimate * r["factor_eps"] <= HOPELESS, r
        if "/factor/" in r["case"]:
            assert r["paths"] == ["mixed"] * 3, r
        if r["case"] == "errors":
            assert all(m is not None for m in r["messages"].values()), r
