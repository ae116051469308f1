"""Tests of the command line `python -m jaxmg {info,launch,demo,bench}`.

Every command runs in a subprocess from tmp_path, so the installed jaxmg is the one imported,
and with a timeout, so a broken MPI setup fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jaxmg.cli import launch

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI not installed")


def jaxmg(tmp_path: Path, *args: str, timeout: float = 240, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "jaxmg", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def cpu_env(**extra: str) -> dict[str, str]:
    """This environment without GPU variables that would turn on launch's GPU checks."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(extra)
    return env


def write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def test_info(tmp_path):
    import jax

    out = jaxmg(tmp_path, "info", timeout=120)
    assert out.returncode == 0, out.stderr
    assert "jax:" in out.stdout and jax.__version__ in out.stdout
    labels = ("jaxmg:", "libjaxmg_cpu:", "Open MPI:", "ScaLAPACK:", "engines:", "GPU engine:")
    for label in (*labels, "configuration:"):
        assert label in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_no_command_prints_usage(tmp_path):
    out = jaxmg(tmp_path, timeout=60)
    assert out.returncode == 2
    assert "{launch,info,demo,bench}" in out.stdout


def test_help_texts(tmp_path, capsys):
    out = jaxmg(tmp_path, "--help", timeout=60)  # the real entry point, once
    assert out.returncode == 0, out.stderr
    for command in ("launch", "info", "demo", "bench"):
        assert command in out.stdout
    assert "times potrs" not in out.stdout
    from jaxmg.__main__ import main

    expected = {
        "launch": ("-n N", "--timeout", "--launcher", "srun", "mpirun", "--dry-run", "-m"),
        "info": ("native libraries", "devices"),
        "demo": ("--size", "--dtype", "--tile", "--timeout", "jaxmg.potrs"),
        "bench": (
            "--routine",
            "--sizes",
            "--matrix",
            "--tile",
            "--peer",
            "pip install matplotlib rich",
        ),
    }
    for command, words in expected.items():
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: python -m jaxmg {command}"), text[:200]
        for word in words:
            assert word in text, (command, word)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("jaxmg ")
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["info", "--bogus"]) == 2


def test_launch_argument_forms():
    parse = launch.parse_args
    assert parse(["-n", "2", "s.py", "-n", "1", "--x"]).target == ["s.py", "-n", "1", "--x"]
    assert parse(["-n2", "s.py"]).nprocs == 2
    assert parse(["--np=3", "--", "s.py", "--timeout", "1"]).target == ["s.py", "--timeout", "1"]
    args = parse(["-n", "2", "--timeout", "5", "-m", "pkg.mod", "--flag", "x"])
    assert args.target == ["-m", "pkg.mod", "--flag", "x"] and args.timeout == 5
    assert parse(["-n", "2", "--timeout", "0", "s.py"]).timeout is None
    assert parse(["-n", "2", "--launcher", "srun", "s.py"]).launcher == "srun"
    for bad, says in (
        ([], "-n"),
        (["-n", "0", "s.py"], "positive"),
        (["-n", "x", "s.py"], "positive integer"),
        (["-n", "2"], "no script"),
        (["-n", "2", "--timeout", "-1", "s.py"], "non-negative"),
        (["-n", "2", "--launcher", "pbs", "s.py"], "invalid choice"),
    ):
        with pytest.raises(launch.UsageError, match=says):
            parse(bad)


