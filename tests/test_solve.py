"""potrs and lu_solve on real multi-process CPU jobs (ScaLAPACK over MPI), one mpirun per mesh.

Each mesh's worker runs the cases of tests/solve_plan.py and records each under its plan name;
these tests assert the exact set of cases and every case's numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases
from solve_plan import cpu_plan

WORKER = Path(__file__).parent / "mp" / "solve_worker.py"
MESHES = [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (3, 2)]
MESH_IDS = [f"{r}x{c}" for r, c in MESHES]


def at_least(mesh, full, reduced):
    """The number of cases of a kind a mesh's plan holds (or the fewest): on meshes of more than
    two processes the plan keeps the cases that depend on the mesh (solve_plan.mesh_dependent)."""
    return full if mesh[0] * mesh[1] <= 2 else reduced


pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache = {}

    def get(mesh):
        if mesh not in cache:
            tmp = tmp_path_factory.mktemp(f"solve{mesh[0]}x{mesh[1]}")
            out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp, 600)
            cache[mesh] = {r["case"]: r for r in out["records"]}
        return cache[mesh]

    return get


def _check(r):
    assert "error" not in r, f"{r['case']}: {r['error']}\n{r.get('trace', '')}"
    if "residual" in r:
        assert r["residual"] <= r["residual_tol"], (
            f"{r['case']}: residual {r['residual']:.3e} > {r['residual_tol']:.3e}"
        )
    if "logdet_err" in r:
        assert r["logdet_err"] <= r["logdet_tol"], (
            f"{r['case']}: logdet error {r['logdet_err']:.3e} > {r['logdet_tol']:.3e}"
        )
    if "status" in r:
        assert r["status"] == 0, r
    if "ranks_agree" in r:
        assert r["ranks_agree"], r
    assert r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_exactly_the_planned_cases_ran(results, mesh):
    names = [name for name, _, _ in cpu_plan(*mesh)]
    assert len(names) == len(set(names)), "the plan repeats a case name"
    assert sorted(results(mesh)) == sorted(names)


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
def test_solutions_and_logdet(results, mesh, routine):
    """Dtypes x tiles (automatic, dividing, padding, one per piece), vector and many-column b,
    no padding, and each engine path (in place, transposed, redistributed)."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "solve" and n.startswith(routine + "/")]
    assert len(names) >= at_least(mesh, 20, 10)
    for name in names:
        _check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
@pytest.mark.parametrize("kind", ["replicated-b", "permuted-devices", "inside-jit", "donate"])
def test_variants(results, mesh, routine, kind):
    _check(results(mesh)[f"{routine}/{kind}"])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
@pytest.mark.parametrize("kind", ["singular", "nan-input"])
def test_failure_gives_nan_and_status_everywhere(results, mesh, routine, kind):
    r = results(mesh)[f"{routine}/{kind}"]
    assert "error" not in r, r
    assert r["x_all_nan"] and r["logdet_nan_all_ranks"] and r["recovers"], r
    assert len(set(r["status_all_ranks"])) == 1 and r["status_all_ranks"][0] > 0, r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_potrs_reports_a_matrix_that_is_not_symmetric(results, mesh):
    r = results(mesh)["potrs/not-symmetric"]
    assert "error" not in r, r
    assert r["x_all_nan"] and r["logdet_nan_all_ranks"], r
    assert set(r["status_all_ranks"]) == {-1}, r
    _check(r)  # and with check_symmetry=False a symmetric matrix still solves


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["potrs", "lu_solve"])
def test_compiled_program_has_no_xla_collective(results, mesh, routine):
    """Neither the matrix nor b is moved by XLA around the call, on both engine paths: an XLA
    collective there could pair with a peer's unrelated collective."""
    r = results(mesh)[f"{routine}/no-matrix-collective"]
    assert "error" not in r, r
    assert all(r["has_custom_call"].values()), r
    assert r["big_collectives"] == {"inplace": [], "transposed": []}, r
    if mesh != (1, 1):  # the detector sees a deliberate all-gather of the matrix
        assert r["control_detected"]


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_thousand_mixed_calls_flat_memory(results, mesh):
    r = results(mesh)["mixed-repeated"]
    _check(r)
    assert r["calls"] == 1000 and r["rss_growth_kib"] < 4096, r


