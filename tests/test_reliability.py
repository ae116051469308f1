"""Calls that never hang: MPI starts at import, so programs over a sub-mesh work."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")

MP = Path(__file__).parent / "mp"


def test_program_over_a_sub_mesh(tmp_path):
    """Processes 0 and 1 solve on their two devices; processes 2 and 3 make no jaxmg call."""
    out = run_cases(4, MP / "submesh_worker.py", [], tmp_path, timeout=240)
    assert out["seen"] == [0, 1, 2, 3]
    assert out["record"]["potrs"] < 1e-12 and out["record"]["lu_solve"] < 1e-12, out


def _agreement(tmp_path, scenario, env=None):
    import json
    import os

    from mpirun import run_mpi

    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        prefix = tmp_path / "out"
        proc = run_mpi(2, MP / "agreement_worker.py", [scenario, str(prefix)], 180, tmp_path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    files = [tmp_path / f"out.{rank}.json" for rank in (0, 1)]
    assert all(f.exists() for f in files), proc.stdout[-2000:] + proc.stderr[-4000:]
    return [json.loads(f.read_text()) for f in files]


@pytest.mark.parametrize(
    "scenario,field",
    [
        ("divergent-tile", "tile"),
        ("divergent-routine", "routine"),
        ("divergent-switch", "algorithm switches"),
        ("divergent-env", "algorithm switches"),
    ],
)
def test_ranks_that_disagree_get_the_same_error_then_recover(tmp_path, scenario, field):
    records = _agreement(tmp_path, scenario)
    # The same error on every rank (JAX may word its own prefix differently).
    messages = {r["first"].get("message", "").partition("jaxmg:")[2] for r in records}
    assert len(messages) == 1, messages
    (message,) = messages
    assert not records[0]["first"]["ok"] and f"disagree on the {field}" in message, message
    for r in records:  # the next, agreeing call works
        assert r["then"]["ok"] and r["then"]["error_max"] < 1e-12, r
    if scenario == "divergent-env":  # each read its environment once, at its first call
        assert [r["default_cpu_lu"] for r in records] == ["auto", "scalapack"], records


def test_a_failure_inside_the_1d_lu_on_one_rank_reaches_every_rank(tmp_path):
    """A local error on one rank mid-algorithm (the test hook) stops no peer in a broadcast:
    every rank returns the same error, naming the rank, and the next call works."""
    records = _agreement(tmp_path, "injected-lu")
    for point in ("lu:0:0", "lu:1:1", "lu:0:11"):
        _assert_injected_everywhere(records, point, "lu")


def _assert_injected_everywhere(records, point, agreed):
    """The injected failure at `point` came back on every rank as one error, agreed by the
    algorithm `agreed` and naming the failing rank; the call after it was right."""
    rank = point.split(":")[1]
    messages = {r[point].get("message", "").partition("jaxmg:")[2] for r in records}
    assert len(messages) == 1, (point, messages)
    (message,) = messages
    assert not records[0][point]["ok"], records[0][point]
    assert f"injected failure (test_fail={point})" in message, message
    assert f"[{agreed}: on rank {rank} of 2; every rank stopped with this error]" in message
    for r in records:
        assert r[point + "/then"]["ok"] and r[point + "/then"]["error_max"] < 1e-10, r


def test_a_failure_inside_the_blocked_inverse_on_one_rank_reaches_every_rank(tmp_path):
    """The blocked inverses (PBLAS on the CPU engine): a local error on one rank in either sweep
    of potri's, or in the product of inv's, reaches every rank as the same error at the
    algorithm's agreement; the next call works."""
    records = _agreement(tmp_path, "injected-inverse")
    for point in ("inv_triangular:1:2", "inv_cholesky:0:0", "inv_cholesky:1:5", "inv:1:3"):
        agreed = "inv" if point.startswith("inv:") else "inv_cholesky"
        _assert_injected_everywhere(records, point, agreed)


def test_a_failure_inside_the_1d_qr_on_one_rank_reaches_every_rank(tmp_path):
    """The 1-D QR (a 1 x 2 grid): a local error on one rank in the factorization (at its first
    and last tile columns and one between) or in Q's formation reaches every rank as the same
    error at that algorithm's agreement; the next call works."""
    records = _agreement(tmp_path, "injected-qr")
    for point in ("qr:0:0", "qr:1:3", "qr:0:5", "orgqr:1:0", "orgqr:0:4"):
        _assert_injected_everywhere(records, point, point.split(":")[0])


def test_a_failure_inside_the_two_stage_eigensolver_on_one_rank_reaches_every_rank(tmp_path):
    """The two-stage eigensolver (algorithms/band_eigh.h over the CPU backend, a 1 x 2 grid): a
    local error on one rank in the band reduction (before a panel's all-reduce, which the failed
    rank still enters), in the chase on rank 0, before the collective tridiagonal solve (on
    either rank), in Q₂ or in Q₁, and in the eigenvalues' chase and solve on rank 0, reaches
    every rank as the same error; the next call's V diag(w) Vᴴ (or w) is right. So too for a
    subset_by_index (the k columns gathered from their owners, then Q₂ and Q₁ on them)."""
    records = _agreement(tmp_path, "injected-band")
    points = ("band_reduce:1:1", "band_reduce:0:11", "band_eigh:0:0", "band_eigh:0:1")
    points += ("band_eigh:1:1", "band_eigh:1:2", "band_eigh:1:3", "band_eigvals:0:0")
    for point in points:
        _assert_injected_everywhere(records, point, point.split(":")[0])
    for point in ("band_eigh:0:1", "band_eigh:1:1", "band_eigh:1:2", "band_eigh:0:3"):
        subset = [
            {point: r["subset " + point], point + "/then": r["subset " + point + "/then"]}
            for r in records
        ]
        _assert_injected_everywhere(subset, point, "band_eigh")