def fake_srun(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(0o755)
    return bin_dir


def test_launch_uses_srun_inside_a_slurm_allocation(tmp_path):
    bin_dir = fake_srun(tmp_path)
    path = f"{bin_dir}:{os.environ['PATH']}"
    env = cpu_env(SLURM_JOB_ID="4242", PATH=path)
    out = jaxmg(tmp_path, "launch", "-n", "4", "--dry-run", "s.py", "--size", "8", env=env)
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.split()
    assert cmd[:4] == [str(bin_dir / "srun"), "-n", "4", "--kill-on-bad-exit=1"]
    assert cmd[-5:] == [sys.executable, launch.RANK_OUTPUT, "s.py", "--size", "8"]
    assert "mpirun" not in out.stdout
    # --launcher mpirun overrides the allocation.
    out = jaxmg(tmp_path, "launch", "-n", "2", "--launcher", "mpirun", "--dry-run", "s.py", env=env)
    if shutil.which("mpirun"):
        assert out.returncode == 0 and "mpirun" in out.stdout.split()[0], out.stderr
    # Outside an allocation (no SLURM_JOB_ID) srun on PATH is not used.
    out = jaxmg(tmp_path, "launch", "-n", "2", "--dry-run", "s.py", env=cpu_env(PATH=path))
    if shutil.which("mpirun"):
        assert "srun" not in out.stdout and "mpirun" in out.stdout, out.stdout + out.stderr


def test_launch_srun_missing(tmp_path):
    env = cpu_env(PATH=str(tmp_path))
    out = jaxmg(tmp_path, "launch", "-n", "2", "--launcher", "srun", "s.py", env=env)
    assert out.returncode == 2
    assert "srun was not found" in out.stderr


def rank_output(tmp_path, body: str) -> subprocess.CompletedProcess:
    """Runs a script under jaxmg/cli/rank_output.py, as `jaxmg launch` runs each process."""
    script = write(tmp_path, "child.py", body)
    return subprocess.run(
        [sys.executable, launch.RANK_OUTPUT, str(script)],
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_rank_output_drops_gloo_line_written_in_pieces_and_nothing_else(tmp_path):
    out = rank_output(
        tmp_path,
        r"""
        import os, sys, time

        def w(fd, text, pause=0.0):
            os.write(fd, text.encode())
            time.sleep(pause)

        # Gloo's line, written in pieces as Gloo does (a pause longer than the partial-line wait)
        for piece in ["[Gloo] Rank ", "0", " is connected to ", "1", " peer ranks. ",
                      "Expected number of connected peer ranks is : ", "1", "\n"]:
            w(2, piece, 0.3 if piece == "0" else 0.0)
        w(1, "result 1\n")
        w(2, "[Gloo] Rank 1 is connected to 0 peer ranks. Expected number of connected peer "
             "ranks is : 1 and then an error\n")
        w(2, "[Gloo] connection refused\n")
        w(1, "EXAMPLE OK")  # print() writes the text, then its newline
        w(1, "\n")
        w(1, "progress 50%", 0.5)  # a partial line comes through after a pause
        sys.stdout.flush()
        w(1, "\rprogress 100%")  # and at the end of the stream
        sys.exit(3)
        """,
    )
    assert out.returncode == 3, out.stderr
    assert out.stdout.decode() == "result 1\nEXAMPLE OK\nprogress 50%\rprogress 100%"
    assert out.stderr.decode().splitlines() == [
        "[Gloo] Rank 1 is connected to 0 peer ranks. Expected number of connected peer ranks "
        "is : 1 and then an error",
        "[Gloo] connection refused",
    ]


def test_rank_output_forwards_signals_and_dies_by_the_same_signal(tmp_path):
    import signal

    script = write(
        tmp_path,
        "child.py",
        """
        import signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *a: print("got USR1", flush=True))
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, launch.RANK_OUTPUT, str(script)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline() == "got USR1\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


@needs_mpirun
def test_launch_runs_every_rank(tmp_path):
    script = write(
        tmp_path,
        "hello.py",
        """
        import sys
        import jax

        jax.distributed.initialize()
        print(f"rank {jax.process_index()} of {jax.process_count()} {sys.argv[1:]}", flush=True)
        """,
    )
    out = jaxmg(tmp_path, "launch", "-n", "2", "--timeout", "120", script.name, "--flag", "x")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rank 0 of 2 ['--flag', 'x']" in out.stdout
    assert "rank 1 of 2 ['--flag', 'x']" in out.stdout
    assert "[Gloo]" not in out.stdout + out.stderr  # each process's connection line is dropped


@needs_mpirun
def test_launch_module_and_exit_status(tmp_path):
    write(
        tmp_path,
        "failing.py",
        """
        import os
        import sys

        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        print(f"module rank {rank}", flush=True)
        sys.exit(3 if rank == 1 else 0)
        """,
    )
    env = cpu_env(PYTHONPATH=str(tmp_path))
    out = jaxmg(tmp_path, "launch", "-n", "2", "--timeout", "120", "-m", "failing", env=env)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "module rank 0" in out.stdout and "module rank 1" in out.stdout


@needs_mpirun
def test_launch_timeout_kills_the_job(tmp_path):
    write(
        tmp_path,
        "sleeper.py",
        """
        import os
        import time

        rank = os.environ["OMPI_COMM_WORLD_RANK"]
        with open(f"pid-{rank}", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
        """,
    )
    start = time.monotonic()
    out = jaxmg(tmp_path, "launch", "-n", "2", "--timeout", "5", "sleeper.py", timeout=50)
    elapsed = time.monotonic() - start
    assert out.returncode == 124, out.stdout + out.stderr
    assert elapsed < 30
    assert "timeout" in out.stderr
    pids = [int(p.read_text()) for p in tmp_path.glob("pid-*")]
    assert len(pids) == 2
    for pid in pids:  # gone, or a zombie waiting for init to reap it
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists():
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            assert state in ("Z", "X"), f"rank process {pid} still running ({state})"


def test_launch_without_mpirun(tmp_path):
    out = jaxmg(tmp_path, "launch", "-n", "2", "x.py", env=cpu_env(PATH=str(tmp_path)))
    assert out.returncode == 2
    assert "Open MPI" in out.stderr and "setup.sh" in out.stderr


@needs_mpirun
def test_launch_command_line(tmp_path):
    env = cpu_env(NCCL_DEBUG="WARN", XLA_FLAGS="--xla_foo", NCCL_NVLS_ENABLE="1")
    out = jaxmg(tmp_path, "launch", "-n", "64", "--dry-run", "--", "s.py", "-n", "1", env=env)
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.split()
    assert cmd[cmd.index("-n") + 1] == "64"
    assert "--oversubscribe" in cmd  # more processes than cores
    assert ("--allow-run-as-root" in cmd) == (os.geteuid() == 0)
    assert "oob_tcp_if_include lo" in out.stdout and "btl self,vader" in out.stdout
    for name in ("NCCL_NVLS_ENABLE", "NCCL_DEBUG", "XLA_FLAGS"):
        assert f"-x {name}" in out.stdout
    assert cmd[-5:] == [sys.executable, launch.RANK_OUTPUT, "s.py", "-n", "1"]
    out = jaxmg(tmp_path, "launch", "-n", "2", "--show-gloo", "--dry-run", "s.py", env=env)
    assert out.stdout.split()[-2:] == [sys.executable, "s.py"]
    assert "overriding NCCL_NVLS_ENABLE=1" in out.stderr


@needs_mpirun
def test_launch_more_processes_than_gpus(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("real GPUs here: CUDA_VISIBLE_DEVICES is capped by nvidia-smi")
    out = jaxmg(
        tmp_path, "launch", "-n", "3", "--dry-run", "x.py", env=cpu_env(CUDA_VISIBLE_DEVICES="0,1")
    )
    assert out.returncode == 2
    assert "2 GPU" in out.stderr


def fake_gpu_env(**extra: str) -> dict[str, str]:
    """This environment with one GPU as launch counts them without nvidia-smi."""
    return cpu_env(CUDA_VISIBLE_DEVICES="0", JAX_PLATFORMS="", **extra)


@needs_mpirun
def test_launch_share_gpu_command_line(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("real GPUs here: the fake GPU count needs a machine without nvidia-smi")
    env = fake_gpu_env()
    env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    # Without --share-gpu, more processes than GPUs is refused, and the message names the mode.
    out = jaxmg(tmp_path, "launch", "-n", "4", "--dry-run", "s.py", env=env)
    assert out.returncode == 2 and "--share-gpu" in out.stderr
    out = jaxmg(tmp_path, "launch", "-n", "4", "--share-gpu", "--dry-run", "s.py", env=env)
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.split()
    assert cmd[cmd.index("-n") + 1] == "4"
    assert cmd[cmd.index("--bind-to") + 1] == "none"
    for name in (
        "JAXMG_LAUNCH_SHARE_GPU",
        "JAX_LOCAL_DEVICE_IDS",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_DISABLE",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "NCCL_NVLS_ENABLE",
    ):
        assert f"-x {name}" in out.stdout, name
    # --show-gloo still runs each process under the wrapper, which sets its host id.
    out = jaxmg(
        tmp_path, "launch", "-n", "2", "--share-gpu", "--show-gloo", "--dry-run", "s.py", env=env
    )
    assert out.stdout.split()[-3:] == [sys.executable, launch.RANK_OUTPUT, "s.py"]


def test_launch_share_gpu_variables():
    env = {"PATH": "/bin"}
    shared, why = launch.shared_gpu_env(4, env)
    assert why == ""
    assert shared["JAX_LOCAL_DEVICE_IDS"] == "0"
    assert shared["NCCL_SOCKET_IFNAME"] == "lo" and shared["NCCL_IB_DISABLE"] == "1"
    assert float(shared["XLA_PYTHON_CLIENT_MEM_FRACTION"]) == pytest.approx(0.85 / 4, abs=1e-4)
    # A fraction the user set is kept, and refused when the processes would ask for more than all.
    shared, why = launch.shared_gpu_env(4, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.2"})
    assert why == "" and shared["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.2"
    shared, why = launch.shared_gpu_env(4, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"})
    assert shared == {} and "2.00 of the GPU's memory" in why and "at most 0.237" in why
    shared, why = launch.shared_gpu_env(2, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"})
    assert shared == {} and "1.00 of the GPU's memory" in why
    shared, why = launch.shared_gpu_env(2, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "half"})
    assert shared == {} and "not a number" in why
    # Without preallocation XLA takes what it needs: no fraction is set.
    shared, _ = launch.shared_gpu_env(4, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in shared
    # The host id: one per rank, none outside a --share-gpu job.
    from jaxmg.cli import rank_output

    ids = {rank_output.rank_host_id({**shared, "OMPI_COMM_WORLD_RANK": str(r)}) for r in range(4)}
    assert len(ids) == 4 and None not in ids
    assert rank_output.rank_host_id({"OMPI_COMM_WORLD_RANK": "0"}) is None


@needs_mpirun
def test_launch_share_gpu_refusals(tmp_path):
    # No GPU visible: nothing to share, and the message says what to change.
    out = jaxmg(
        tmp_path, "launch", "-n", "2", "--share-gpu", "x.py", env=cpu_env(JAX_PLATFORMS="cpu")
    )
    assert out.returncode == 2
    assert "no GPU is visible" in out.stderr and "drop --share-gpu" in out.stderr
    # srun starts processes on other nodes: the mode runs under mpirun on this machine.
    out = jaxmg(
        tmp_path, "launch", "-n", "2", "--share-gpu", "--launcher", "srun", "x.py", env=cpu_env()
    )
    assert out.returncode == 2 and "drop --launcher srun" in out.stderr
    # A memory fraction that over-commits the GPU.
    env = fake_gpu_env(XLA_PYTHON_CLIENT_MEM_FRACTION="0.75")
    out = jaxmg(tmp_path, "launch", "-n", "2", "--share-gpu", "x.py", env=env)
    assert out.returncode == 2 and "XLA_PYTHON_CLIENT_MEM_FRACTION" in out.stderr


@needs_mpirun
def test_launch_share_gpu_sets_each_process(tmp_path):
    """A real job of 3 processes (the GPU is faked: the script imports no JAX): each process
    gets a host id of its own and the shared settings."""
    if shutil.which("nvidia-smi"):
        pytest.skip("real GPUs here: the fake GPU count needs a machine without nvidia-smi")
    write(
        tmp_path,
        "show.py",
        """
        import os
        keys = ("NCCL_HOSTID", "JAX_LOCAL_DEVICE_IDS", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE",
                "XLA_PYTHON_CLIENT_MEM_FRACTION")
        print("env", os.environ["OMPI_COMM_WORLD_RANK"], *(os.environ.get(k) for k in keys))
        """,
    )
    env = fake_gpu_env()
    env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    out = jaxmg(
        tmp_path, "launch", "-n", "3", "--share-gpu", "--timeout", "120", "show.py", env=env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = sorted(line.split()[1:] for line in out.stdout.splitlines() if line.startswith("env "))
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert len({r[1] for r in rows}) == 3  # a host id per process
    for r in rows:
        assert r[1].endswith(f"-jaxmg-rank{r[0]}")
        assert r[2:5] == ["0", "lo", "1"]
        assert float(r[5]) == pytest.approx(0.85 / 3, abs=1e-4)


def test_launch_usage_errors(tmp_path):
    for args in (["launch"], ["launch", "-n", "0", "x.py"], ["launch", "-n", "2"]):
        out = jaxmg(tmp_path, *args, timeout=60)
        assert out.returncode == 2, args
        assert "usage" in out.stderr


@needs_mpirun
def test_demo(tmp_path):
    out = jaxmg(tmp_path, "demo", "-n", "2", "--size", "256", "--timeout", "200")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "result check: OK" in out.stdout
    assert "GFLOP/s" in out.stdout
    assert out.stdout.count("result check") == 1  # only process 0 reports
    assert "[Gloo]" not in out.stdout + out.stderr
    assert "jaxmg launch: " in out.stderr and "mpirun" in out.stderr  # says what it runs


@needs_mpirun
def test_demo_float32_with_tile(tmp_path):
    out = jaxmg(tmp_path, "demo", "-n", "2", "--size", "192", "--dtype", "float32", "--tile", "32")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "result check: OK" in out.stdout
    assert "tile (T_A):     32" in out.stdout


@needs_mpirun
def test_demo_reports_failure(tmp_path):
    # The same per-process code with impossible tolerances: must say FAILED and exit 1.
    write(
        tmp_path,
        "strict_demo.py",
        """
        import sys
        from jaxmg.cli import demo as _demo

        _demo.X_FACTOR = 0.0
        sys.exit(_demo.main(["--size", "64"]))
        """,
    )
    out = jaxmg(tmp_path, "launch", "-n", "2", "--timeout", "200", "strict_demo.py")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "result check: FAILED (x)" in out.stdout


def test_demo_size_not_divisible(tmp_path):
    out = jaxmg(tmp_path, "demo", "-n", "3", "--size", "100", timeout=60)
    assert out.returncode == 2
    assert "multiple" in out.stderr


@needs_mpirun
def test_bench_writes_json_table_and_plot(tmp_path):
    out_json = tmp_path / "results" / "potrs.json"
    out = jaxmg(
        tmp_path,
        "bench",
        "-n",
        "2",
        "--sizes",
        "64",
        "128",
        "--dtypes",
        "float64",
        "--repeats",
        "1",
        "--out",
        str(out_json),
        # (a GPU option: the CPU engine decodes it and runs as ever; the JSON records it)
        env={**cpu_env(), "JAXMG_GPU_MATH": "tf32"},
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    import json

    result = json.loads(out_json.read_text())
    assert result["config"] == {"gpu_math": "tf32"}, result["config"]
    engines = [(r["engine"], r["n"]) for r in result["records"]]
    assert sorted(engines) == [("jax", 64), ("jax", 128), ("jaxmg", 64), ("jaxmg", 128)]
    for r in result["records"]:
        assert "error" not in r, r
        assert r["seconds"] > 0 and r["logdet_rel_err"] < 1e-12
    assert all(r["logdet_ok"] for r in result["records"] if r["engine"] == "jaxmg")
    assert "| float64 | 128 | 2x1 |" in out.stdout
    assert out_json.with_suffix(".png").is_file()
    assert result["matrix_kind"] == "kms" and result["commit"]
    assert "[Gloo]" not in out.stdout + out.stderr


def random_bench(tmp_path: Path, routine: str, *args: str):
    """`python -m jaxmg bench --routine ROUTINE --matrix random` on 2 CPU processes, float64,
    one timed call, with JAX beside it: (the run, the JSON path)."""
    out_json = tmp_path / f"{routine}.json"
    out = jaxmg(
        tmp_path,
        "bench",
        "--routine",
        routine,
        "--matrix",
        "random",
        "-n",
        "2",
        "--dtypes",
        "float64",
        "--repeats",
        "1",
        "--out",
        str(out_json),
        *args,
        env=cpu_env(),
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out, out_json


@needs_mpirun
def test_bench_tile_sweep_on_a_random_matrix(tmp_path):
    out, out_json = random_bench(tmp_path, "lu_solve", "--sizes", "128", "--tile", "16", "32,64")
    import json

    from jaxmg.cli import bench

    result = json.loads(out_json.read_text())
    assert result["matrix_kind"] == "random" and result["matrix"] == "random"
    jaxmg_records = [r for r in result["records"] if r["engine"] == "jaxmg"]
    assert sorted(r["tile"] for r in jaxmg_records) == [16, 32, 64]
    for r in result["records"]:
        assert "error" not in r, r
        assert r["seconds"] > 0 and "logdet_ok" not in r  # no exact log det for a random matrix
    assert "stages_ms" not in jaxmg_records[0]  # no JAXMG_DEBUG, and CPUs print no steps
    assert bench.plot_kind(result["records"]) == "tile"
    assert out_json.with_suffix(".png").is_file()
    # Progress: one line per case (rich draws a bar on a terminal, plain lines otherwise).
    assert out.stdout.count("jaxmg  2dev float64") == 3


def mixed_bench(tmp_path: Path, *args: str) -> dict:
    """`python -m jaxmg bench` of one mixed precision case at N = 48 on 2 CPU processes, no
    baseline: the JSON it writes."""
    import json

    out_json = tmp_path / "mixed.json"
    out = jaxmg(
        tmp_path,
        "bench",
        "--factor-dtype",
        "float32",
        "-n",
        "2",
        "--sizes",
        "48",
        "--repeats",
        "1",
        "--no-baseline",
        "--out",
        str(out_json),
        *args,
        env=cpu_env(),
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(out_json.read_text())


@needs_mpirun
def test_bench_mixed_precision_records_path_and_backward_error(tmp_path):
    """--factor-dtype float32: potrs in mixed precision, named potrs_mixed, each record with
    the condition number, the path, the refinement steps, the backward error and the time of
    the low-precision factorization alone."""
    result = mixed_bench(tmp_path, "--routine", "potrs", "--tile", "5")
    from jaxmg.routines.mixed import tolerance

    assert result["routine"] == "potrs_mixed" and result["factor_dtype"] == "float32"
    (r,) = result["records"]
    assert "error" not in r, r
    assert r["routine"] == "potrs_mixed" and r["dtype"] == "float64" and r["tile"] == 5
    assert r["path"] == "mixed" and 1 <= r["iterations"] <= 3, r
    assert 1 <= r["kappa"] <= 9  # the Kac-Murdock-Szego matrix: κ₂ ≤ ((1 + r) / (1 - r))²
    assert r["backward_error"] <= tolerance(48), r
    # the low-precision factorization alone, and the rest (estimate and refinement)
    assert 0 < r["factor_seconds"] and r["refine_seconds"] == r["seconds"] - r["factor_seconds"]
    refused = jaxmg(tmp_path, "bench", "--routine", "inv", "--factor-dtype", "float32")
    assert refused.returncode != 0 and "potrs and lu_solve" in refused.stderr + refused.stdout


@needs_mpirun
def test_bench_kappa_makes_matrices_of_that_condition_number(tmp_path):
    """--kappa: random matrices of a chosen condition number (general for lu_solve), made on
    the devices; each record names it (NumPy's measure at this size), the mixed solve's own
    estimate and path; nonsense and impossible combinations are refused before any work."""
    result = mixed_bench(tmp_path, "--routine", "lu_solve", "--kappa", "1e4")
    assert result["kappa"] == 1e4 and "condition number 10000" in result["matrix"], result
    (r,) = result["records"]
    assert "error" not in r, r
    assert r["kappa"] == 1e4 and abs(r["kappa_measured"] / 1e4 - 1) < 1e-6, r  # (NumPy's)
    assert r["path"] == "mixed" and r["iterations"] >= 1, r
    assert 1e4 / 10 <= r["condition_estimate"] <= 1e4 * 48, r  # κ₁ ≤ N κ₂
    for bad, says in (
        (("--routine", "qr", "--kappa", "10"), "square routine"),
        (("--routine", "potrs", "--kappa", "0.5"), ">= 1"),
        (("--routine", "potrs", "--kappa", "10", "--peer"), "--peer"),
    ):
        refused = jaxmg(tmp_path, "bench", *bad)
        assert refused.returncode != 0 and says in refused.stderr + refused.stdout, bad


@needs_mpirun
def test_bench_subset_times_eigenpairs_by_index(tmp_path):
    """--subset LO:HI: syevd with subset_by_index on 2 CPU processes beside JAX's full eigh
    (sliced; its subset where the platform has one), named syevd_subset, each record with lo,
    hi and the kept eigenvalues' sum; gesvd's 4 largest singular triplets beside JAX's SVDs
    (sliced), named gesvd_subset; bad subsets refused before any work."""
    import json

    _, out_json = random_bench(tmp_path, "syevd", "--subset", "0:6", "--sizes", "48")
    result = json.loads(out_json.read_text())
    assert result["routine"] == "syevd_subset" and result["subset_by_index"] == [0, 6]
    ours, theirs = (
        next(r for r in result["records"] if r["engine"] == e) for e in ("jaxmg", "jax")
    )
    for r in (ours, theirs):
        assert "error" not in r and (r["lo"], r["hi"]) == (0, 6) and r["seconds"] > 0, r
        assert r["kept_sum"] < 0, r  # the six lowest of a symmetric uniform matrix
    assert "eigh" in theirs["jax_options_s"] and "eigh-subset" in theirs["jax_options_s"]
    # gesvd: the 4 largest singular triplets, JAX's SVDs sliced beside
    _, out_json = random_bench(tmp_path, "gesvd", "--subset", "44:48", "--sizes", "48")
    result = json.loads(out_json.read_text())
    assert result["routine"] == "gesvd_subset" and result["subset_by_index"] == [44, 48]
    ours, theirs = (
        next(r for r in result["records"] if r["engine"] == e) for e in ("jaxmg", "jax")
    )
    for r in (ours, theirs):
        assert "error" not in r and (r["lo"], r["hi"]) == (44, 48) and r["seconds"] > 0, r
        assert r["kept_sum"] > 0, r  # four singular values (of the last matrix each timed)
    assert "svd-polar" in theirs["jax_options_s"]
    for bad, says in (
        (("--routine", "potrs", "--subset", "0:4"), "syevd, eigvalsh, gesvd"),
        (("--routine", "syevd", "--subset", "4"), "LO:HI"),
        (("--routine", "syevd", "--subset", "0:9000", "--sizes", "64"), "N = 64"),
        (("--routine", "syevd", "--subset", "0:4", "--peer"), "--peer"),
    ):
        refused = jaxmg(tmp_path, "bench", *bad)
        assert refused.returncode != 0 and says in refused.stderr + refused.stdout, bad


def test_bench_argument_forms():
    from jaxmg.cli import bench

    p = bench.configure(__import__("argparse").ArgumentParser())
    for argv in (["--sizes", "512", "1024"], ["--sizes", "512,1024"], ["--sizes", "512,", "1024"]):
        args = p.parse_args(argv)
        assert bench._flatten(args.sizes) == [512, 1024], argv
    args = p.parse_args(["--tile", "128", "256,512", "--dtypes", "float32", "complex64"])
    assert bench._flatten(args.tile) == [128, 256, 512]
    assert bench._flatten(args.dtypes) == ["float32", "complex64"]
    assert bench._flatten(p.parse_args([]).sizes) == [2048, 4096]
    with pytest.raises(SystemExit):
        p.parse_args(["--sizes", "12a"])
    with pytest.raises(SystemExit):
        p.parse_args(["--matrix", "hilbert"])


def test_bench_compares_with_jax_at_its_fastest():
    """The baseline times every documented JAX option and keeps the fastest: the SVD's polar
    algorithm (cuSOLVER's gesvdp; not on CPUs, recorded as such) beside its default."""
    import argparse

    import jax
    import numpy as np

    from jaxmg.cli import bench

    for routine in ("gesvd", "gesvd_values", "polar"):
        assert "svd-polar" in bench.jax_options(routine)
    a = jax.numpy.asarray(np.diag(np.arange(1.0, 17.0)) + 0.01)
    args = argparse.Namespace(routine="gesvd_values", jax_option=None, repeats=1)
    rec = {}
    times, check = bench._fastest_option(args, rec, lambda: a, None, "t")
    assert set(rec["jax_options_s"]) == {"svd-polar", "svd-default"}
    assert rec["jax_option"] == "svd-default"  # the polar SVD is GPU-only in JAX
    assert "not implemented on CPU" in rec["jax_options_s"]["svd-polar"]
    assert (
        len(times) == 2
        and abs(float(check) - float(np.linalg.svd(a, compute_uv=False).sum())) < 1e-3
    )
    args.jax_option = ["eigh"]
    with pytest.raises(ValueError, match="not one of"):
        bench._fastest_option(args, {}, lambda: a, None, "t")


def test_bench_stage_times_and_plot_kinds(tmp_path, monkeypatch):
    from jaxmg.cli import bench

    text = (
        "[jaxmg] step Getrf: 6113.82 ms\n"
        "jaxmg  2dev float64  N=  65536     3940.0 ms   47.63 TF/s\n"
        "[jaxmg] step Getrs: 13.50 ms\n"
        "[jaxmg] step Getrf: 3908.12 ms\n"
        "[jaxmg] Qr1D part panel: 1.00 ms\n"
    )
    assert bench.parse_stages(text) == {"Getrf": [6113.82, 3908.12], "Getrs": [13.5]}
    assert bench.stages_by_call(text) == []
    # A step run twice a call (QDWH's QR steps) is summed within each call; the compiling
    # call 0 is left out of the least.
    calls = (
        "[jaxmg] call 0\n[jaxmg] step PolarQr: 300.00 ms\n[jaxmg] step PolarQr: 250.00 ms\n"
        "[jaxmg] step Eigh: 600.00 ms\n[jaxmg] call 1\n[jaxmg] step PolarQr: 200.00 ms\n"
        "[jaxmg] step PolarQr: 215.50 ms\n[jaxmg] step Eigh: 490.00 ms\n[jaxmg] call 2\n"
        "[jaxmg] step PolarQr: 190.00 ms\n[jaxmg] step PolarQr: 230.00 ms\n"
        "[jaxmg] step Eigh: 480.00 ms\n"
    )
    split = bench.stages_by_call(calls)
    assert [c["PolarQr"] for c in split] == [[300.0, 250.0], [200.0, 215.5], [190.0, 230.0]]
    rec = {}
    with monkeypatch.context() as m:
        m.setenv("JAXMG_DEBUG", "1")
        capture = bench._StageCapture(rec)
        with capture:
            os.write(2, calls.encode())
    assert rec["steps_per_call"] == {"PolarQr": 2, "Eigh": 1}
    assert rec["stages_call_ms"] == {"PolarQr": 415.5, "Eigh": 480.0}
    assert rec["stages_best_ms"]["PolarQr"] == 190.0

    def rec(engine, n, tile, seconds):
        return dict(engine=engine, devices=2, n=n, dtype="float64", tile=tile, seconds=seconds)

    sweep = [rec("jaxmg", 4096, t, 1.0 / t) for t in (128, 256, 512)] + [rec("jax", 4096, None, 1)]
    sizes = [rec("jaxmg", n, None, n / 1e3) for n in (1024, 2048)] + [rec("jax", 1024, None, 1)]
    assert bench.plot_kind(sweep) == "tile" and bench.plot_kind(sizes) == "n"
    assert bench.plot(sweep, tmp_path / "sweep.png").is_file()
    assert bench.plot(sizes, tmp_path / "sizes.png").is_file()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the bench extra were missing
    assert bench.plot(sizes, tmp_path / "none.png") is None
    assert "pip install matplotlib" in bench.PLOT_HINT
