"""`python -m jaxmg launch`: runs N processes of this Python interpreter under Open MPI's mpirun.

Every process can then call `jax.distributed.initialize()` with no arguments: JAX detects Open
MPI from the OMPI_* variables mpirun sets (coordinator address, process count and index, and on
GPUs the local device from OMPI_COMM_WORLD_LOCAL_RANK). Traffic stays on the loopback interface.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

USAGE = """\
usage: python -m jaxmg launch -n N [--timeout SECONDS] [--dry-run] [--] script.py [args...]
       python -m jaxmg launch -n N [--timeout SECONDS] [--dry-run] -m module [args...]

Runs N processes of this Python interpreter under mpirun (Open MPI), on this machine, so that
jax.distributed.initialize() with no arguments works in each of them.

options:
  -n, --np N         number of processes (on a GPU machine: at most one per GPU)
  --timeout SECONDS  kill the whole job after SECONDS and exit with status 124
  --dry-run          print the mpirun command line instead of running it
  -m MODULE          run a module (like python -m MODULE) instead of a script
  -h, --help         show this help

The exit status is the job's: 0 when every process exits 0, otherwise the first failure's.
"""

# mpirun flags that keep a single-machine job on loopback and shared memory.
MPI_FLAGS = ("--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader")

# Environment variables forwarded to every process with `mpirun -x` (exact names or prefixes).
FORWARD_PREFIXES = ("NCCL_", "JAX_", "XLA_", "JAXMG_")
FORWARD_NAMES = ("PYTHONPATH", "LD_LIBRARY_PATH")

TIMEOUT_STATUS = 124
MISSING_MPIRUN_STATUS = 2
USAGE_STATUS = 2

# Seconds between asking mpirun to stop (SIGTERM) and killing what is left (SIGKILL).
KILL_GRACE_S = 5.0


class UsageError(Exception):
    """A bad command line; the message says what is wrong."""


@dataclass
class LaunchArgs:
    nprocs: int
    target: list[str]  # what follows the interpreter: [script, args...] or [-m, module, args...]
    timeout: float | None = None
    dry_run: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)


def parse_args(argv: list[str]) -> LaunchArgs:
    """Parses `launch` options up to the script (or `-m module`); the rest goes to the script."""
    nprocs = None
    timeout = None
    dry_run = False
    target: list[str] | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]

        def value(name: str, i: int = i) -> str:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value")
            return argv[i + 1]

        if arg == "--":
            if i + 1 >= len(argv):
                raise UsageError("no script after --")
            target = list(argv[i + 1 :])
            break
        if arg in ("-h", "--help"):
            raise UsageError("")
        if arg in ("-n", "--np", "-np"):
            nprocs, i = value(arg), i + 2
        elif arg.startswith("--np="):
            nprocs, i = arg.split("=", 1)[1], i + 1
        elif arg.startswith("-n") and arg[2:].isdigit():
            nprocs, i = arg[2:], i + 1
        elif arg == "--timeout":
            timeout, i = value(arg), i + 2
        elif arg.startswith("--timeout="):
            timeout, i = arg.split("=", 1)[1], i + 1
        elif arg == "--dry-run":
            dry_run, i = True, i + 1
        elif arg == "-m":
            target = ["-m", value(arg), *argv[i + 2 :]]
            break
        elif arg.startswith("-m") and len(arg) > 2:
            target = ["-m", arg[2:], *argv[i + 1 :]]
            break
        elif arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r} (put the script after --)")
        else:
            target = list(argv[i:])
            break
    if nprocs is None:
        raise UsageError("the number of processes is missing: pass -n N")
    try:
        n = int(nprocs)
    except ValueError:
        raise UsageError(f"-n needs a positive integer, got {nprocs!r}") from None
    if n < 1:
        raise UsageError(f"-n needs a positive integer, got {n}")
    if not target:
        raise UsageError("no script to run: pass script.py or -m module")
    t = None
    if timeout is not None:
        try:
            t = float(timeout)
        except ValueError:
            raise UsageError(f"--timeout needs a number of seconds, got {timeout!r}") from None
        if t < 0:
            raise UsageError(f"--timeout needs a non-negative number of seconds, got {t}")
        t = t or None  # 0: no limit
    return LaunchArgs(nprocs=n, target=target, timeout=t, dry_run=dry_run)


# --------------------------------------------------------------------------- machine probes


def gpu_count() -> int:
    """Number of NVIDIA GPUs this job may use; 0 on a CPU machine.

    nvidia-smi -L lists the GPUs; CUDA_VISIBLE_DEVICES narrows (or, without nvidia-smi,
    defines) the set. JAX_PLATFORMS without cuda/gpu means JAX will not use them.
    """
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if platforms and not any(p in platforms for p in ("cuda", "gpu", "rocm")):
        return 0
    listed = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False
            )
            if out.returncode == 0:
                listed = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            listed = None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [v for v in visible.split(",") if v.strip()]
        if not entries or entries[0].strip() == "-1":
            return 0
        return len(entries) if listed is None else min(len(entries), listed)
    return listed or 0


def cpu_slots() -> int:
    """Processes this machine runs without oversubscribing: CPUs we may use, physical cores."""
    counts = [os.cpu_count() or 1]
    try:
        counts.append(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        pass
    # Open MPI counts physical cores, not hardware threads.
    cores = set()
    for topo in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            core = (topo / "core_id").read_text().strip()
            package = (topo / "physical_package_id").read_text().strip()
        except OSError:
            continue
        cores.add((package, core))
    if cores:
        counts.append(len(cores))
    return max(1, min(counts))


def find_mpirun() -> str | None:
    return shutil.which("mpirun")


def missing_mpirun_message() -> str:
    return (
        "jaxmg launch: mpirun was not found on PATH. jaxmg runs one process per device under "
        "Open MPI: install it (scripts/setup.sh does, or `apt-get install openmpi-bin "
        "libopenmpi-dev`) and make sure mpirun is on PATH."
    )


# --------------------------------------------------------------------------- command line


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of mpirun and of every process: NVLink multicast always off."""
    env = dict(os.environ if base is None else base)
    previous = env.get("NCCL_NVLS_ENABLE")
    if previous not in (None, "0"):
        print(
            f"jaxmg launch: overriding NCCL_NVLS_ENABLE={previous} with 0 (jaxmg never enables "
            "NVLink multicast)",
            file=sys.stderr,
        )
    env["NCCL_NVLS_ENABLE"] = "0"
    return env


