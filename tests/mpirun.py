"""Running real multi-process jobs under mpirun from the tests, each under a timeout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

MPI_FLAGS = ["--oversubscribe", "--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader"]


def mpirun_available() -> bool:
    return shutil.which("mpirun") is not None


def run_mpi(nprocs: int, script: Path, args: list[str], timeout: float, cwd: Path):
    """Runs `python script args` on nprocs MPI processes; returns CompletedProcess.

    A job that outlives `timeout` seconds is killed and reported as a failure (no hang).
    """
    cmd = ["mpirun", "-n", str(nprocs), *MPI_FLAGS]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, str(script), *args]
    env = dict(os.environ)
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    # One BLAS thread a process: the job's processes already take every core (with more, the
    # oversubscribed processes' BLAS threads take turns; measured 12 % slower on the 2x2 solve
    # worker of a 2-core machine).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return run_killable(cmd, timeout, cwd=cwd, env=env)


def run_killable(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """Runs cmd; past `timeout` seconds kills it and everything it started, and fails."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and every process it started
        stdout, stderr = proc.communicate()
        raise AssertionError(
            f"{' '.join(map(str, cmd))} hung (> {timeout}s):\n{stdout[-3000:]}\n{stderr[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def run_cases(nprocs: int, script: Path, args: list[str], tmp: Path, timeout: float = 300):
    """Runs a worker that writes its results as JSON to the path given last; returns them."""
    out = tmp / "results.json"
    proc = run_mpi(nprocs, script, [*args, str(out)], timeout, tmp)
    if proc.returncode != 0 or not out.exists():
        raise AssertionError(
            f"worker {script.name} {args} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    return json.loads(out.read_text())
