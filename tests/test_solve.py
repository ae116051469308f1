"""The solve plan's cases on real multi-process CPU jobs (ScaLAPACK over MPI), one worker per mesh
(tests/conftest.py): every planned case ran, memory stays flat over 1000 calls, and the JAXMg 1.x
README example runs unchanged. Each routine's checks are in tests/routines/ (test_qr.py: qr and
least_squares, ...); a run of this module alone runs every case.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, check
from solve_plan import MEMORY_MESHES, cpu_plan

pytestmark = NEEDS_MPI


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_exactly_the_planned_cases_ran(results, mesh):
    names = [name for name, _, _ in cpu_plan(*mesh)]
    assert len(names) == len(set(names)), "the plan repeats a case name"
    assert sorted(results(mesh)) == sorted(names)


@pytest.mark.solve_cases(r"^mixed-repeated$")
@pytest.mark.parametrize("mesh", MEMORY_MESHES, ids=[f"{r}x{c}" for r, c in MEMORY_MESHES])
def test_thousand_mixed_calls_flat_memory(results, mesh):
    r = results(mesh)["mixed-repeated"]
    check(r)
    assert r["calls"] == 1000 and r["rss_growth_kib"] < 4096, r


def test_readme_example_verbatim(tmp_path):
    """The JAXMg 1.x README example, unchanged, on 2 and 4 processes."""
    from mpirun import run_mpi

    example = Path(__file__).parents[1] / "examples" / "readme_example.py"
    for nprocs in (2, 4):
        proc = run_mpi(nprocs, example, [], timeout=180, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().splitlines()[-1] == "True", proc.stdout