def forwarded_names(env: dict[str, str]) -> list[str]:
    names = [k for k in env if k.startswith(FORWARD_PREFIXES) or k in FORWARD_NAMES]
    return sorted(set(names))


def build_command(args: LaunchArgs, mpirun: str, env: dict[str, str]) -> list[str]:
    """The mpirun command line that starts args.nprocs copies of sys.executable."""
    cmd = [mpirun, "-n", str(args.nprocs)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if args.nprocs > cpu_slots():
        cmd.append("--oversubscribe")
    cmd += MPI_FLAGS
    for name in forwarded_names(env):
        cmd += ["-x", name]
    cmd += [sys.executable, *args.target]
    return cmd


# --------------------------------------------------------------------------- running


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from /proc; None when gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every live descendant of `root` (mpirun's ranks and helpers)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(int(entry.name))
        if stat is None:
            continue
        children.setdefault(stat[0], []).append(int(entry.name))
        starts[int(entry.name)] = stat[1]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in found:
                found[pid] = starts[pid]
                todo.append(pid)
    return found


def _signal_pids(pids: dict[int, int], sig: int) -> None:
    """Signals the processes we recorded, skipping any whose pid now names another process."""
    for pid, start in pids.items():
        stat = _proc_stat(pid)
        if stat is None or stat[1] != start:
            continue
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def terminate(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """Stops mpirun and every process it started: SIGTERM first, SIGKILL after `grace` s."""
    tree = _descendants(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # mpirun forwards it to the ranks
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        tree.update(_descendants(proc.pid))
        if proc.poll() is not None and not any(_proc_stat(p) for p in tree):
            break
        time.sleep(0.1)
    _signal_pids(tree, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def run(args: LaunchArgs) -> int:
    mpirun = find_mpirun()
    if mpirun is None:
        print(missing_mpirun_message(), file=sys.stderr)
        return MISSING_MPIRUN_STATUS
    gpus = gpu_count()
    if gpus and args.nprocs > gpus:
        print(
            f"jaxmg launch: -n {args.nprocs} asks for more processes than the {gpus} GPU(s) "
            "visible; each process drives one GPU: use -n "
            f"{gpus} or fewer (or JAX_PLATFORMS=cpu to run on CPUs).",
            file=sys.stderr,
        )
        return USAGE_STATUS
    env = child_env()
    env.update(args.extra_env)
    cmd = build_command(args, mpirun, env)
    if args.dry_run:
        print(subprocess.list2cmdline(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)

    def on_signal(signum, frame):
        raise _Interrupted(signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        try:
            status = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(
                f"jaxmg launch: the job ran past --timeout {args.timeout:g} s; stopping all "
                f"{args.nprocs} processes",
                file=sys.stderr,
                flush=True,
            )
            terminate(proc)
            return TIMEOUT_STATUS
        except KeyboardInterrupt:
            terminate(proc)
            return 130
        except _Interrupted as stop:
            terminate(proc)
            return 128 + stop.signum
        return status if status >= 0 else 128 - status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except UsageError as e:
        if str(e):
            print(f"jaxmg launch: {e}\n", file=sys.stderr)
            print(USAGE, file=sys.stderr)
            return USAGE_STATUS
        print(USAGE)
        return 0
    return run(args)