def test_readme_example_verbatim(tmp_path):
    """The JAXMg 1.x README example, unchanged, on 2 and 4 processes."""
    from mpirun import run_mpi

    example = Path(__file__).parents[1] / "examples" / "readme_example.py"
    for nprocs in (2, 4):
        proc = run_mpi(nprocs, example, [], timeout=180, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().splitlines()[-1] == "True", proc.stdout


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
        _check(r)
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
        r = records[name]
        assert "error" not in r, r
        assert r["ok"], r


@pytest.mark.parametrize("mesh", [m for m in MESHES if m[1] == 1], ids=lambda m: f"{m[0]}x1")
def test_potri_jaxmg_0x_call_unchanged(results, mesh):
    r = results(mesh)["potri/jaxmg-0.x-call"]
    assert "error" not in r and r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("routine", ["qr", "lstsq"])
def test_qr_and_least_squares(results, mesh, routine):
    """qr (‖QR − A‖/‖A‖ and ‖QᴴQ − I‖ within 10 m eps, exact zeros below R's diagonal, Q in a's
    sharding) and least_squares (normal-equation residual within 10 m eps, x's shape), four
    dtypes, tiles that divide and pad, square and tall matrices, a user's jit, donation, one
    right-hand side and a vector b; statuses agreed by every rank."""
    records = results(mesh)
    names = [n for n, kind, p in cpu_plan(*mesh) if kind == "qr" and p["routine"] == routine]
    assert len(names) >= at_least(mesh, 10, 5)
    for name in names:
        _check(records[name])


def test_the_1d_qr_on_four_process_columns(tmp_path, monkeypatch):
    """qr on a 1 x 4 mesh, a 1 x 4 engine grid, where the CPU engine runs its 1-D QR with
    look-ahead (on the meshes above, only 1 x 1 and 1 x 2 give 1-D grids): the cases that depend
    on the mesh (float64 in every tile, complex128 in the padding one, a square matrix, the
    variants, ScaLAPACK's path) and the failures, within the same tolerances."""
    monkeypatch.setenv("JAXMG_CASES", r"^qr/")
    out = run_cases(4, WORKER, ["1", "4"], tmp_path, 600)
    records = {r["case"]: r for r in out["records"]}
    names = [n for n, _, _ in cpu_plan(1, 4) if n.startswith("qr/")]
    assert sorted(records) == sorted(names) and len(names) >= 10
    for name in names:
        _check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_qr_and_least_squares_failures(results, mesh):
    """NaN input and a rank-deficient least-squares problem: NaN outputs and one status > 0 on
    every rank; M < N or b with the wrong rows: a ValueError before any work."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "qr-failure"]
    assert len(names) == 5
    for name in names:
        r = records[name]
        assert "error" not in r, r
        assert r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_syevd(results, mesh):
    """syevd: eigenvalues (ascending, whole on every device) within 10 n eps ‖A‖ of
    numpy.linalg.eigvalsh, ‖A V − V diag(w)‖ and ‖VᴴV − I‖ within 10 n eps, V in a's sharding;
    four dtypes, tiles, eigenvalues only, a user's jit, donation, degenerate and clustered
    spectra; statuses agreed by every rank."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "eigh"]
    assert len(names) >= at_least(mesh, 15, 12)
    for name in names:
        _check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_syevd_failures(results, mesh):
    """A matrix that is not Hermitian (status -1) or holds NaN (status > 0, with and without
    eigenvectors): NaN eigenvalues and eigenvectors on every rank, one status."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "eigh-failure"]
    assert len(names) == 3
    for name in names:
        r = records[name]
        assert "error" not in r, r
        assert r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_gesvd_and_polar(results, mesh):
    """gesvd: singular values (descending, whole on every device) within 10 max(M, N) eps ‖A‖
    of numpy.linalg.svd, ‖U diag(s) Vh − A‖ and the orthogonality of U and Vh within
    10 max(M, N) eps, U in a's sharding; values-only, U-only and Vh-only paths, a wide matrix,
    a zero column, clustered values, a user's jit, donation. polar: ‖Up H − A‖, ‖UpᴴUp − I‖,
    H Hermitian positive semi-definite and equal to NumPy's (AᴴA)^½; four dtypes, tiles that
    divide and do not; statuses agreed by every rank."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "svd"]
    assert len(names) >= at_least(mesh, 25, 20)
    for name in names:
        _check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_gesvd_and_polar_failures(results, mesh):
    """NaN input: NaN outputs and one status > 0 on every rank; polar of a wide matrix and
    gesvd's full_matrices on a non-square one: a ValueError before any work."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "svd-failure"]
    assert len(names) == 4
    for name in names:
        r = records[name]
        assert "error" not in r, r
        assert r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_generalized_eigh(results, mesh):
    """eigh(a, b): eigenvalues within 10 n eps of NumPy's (of L⁻¹ A L⁻ᴴ), ‖A V − B V diag(w)‖
    and ‖Vᴴ B V − I‖ within 10 n eps, V in a's sharding; four dtypes, tiles, values only, a
    user's jit. B not positive definite (status > N), NaN in B (status > 0): NaN everywhere;
    b of another shape: ValueError."""
    records = results(mesh)
    names = [n for n, k, _ in cpu_plan(*mesh) if k.startswith("eigh-generalized")]
    assert len(names) == at_least(mesh, 13, 8)
    for name in names:
        r = records[name]
        assert "error" not in r, r
        assert r["ok"], r


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_matmul(results, mesh):
    """matmul: A B, Aᴴ B and A Bᴴ within 10 n eps ‖A‖ ‖B‖ of NumPy's, in a's sharding; four
    dtypes, the automatic tile and one that does not divide, a user's jit."""
    records = results(mesh)
    names = [n for n, k, _ in cpu_plan(*mesh) if k == "matmul"]
    assert len(names) == at_least(mesh, 25, 10)
    for name in names:
        _check(records[name])
