"""The solve worker's results, shared by the modules of a run (tests/test_solve.py and
tests/routines/): one mpirun per mesh, which runs the plan's cases that the collected tests read.

A test module names its cases with `pytestmark = pytest.mark.solve_cases(REGEX)` (a regular
expression over tests/solve_plan.py's case names); a test that takes `results` without the mark
reads every case. So a full run starts one worker per mesh, as one module did, and
`pytest tests/routines/test_qr.py` runs qr's and least_squares's cases alone.
"""

from __future__ import annotations

import os

import pytest

# The tests compile many small programs that run briefly: LLVM's optimization of XLA's CPU code
# costs more time than it saves there (tests/test_grad.py's 1x1 solve gradients: 42 s against
# 33 s), and so does splitting each program's code generation over threads when the tests' MPI
# processes already outnumber the cores (the 3x2 solve worker: 91 s against 97 s). Every
# process the tests start inherits them.
_FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_cpu_parallel_codegen_split_count=1")
os.environ["XLA_FLAGS"] = " ".join(
    f for f in (os.environ.get("XLA_FLAGS", ""), *_FAST_COMPILE) if f
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "solve_cases(regex): the solve plan's cases (by name) that a test reads"
    )


def _selected_cases(items):
    """The JAXMG_CASES expression for the collected tests that read results ("" for all)."""
    patterns = set()
    for item in items:
        if "results" not in getattr(item, "fixturenames", ()):
            continue
        mark = item.get_closest_marker("solve_cases")
        if mark is None:
            return ""
        patterns.add(mark.args[0])
    return "|".join(f"(?:{p})" for p in sorted(patterns))


@pytest.fixture(scope="session")
def results(request, tmp_path_factory):
    """results(mesh): {case name: record} of the solve worker's run on that mesh (once)."""
    from mpirun import run_cases
    from solve_checks import WORKER

    selected = _selected_cases(request.session.items)
    cache = {}

    def get(mesh):
        if mesh not in cache:
            tmp = tmp_path_factory.mktemp(f"solve{mesh[0]}x{mesh[1]}")
            saved = os.environ.get("JAXMG_CASES")
            os.environ["JAXMG_CASES"] = selected
            try:
                out = run_cases(mesh[0] * mesh[1], WORKER, [str(mesh[0]), str(mesh[1])], tmp, 600)
            finally:
                if saved is None:
                    os.environ.pop("JAXMG_CASES")
                else:
                    os.environ["JAXMG_CASES"] = saved
            cache[mesh] = {r["case"]: r for r in out["records"]}
        return cache[mesh]

    return get
