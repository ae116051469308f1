"""Derivatives through jaxmg's routines on real multi-process CPU jobs (tests/mp/grad_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

WORKER = Path(__file__).parent / "mp" / "grad_worker.py"


SOLVE_MESH_CASES = {(2, 1): r"/float64/", (2, 2): r"/float64/.*/T5/"}


@pytest.mark.parametrize("mesh", [(1, 1), (2, 1), (2, 2)], ids=["1x1", "2x1", "2x2"])
def test_solve_and_log_determinant_gradients(tmp_path, mesh, monkeypatch):
    """check_grads (finite differences, forward and reverse mode) of Re(Σ w ⊙ x) and of
    Re(Σ w ⊙ x) + log-determinant for potrs and lu_solve, and of slogdet's logabsdet and sign,
    float64 and complex128, a matrix and a vector b, a tile that pads and the automatic one;
    the compiled gradient moves no matrix (largest collective < one shard); and second
    derivatives (order 2, both modes) of potrs's x and x + logdet and of lu_solve's. Every
    case on 1x1; on 2x1 the float64 cases and on 2x2 those in the tile that pads (the dtype is
    the same local rule on every mesh: complex128 runs on 1x1)."""
    if mesh in SOLVE_MESH_CASES:
        monkeypatch.setenv("JAXMG_CASES", SOLVE_MESH_CASES[mesh])
    out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 600)
    assert [r["case"] for r in out["records"]] == out["planned"]
    assert len(out["records"]) == {(1, 1): 24, (2, 1): 13, (2, 2): 8}[mesh]
    for r in out["records"]:
        assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
        assert r["ok"], r


MATRIX_WORKER = Path(__file__).parent / "mp" / "grad_matrix_worker.py"


# Every case on 1x1. On 1x2 (the tall factors' columns split) the cases that depend on the
# mesh: each routine's finite-difference check in float64 with a tile that pads, and the compiled
# collectives (float64: the dtype does not change them). On 2x2 the compiled collectives, the
# batched gradient and the finite-difference checks of one routine of each kind of rule (the
# inverse's, the eigensolver's, the tall QR's, QDWH's, the generalized eigenproblem's). The
# finite-difference checks in both dtypes on four processes of a 2-core machine took 10 minutes a
# mesh; 2x1 (140 s) adds no rule or collective that 1x2 and 2x2 do not have.
MESH_CASES = {
    (1, 2): r"/float64/T5$",
    (2, 2): r"^(inv|syevd|qr|polar|eigh-ab|[\w-]+-collectives|inv-vmap)-grad/float64/T5$",
}
PLANNED = {(1, 1): 83, (1, 2): 30, (2, 2): 18}


@pytest.mark.parametrize("mesh", [(1, 1), (1, 2), (2, 2)], ids=["1x1", "1x2", "2x2"])
def test_inverse_and_eigensolver_gradients(tmp_path, mesh, monkeypatch):
    """check_grads (finite differences, forward and reverse mode) of inv's and potri's inverse
    and log-determinant, of syevd's eigenvalues and eigenvectors (a phase-invariant loss,
    V sin(Λ) Vᴴ) and of the values-only path, of gesvd (U sin(S) Vh, and the values), polar
    (Up and H), qr (Q and R), least_squares (a matrix and a vector b), matmul, eigh(a, b)
    (with and without vectors, A and B moving), and solves and
    log-determinants with kept Cholesky and LU factors; float64 and complex128, a tile that
    pads and the automatic one; second derivatives of inv and potri; and, for inv, potri,
    syevd (with and without vectors), eigh(a, b) and matmul, whose rules take the engine's
    products, no XLA collective of matrix size in the compiled gradient; for qr,
    least_squares, gesvd and polar (2N x N), none larger than their N x N factors (on 1x2, where
    the tall factors' columns are split, they are moved to split rows, nothing gathered), and for
    square gesvd and polar (the engine's products) none larger than a shard; jax.vmap of inv's
    gradient."""
    if mesh in MESH_CASES:
        monkeypatch.setenv("JAXMG_CASES", MESH_CASES[mesh])
    out = run_cases(mesh[0] * mesh[1], MATRIX_WORKER, [str(mesh[0]), str(mesh[1])], tmp_path, 900)
    assert [r["case"] for r in out["records"]] == out["planned"]
    assert len(out["planned"]) == PLANNED[mesh]
    for r in out["records"]:
        assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
        assert r["ok"], r


@pytest.mark.parametrize("axis_types", ["explicit", "auto"])
def test_gaussian_process_example(tmp_path, axis_types):
    """examples/gaussian_process.py on 2 processes, on a mesh of Explicit axes (JAX's default)
    and of Auto axes: the NLL it reports matches NumPy's at the first and last
    hyperparameters, and gradient descent lowers it; then the posterior weights K⁻¹y, from a
    mixed precision solve on Explicit axes (float32 factor, refined), match the float64
    solve's."""
    import json

    import numpy as np
    from mpirun import run_mpi

    example = Path(__file__).parents[1] / "examples" / "gaussian_process.py"
    out = tmp_path / "gp.json"
    args = ["--n", "128", "--steps", "25", "--json", str(out), "--axis-types", axis_types]
    if axis_types == "explicit":
        args += ["--factor-dtype", "float32"]
    proc = run_mpi(2, example, args, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-2000:] + proc.stderr[-4000:]
    r = json.loads(out.read_text())
    assert r["axis_types"] == axis_types
    x, y = np.array(r["x"]), np.array(r["y"])

    def nll(variance, length, noise):
        k = variance * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / length**2)
        k += noise * np.eye(len(x))
        sign, logdet = np.linalg.slogdet(k)
        return 0.5 * y @ np.linalg.solve(k, y) + 0.5 * logdet + 0.5 * len(x) * np.log(2 * np.pi)

    history = r["history"]
    for h in (history[0], history[-1]):
        assert abs(h["nll"] - nll(*h["params"])) <= 1e-9 * max(1.0, abs(h["nll"])), h
    values = [h["nll"] for h in history]
    steps = zip(values[:-1], values[1:], strict=True)
    assert values[-1] < values[0] - 10 and all(b <= a + 1e-9 for a, b in steps)
    posterior = r["posterior"]
    if axis_types == "explicit":
        assert posterior["path"] in ("mixed", "gmres") and posterior["iterations"] >= 1, posterior
        assert posterior["weights_rel_diff"] <= 1e-9, posterior
    else:
        assert posterior["path"] == "float64" and posterior["weights_rel_diff"] == 0, posterior