def test_a_failure_inside_qdwh_on_one_rank_reaches_every_rank(tmp_path):
    """QDWH (algorithms/qdwh.h over the CPU backend, a 2 x 1 grid): a local error on one rank in
    the bounds, a QR step, a Cholesky step or the Newton–Schulz step reaches every rank as the
    same error at that step's agreement; the next call's Up H equals A."""
    records = _agreement(tmp_path, "injected-polar")
    for point in ("polar:0:0", "polar:1:2", "polar:0:4", "polar:1:6"):
        _assert_injected_everywhere(records, point, "polar")


def test_retry_after_a_python_error_on_one_rank(tmp_path):
    r0, r1 = _agreement(tmp_path, "retry")
    assert r0["bad"]["type"] == "ValueError"
    assert r0["first"]["ok"] and r1["first"]["ok"], (r0, r1)
    assert max(r0["first"]["error_max"], r1["first"]["error_max"]) < 1e-12


def test_a_peer_that_never_comes_is_an_error_within_the_timeout(tmp_path):
    r0, r1 = _agreement(tmp_path, "absent-peer", {"JAXMG_CALL_TIMEOUT": "3"})
    first, then = r0["first"], r0["then"]
    assert not first["ok"] and "JAXMG_CALL_TIMEOUT = 3 s" in first["message"], first
    assert 2.5 < first["seconds"] < 30, first
    # Later calls refuse at once: the processes can no longer pair their calls.
    assert not then["ok"] and "restart the job" in then["message"] and then["seconds"] < 2, then


@pytest.mark.parametrize("mesh", [(2, 1), (2, 2)], ids=["2x1", "2x2"])
def test_many_independent_calls_in_one_program(tmp_path, mesh):
    """8 independent solves in one jit, 20 times, on 2 and 4 processes: each rank runs them in
    the same order (a mismatch would pair different systems and be caught by the call agreement
    or give wrong solutions)."""
    out = run_cases(
        mesh[0] * mesh[1],
        MP / "ordering_worker.py",
        [str(mesh[0]), str(mesh[1])],
        tmp_path,
        timeout=300,
    )
    assert out["calls"] == 8 and out["repeats"] == 20
    assert out["worst_error"] < 1e-12, out


def test_explicit_mesh_column_sharding_and_wrong_spec(tmp_path):
    out = run_cases(2, MP / "explicit_worker.py", [], tmp_path, timeout=180)
    assert out["potrs"] < 1e-12 and out["lu_solve"] < 1e-12, out
    assert out["wrong_spec"].startswith("ValueError") and "disagrees" in out["wrong_spec"], out


def test_two_threads_per_process_never_give_a_wrong_answer(tmp_path):
    """Each process runs two threads that solve their own systems at the same time: a call
    either returns its own system's solution or raises the overlap error; never wrong numbers."""
    out = run_cases(2, MP / "threads_worker.py", [], tmp_path, timeout=240)
    assert not out["other"], out["other"]
    for ok, errors, wrong, other in out["per_process"]:
        assert wrong == 0 and other == 0 and ok + errors == out["calls"], out


def test_1000_mixed_calls_leak_nothing(tmp_path):
    """Solves, statuses (NaN input, one triangle), Python errors, jit and eager, two dtypes:
    resident memory, file descriptors and threads stay flat after the warm-up."""
    import json

    from mpirun import run_mpi

    proc = run_mpi(2, MP / "soak_worker.py", ["1000", str(tmp_path / "out")], 600, tmp_path)
    files = [tmp_path / f"out.{r}.json" for r in (0, 1)]
    assert proc.returncode == 0 and all(f.exists() for f in files), proc.stderr[-4000:]
    for rec in (json.loads(f.read_text()) for f in files):
        assert rec["outcomes"] == {
            "ok": 700,
            "status>0": 100,
            "not-symmetric": 100,
            "value-error": 100,
        }, rec
        start, end = rec["after_warmup"], rec["end"]
        assert end["fds"] == start["fds"] and end["threads"] == start["threads"], rec
        assert end["rss_kib"] - start["rss_kib"] < 8 * 1024, rec  # 800 calls: < 10 KiB each


def test_a_process_killed_mid_call_ends_the_whole_job(tmp_path):
    """Process 1 is killed (SIGKILL) inside a solve while process 0 is inside the same one: the
    job ends at once with an error status, and no process is left behind."""
    import time

    from mpirun import run_mpi

    t0 = time.monotonic()
    proc = run_mpi(
        2, MP / "kill_worker.py", ["2400", "1", "0.5", str(tmp_path / "out")], 120, tmp_path
    )
    elapsed = time.monotonic() - t0
    logs = [(tmp_path / f"out.{r}.log").read_text() for r in (0, 1)]
    assert proc.returncode != 0 and elapsed < 60, (proc.returncode, elapsed)
    assert "call 1" in logs[1] and "finished" not in logs[0], logs
    assert "exited on signal 9" in proc.stderr, proc.stderr[-2000:]
    for log in logs:
        pid = int(log.split()[1])
        deadline = time.monotonic() + 10
        # Gone, or a zombie waiting for its parent to reap it (it runs no more).
        while _running(pid):
            assert time.monotonic() < deadline, f"process {pid} outlived the job"
            time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_program_that_exits_with_calls_running_ends(tmp_path):
    """jaxmg calls still running at exit (never waited for): the processes wait for them before
    MPI_Finalize, and the job ends with status 0 (it hung in MPI_Finalize before)."""
    from mpirun import run_mpi

    proc = run_mpi(2, MP / "exit_worker.py", [], timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.count("leaving with the results unread") == 2
