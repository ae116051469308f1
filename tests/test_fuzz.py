"""Property-based tests of the public API on real processes: hypothesis draws calls (potrs,
lu_solve, potri;
order, right-hand sides, dtypes, mesh, sharding, tile, padding, donation, jit, bad arguments);
every call either solves its system on every process or raises the same clear error on every
process. Nothing hangs (the job runs under a timeout)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpirun import mpirun_available, run_mpi

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

MP = Path(__file__).parent / "mp"
MESHES = {2: [(1, 2), (2, 1)], 4: [(2, 2), (4, 1), (1, 4)]}
DTYPES = ["float32", "float64", "complex64", "complex128"]
CASES_PER_JOB = 40


@st.composite
def call(draw, procs: int):
    mesh = draw(st.sampled_from(MESHES[procs]))
    n = draw(st.sampled_from([0, 4, 8, 12, 16, 20, 24, 28, 36, 40, 48, 3, 6, 18]))
    dtype = draw(st.sampled_from(DTYPES))
    # Mostly well-formed calls; sometimes one mistake.
    mistake = draw(st.sampled_from(["none"] * 6 + ["b_rows", "b_dtype", "tile", "spec"]))
    rows, cols = mesh
    specs = (
        ["rows-cols", "cols-rows"]
        + (["rows"] if cols == 1 else [])
        + (["cols"] if rows == 1 else [])
    )
    if mistake == "spec":
        specs = [s for s in ("rows", "cols", "replicated") if s not in specs]
    return dict(
        routine=draw(st.sampled_from(["potrs", "lu_solve", "potri"])),
        n=n,
        b_rows=n + draw(st.sampled_from([1, -1])) if mistake == "b_rows" else n,
        nrhs=draw(st.sampled_from([0, 1, 2, 5])),
        dtype=dtype,
        b_dtype=draw(st.sampled_from([d for d in DTYPES if d != dtype]))
        if mistake == "b_dtype"
        else dtype,
        mesh=list(mesh),
        spec=draw(st.sampled_from(specs)),
        tile=draw(st.sampled_from([0, -2]))
        if mistake == "tile"
        else draw(st.sampled_from([None, None, 1, 2, 3, 4, 5, 8, 64])),
        pad=draw(st.booleans()),
        donate=draw(st.booleans()),
        jit=draw(st.booleans()),
        pass_mesh=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
    )


def draw_cases(procs: int) -> list[dict]:
    cases: list[dict] = []

    @settings(max_examples=CASES_PER_JOB, derandomize=True, database=None, deadline=None)
    @given(call(procs))
    def collect(case):
        cases.append(case)

    collect()
    return cases


# An error is clear when it is an argument error raised in Python before any work, or jaxmg's
# own message (from the engines); never a JAX-internal assertion or an engine crash.
CLEAR_TYPES = {"ValueError", "TypeError"}


@pytest.mark.parametrize("procs", [2, 4])
def test_every_call_solves_or_raises_the_same_clear_error(tmp_path, procs):
    cases = draw_cases(procs)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    proc = run_mpi(
        procs,
        MP / "fuzz_worker.py",
        [str(tmp_path / "cases.json"), str(tmp_path / "out")],
        timeout=600,
        cwd=tmp_path,
    )
    files = [tmp_path / f"out.{r}.json" for r in range(procs)]
    assert proc.returncode == 0 and all(f.exists() for f in files), (
        proc.stdout[-3000:] + proc.stderr[-5000:]
    )
    per_rank = [json.loads(f.read_text()) for f in files]
    solved = raised = 0
    for i, case in enumerate(cases):
        outcomes = [records[i] for records in per_rank]
        kinds = {o["outcome"] for o in outcomes}
        assert len(kinds) == 1, (case, outcomes)
        if kinds == {"solved"}:
            solved += 1
            for o in outcomes:
                assert o["shape_ok"] and o["status"] == 0, (case, o)
                assert o["residual"] <= o["tol"], (case, o)
        elif kinds == {"raised"}:
            raised += 1
            # The same error everywhere (JAX may prefix its own words to a message).
            messages = {re.sub(r"^.*?jaxmg", "jaxmg", o["message"], flags=re.S) for o in outcomes}
            assert len(messages) == 1, (case, outcomes)
            o = outcomes[0]
            assert o["type"] in CLEAR_TYPES, (case, o)
    assert solved >= CASES_PER_JOB // 3, (solved, raised)  # the draw is not all errors
