"""gesvd and polar on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^(gesvd|gesvd-subset|polar)/, from one worker per mesh that the modules of a
run share (tests/conftest.py). `pytest tests/routines/test_svd.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check, check_verdict
from solve_plan import GRAD_MESHES, cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^(gesvd|gesvd-subset|polar)/")]


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
        check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_gesvd_and_polar_failures(results, mesh):
    """NaN input: NaN outputs and one status > 0 on every rank; polar of a wide matrix and
    gesvd's full_matrices on a non-square one: a ValueError before any work."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "svd-failure"]
    assert len(names) == 4
    for name in names:
        check_verdict(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_gesvd_subset_by_index(results, mesh):
    """subset_by_index=(lo, hi), as jax.lax.linalg.svd's (counted from the smallest singular
    value, returned descending): the k largest, the smallest, a middle window, k that divides
    over the mesh and not, four dtypes; U, s, Vh and the values alone, U alone, a user's jit, a
    wide matrix, jaxmg.linalg.svd, the context form: s within 10 max(M, N) eps ‖A‖ of NumPy's
    kept values, U (M x k) and Vh (k x N) orthonormal, ‖A Vhᴴ − U diag(s)‖ within the same, in
    a's sharding where k divides; on 1x1, 1x2 and 2x2 (the derivatives' meshes, as
    solve_triangular's) the kept values' forward derivative against Re diag(Uᴴ dA V), and the
    rank-k part's forward and reverse derivatives against JAX's on one device."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "svd-subset"]
    assert len(names) == (10 if mesh in GRAD_MESHES else 9)
    for name in names:
        check(records[name])
