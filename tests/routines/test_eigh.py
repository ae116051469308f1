"""syevd and eigh(a, b) on real multi-process CPU jobs: the cases of tests/solve_plan.py
whose names match ^(syevd|eigh-ab)/, from one worker per mesh that the modules of a run share
(tests/conftest.py). `pytest tests/routines/test_eigh.py` runs these cases alone.
"""

from __future__ import annotations

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check, check_verdict
from solve_plan import cpu_plan

pytestmark = [NEEDS_MPI, pytest.mark.solve_cases(r"^(syevd|syevd-subset|eigh-ab)/")]


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
        check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_syevd_subset_by_index(results, mesh):
    """subset_by_index=(lo, hi): the k lowest, a middle window, the k largest and one pair, in
    four dtypes, of syevd, values only, a user's jit, jaxmg.linalg.eigh, the context form, the
    per-block form and the generalized problem: eigenvalues within 10 n eps ‖A‖ of NumPy's
    lo:hi, ‖A V − V diag(w)‖ and ‖VᴴV − I‖ within 10 n eps for the N x k V, in a's sharding
    where k divides; the kept eigenvalues' forward derivative against Re diag(Vᴴ dA V) (of the
    generalized problem too) and reverse mode as its transpose, the
    kept eigenvectors' against V (F ∘ Vᴴ dA V) and reverse mode as its transpose; bad
    subsets refused by syevd, linalg.eigh and linalg.eigvalsh with a message naming the
    keyword. On 1-D grids also by the CPU engine's two stages (back-transformations on the k
    columns alone; lowest, inner, largest, values alone, a band of 64) and by p?syevr."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind.startswith("eigh-subset")]
    assert len(names) == 14 + (7 if 1 in mesh else 0)
    for name in names:
        check(records[name])


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_syevd_failures(results, mesh):
    """A matrix that is not Hermitian (status -1) or holds NaN (status > 0, with and without
    eigenvectors): NaN eigenvalues and eigenvectors on every rank, one status."""
    records = results(mesh)
    names = [n for n, kind, _ in cpu_plan(*mesh) if kind == "eigh-failure"]
    assert len(names) == 3
    for name in names:
        check_verdict(records[name])


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
        check_verdict(records[name])
