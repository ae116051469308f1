"""solve_triangular on real multi-process CPU jobs: the cases of tests/solve_plan.py whose names
match ^solve_triangular/, from one worker per mesh that the modules of a run share
(tests/conftest.py); and its argument checks, in this process.
`pytest tests/routines/test_solve_triangular.py` runs these alone.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from solve_checks import MESH_IDS, MESHES, NEEDS_MPI, at_least, check
from solve_plan import GRAD_MESHES, cpu_plan

import jaxmg

pytestmark = pytest.mark.solve_cases(r"^solve_triangular/")


def _records(results, mesh, kind):
    names = [n for n, k, _ in cpu_plan(*mesh) if k == kind]
    return names, results(mesh)


@NEEDS_MPI
@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_solve_triangular(results, mesh):
    """Four dtypes x tiles (automatic, dividing N, not dividing it), a variant each, with
    b split by rows and b sharded like a: residual <= 10 eps n ‖A‖ ‖X‖, SciPy's solution within
    50 n eps, x sharded as b, status 0 on every rank; NaN and Inf off the triangle read."""
    names, records = _records(results, mesh, "triangular")
    assert len(names) == at_least(mesh, 12, 3)
    for name in names:
        check(records[name])


@NEEDS_MPI
@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
def test_solve_triangular_variants(results, mesh):
    """Every variant (lower and upper, trans N, T and C, unit diagonal or not) in complex128,
    with both layouts of b, and a vector b."""
    names, records = _records(results, mesh, "triangular-variants")
    assert len(names) == 1
    for name in names:
        check(records[name])


@NEEDS_MPI
@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("kind", ["inside-jit", "vmap", "singular"])
def test_solve_triangular_other(results, mesh, kind):
    """Inside a user's jit (b's layout from in_specs there); jax.vmap; a zero or NaN on the
    diagonal (NaN and status 1 + its index on every rank; with unit_diagonal it solves)."""
    check(results(mesh)[f"solve_triangular/{kind}"])


@NEEDS_MPI
@pytest.mark.parametrize("mesh", GRAD_MESHES, ids=[f"{r}x{c}" for r, c in GRAD_MESHES])
def test_solve_triangular_derivatives(results, mesh):
    """jax.grad, jax.jvp and the jvp of the gradient, with respect to a and b, against
    jax.scipy.linalg.solve_triangular's: b split by rows and sharded like a, each trans."""
    check(results(mesh)["solve_triangular/grad"])


MESH = jax.make_mesh((1, 1), ("pr", "pc"))
A = np.triu(np.ones((4, 4)))


@pytest.mark.parametrize(
    "a, b, kwargs, error, message",
    [
        (A, np.ones(4), {"trans": 3}, ValueError, 'trans must be 0, 1, 2, "N", "T" or "C"'),
        (A, np.ones(4), {"trans": "X"}, ValueError, "got 'X'"),
        (A, np.ones(4), {"trans": True}, ValueError, "got True"),
        (A, np.ones(4), {"trans": 1.0}, ValueError, "got 1.0"),
        (A, np.ones(4), {"lower": 1}, TypeError, "lower must be a Python bool"),
        (A, np.ones(4), {"unit_diagonal": None}, TypeError, "unit_diagonal must be"),
        (A, np.ones(4), {"return_status": "yes"}, TypeError, "return_status must be"),
        (np.ones((4, 3)), np.ones(4), {}, ValueError, "square"),
        (A, np.ones(5), {}, ValueError, "shape (4,) or (4, K)"),
        (A, np.ones((4, 2, 1)), {}, ValueError, "shape (4,) or (4, K)"),
        (A.astype(np.int32), np.ones(4, np.int32), {}, TypeError, "float32, float64"),
        (A, np.ones(4, np.float32), {}, TypeError, "b.astype(a.dtype)"),
        (A, np.ones(4), {"T_A": 0}, ValueError, "positive integer"),
    ],
)
def test_bad_input_message(a, b, kwargs, error, message):
    """Bad arguments raise before any engine work, saying what to change."""
    with pytest.raises(error) as info:
        jaxmg.solve_triangular(a, b, mesh=MESH, **kwargs)
    assert message in str(info.value)
