"""`python -m jaxmg launch`: runs N processes of this Python interpreter, one per device.

Inside a Slurm allocation (SLURM_JOB_ID set, srun on PATH) the processes are srun's tasks;
elsewhere they run under Open MPI's mpirun on this machine, with traffic on the loopback
interface. Every process can then call `jax.distributed.initialize()` with no arguments: JAX
detects Slurm from the SLURM_* variables and Open MPI from the OMPI_* variables (coordinator
address, process count and index, and on GPUs the local device). The launcher prints the
command it runs, and drops the "[Gloo] Rank r is connected to p peer ranks" line that
jax.distributed's CPU collectives print per connection (`--show-gloo` keeps it).

`--share-gpu` runs every process on one GPU (the first visible one), for correctness and
debugging on a workstation: the launcher sets the variables of `shared_gpu_env` (JAX bound to
that GPU in each process, loopback sockets for NCCL, a share of the GPU's memory each), and
each process's wrapper (rank_output.py) gives its process a host id of its own, so that NCCL
treats the processes as separate hosts instead of refusing two ranks on one GPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from jaxmg.cli import rank_output

DESCRIPTION = """\
Runs N processes of this Python interpreter, one per device, so that
jax.distributed.initialize() with no arguments works in each of them: under srun inside a Slurm
allocation (SLURM_JOB_ID set and srun on PATH), otherwise under Open MPI's mpirun on this machine.
The command it runs is printed first (--dry-run prints it and stops)."""

EPILOG = """\
examples:
  python -m jaxmg launch -n 2 script.py --size 4096
  python -m jaxmg launch -n 4 --timeout 600 -m mypackage.train
  python -m jaxmg launch -n 2 --dry-run script.py      # print the command line only
  python -m jaxmg launch -n 4 --share-gpu script.py    # 4 processes on one GPU (slow; for
                                                       # correctness and debugging)

The exit status is the job's: 0 when every process exits 0, otherwise the first failure's;
124 after --timeout."""

# mpirun flags that keep a single-machine job on loopback and shared memory.
MPI_FLAGS = ("--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader")

# Environment variables forwarded to every process with `mpirun -x` (exact names or prefixes).
FORWARD_PREFIXES = ("NCCL_", "JAX_", "XLA_", "JAXMG_")
FORWARD_NAMES = ("PYTHONPATH", "LD_LIBRARY_PATH")

# --share-gpu: the part of the GPU's memory all processes' XLA pools take together (the rest is
# for the CUDA contexts, NCCL's buffers and the engines' own workspace), and the variable that
# tells each process's wrapper (rank_output.py) to give its process a host id of its own.
SHARED_GPU_MEMORY = 0.85
# The most a fraction the user set may ask for over all processes (measured: two pools of 0.5
# each on one H200 fail to allocate).
SHARED_GPU_LIMIT = 0.95
SHARE_GPU_VARIABLE = rank_output.SHARE_GPU_VARIABLE

TIMEOUT_STATUS = 124
MISSING_MPIRUN_STATUS = 2
USAGE_STATUS = 2

# Seconds between asking mpirun to stop (SIGTERM) and killing what is left (SIGKILL).
KILL_GRACE_S = 5.0

# Each process runs under rank_output.py, which drops the line jax.distributed's CPU collectives
# (Gloo) print once per process ("[Gloo] Rank 0 is connected to 1 peer ranks. ..."), in that
# process's own stream before the launcher merges the streams (--show-gloo keeps it).
RANK_OUTPUT = str(Path(__file__).with_name("rank_output.py"))

LAUNCHERS = ("auto", "mpirun", "srun")


class UsageError(Exception):
    """A bad command line; the message says what is wrong."""


@dataclass
class LaunchArgs:
    """What `launch` runs.

    Attributes:
        nprocs: Number of processes.
        target: What follows the interpreter: ``[script, args...]`` or ``[-m, module, args...]``.
        timeout: Seconds after which the whole job is stopped (None: no limit).
        dry_run: Print the command line instead of running it.
        launcher: ``"auto"`` (srun inside a Slurm allocation, else mpirun), ``"mpirun"`` or
            ``"srun"``.
        quiet_gloo: Drop Gloo's "Rank r is connected to p peer ranks" lines from the output.
        share_gpu: Run every process on the first visible GPU (`shared_gpu_env`).
        extra_env: Variables added to the processes' environment.
    """

    nprocs: int
    target: list[str]
    timeout: float | None = None
    dry_run: bool = False
    launcher: str = "auto"
    quiet_gloo: bool = True
    share_gpu: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is the caller's to report
        raise UsageError(message)


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Adds `launch`'s options to `p` (the `python -m jaxmg launch` subcommand).

    Args:
        p: The parser of the subcommand.

    Returns:
        ``p``, with the options added.
    """
    p.description = DESCRIPTION
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "-n",
        "--np",
        "-np",
        dest="nprocs",
        type=_positive_int,
        required=True,
        metavar="N",
        help="number of processes (on a GPU machine: at most one per GPU, unless --share-gpu)",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop the whole job after SECONDS and exit with status 124 (0: no limit)",
    )
    p.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="auto",
        help="auto (default): srun inside a Slurm allocation, otherwise mpirun",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the command line instead of running it"
    )
    p.add_argument(
        "--share-gpu",
        action="store_true",
        help="run every process on one GPU (the first visible one): NCCL goes through loopback "
        "sockets, so it is slow; for correctness and debugging of multi-GPU code on one GPU",
    )
    p.add_argument(
        "--show-gloo",
        dest="quiet_gloo",
        action="store_false",
        help="keep jax.distributed's '[Gloo] Rank r is connected to ...' lines in the output",
    )
    p.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE ...",
        help="run a module (like python -m MODULE) instead of a script",
    )
    p.add_argument("script", nargs="?", help="the script to run in every process")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"needs a positive integer, got {n}")
    return n


def _seconds(text: str) -> float | None:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a number of seconds, got {text!r}") from None
    if t < 0:
        raise argparse.ArgumentTypeError(f"needs a non-negative number of seconds, got {t:g}")
    return t or None  # 0: no limit


def from_namespace(ns: argparse.Namespace) -> LaunchArgs:
    """The LaunchArgs of a parsed `launch` command line.

    Args:
        ns: What `configure`'s parser returned.

    Returns:
        The job to run.

    Raises:
        UsageError: when neither a script nor ``-m MODULE`` is given.
    """
    if ns.module is not None:
        if not ns.module:
            raise UsageError("-m needs a module name")
        target = ["-m", *ns.module]
    elif ns.script:
        target = [ns.script, *ns.args]
    else:
        raise UsageError("no script to run: pass script.py or -m module")
    return LaunchArgs(
        nprocs=ns.nprocs,
        target=target,
        timeout=ns.timeout,
        dry_run=ns.dry_run,
        launcher=ns.launcher,
        quiet_gloo=ns.quiet_gloo,
        share_gpu=ns.share_gpu,
    )


def parse_args(argv: list[str]) -> LaunchArgs:
    """Parses a `launch` command line (what follows ``python -m jaxmg launch``).

    Args:
        argv: The arguments; those after the script (or ``-m module``) go to the script.

    Returns:
        The job to run.

    Raises:
        UsageError: on a bad command line, with a message that says what is wrong.
    """
    p = configure(_Parser(prog="python -m jaxmg launch", add_help=False))
    return from_namespace(p.parse_args(argv))


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
    """The path of Open MPI's mpirun, or None when it is not on PATH."""
    return shutil.which("mpirun")


def find_srun() -> str | None:
    """The path of Slurm's srun, or None when it is not on PATH."""
    return shutil.which("srun")


def in_slurm_allocation(env: dict[str, str] | None = None) -> bool:
    """Whether this process runs inside a Slurm allocation (salloc, sbatch or srun).

    Args:
        env: The environment to look at (default: ``os.environ``).

    Returns:
        True when SLURM_JOB_ID is set.
    """
    return bool((os.environ if env is None else env).get("SLURM_JOB_ID"))


def choose_launcher(args: LaunchArgs, env: dict[str, str] | None = None) -> str:
    """``"srun"`` or ``"mpirun"``: what `launch` starts the processes with.

    Args:
        args: The job; ``args.launcher`` ``"auto"`` picks srun inside a Slurm allocation where
            srun is on PATH, otherwise mpirun.
        env: The environment to look at (default: ``os.environ``).

    Returns:
        The launcher's name.
    """
    if args.launcher != "auto":
        return args.launcher
    return "srun" if in_slurm_allocation(env) and find_srun() else "mpirun"


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


def shared_gpu_env(nprocs: int, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The variables that put `nprocs` processes on one GPU, or a message saying why not.

    Every process binds JAX to the first visible GPU (JAX_LOCAL_DEVICE_IDS=0, which
    `jax.distributed.initialize()` reads), NCCL talks over loopback sockets (NCCL_SOCKET_IFNAME=lo,
    NCCL_IB_DISABLE=1), and XLA's memory pool takes SHARED_GPU_MEMORY / nprocs of the GPU
    (XLA_PYTHON_CLIENT_MEM_FRACTION, unless set). Each process's wrapper (rank_output.py) then sets
    NCCL_HOSTID to a value of its own (`rank_host_id`).

    Args:
        nprocs: The number of processes.
        env: The environment the processes start from.

    Returns:
        ``(variables, "")``, or ``({}, message)`` when the GPU cannot be shared that way.
    """
    set_fraction = env.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    if set_fraction is not None:
        try:
            fraction = float(set_fraction)
        except ValueError:
            return {}, (
                f"jaxmg launch: XLA_PYTHON_CLIENT_MEM_FRACTION={set_fraction!r} is not a number; "
                "unset it and --share-gpu gives each process its share of the GPU's memory."
            )
        if fraction * nprocs > SHARED_GPU_LIMIT:
            return {}, (
                f"jaxmg launch: --share-gpu with -n {nprocs}: XLA_PYTHON_CLIENT_MEM_FRACTION="
                f"{set_fraction} per process asks for {fraction * nprocs:.2f} of the GPU's memory "
                f"in all, more than the {SHARED_GPU_LIMIT} that leaves room for the processes' "
                "CUDA contexts; unset it (each process then takes "
                f"{SHARED_GPU_MEMORY / nprocs:.3f}) or set it to at most "
                f"{SHARED_GPU_LIMIT / nprocs:.3f}."
            )
    if env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() in ("false", "0"):
        fraction_note = {}
    else:
        fraction_note = {
            "XLA_PYTHON_CLIENT_MEM_FRACTION": set_fraction or f"{SHARED_GPU_MEMORY / nprocs:.4f}"
        }
    return {
        SHARE_GPU_VARIABLE: "1",
        "JAX_LOCAL_DEVICE_IDS": "0",
        "NCCL_SOCKET_IFNAME": env.get("NCCL_SOCKET_IFNAME", "lo"),
        "NCCL_IB_DISABLE": "1",
        **fraction_note,
    }, ""


def build_command(args: LaunchArgs, mpirun: str, env: dict[str, str]) -> list[str]:
    """The mpirun command line that starts ``args.nprocs`` copies of this interpreter.

    Args:
        args: The job.
        mpirun: The path of mpirun.
        env: The processes' environment (the variables to forward are taken from it).

    Returns:
        The command line, as a list.
    """
    cmd = [mpirun, "-n", str(args.nprocs)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if args.nprocs > cpu_slots():
        cmd.append("--oversubscribe")
    if args.share_gpu:  # the processes share the machine's cores, as they share the GPU
        cmd += ["--bind-to", "none"]
    cmd += MPI_FLAGS
    for name in forwarded_names(env):
        cmd += ["-x", name]
    return cmd + python_command(args)


def python_command(args: LaunchArgs) -> list[str]:
    """What each process runs: this interpreter on the target, under rank_output.py unless
    ``--show-gloo`` (with ``--share-gpu`` always: it sets the process's NCCL host id)."""
    if args.quiet_gloo or args.share_gpu:
        return [sys.executable, RANK_OUTPUT, *args.target]
    return [sys.executable, *args.target]


def build_srun_command(args: LaunchArgs, srun: str) -> list[str]:
    """The srun command line that starts ``args.nprocs`` tasks of this interpreter.

    srun passes the whole environment on and sets the SLURM_* variables from which
    `jax.distributed.initialize()` finds the coordinator, the process count and index, and the
    local device (SLURM_LOCALID).

    Args:
        args: The job.
        srun: The path of srun.

    Returns:
        The command line, as a list.
    """
    return [srun, "-n", str(args.nprocs), "--kill-on-bad-exit=1", *python_command(args)]


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


def command_line(args: LaunchArgs, env: dict[str, str]) -> tuple[list[str] | None, str]:
    """The command that runs the job, or None and a message saying why it cannot run.

    Args:
        args: The job.
        env: The processes' environment.

    Returns:
        ``(command, "")``, or ``(None, message)`` when the launcher is missing, the job asks
        for more processes than there are GPUs, or --share-gpu finds no GPU to share.
    """
    if args.share_gpu:
        why = share_gpu_refusal(args, env)
        if why:
            return None, why
    elif choose_launcher(args, env) == "srun":
        srun = find_srun()
        if srun is None:
            return None, "jaxmg launch: --launcher srun, but srun was not found on PATH."
        return build_srun_command(args, srun), ""
    mpirun = find_mpirun()
    if mpirun is None:
        return None, missing_mpirun_message()
    gpus = gpu_count()
    if gpus and args.nprocs > gpus and not args.share_gpu:
        return None, (
            f"jaxmg launch: -n {args.nprocs} asks for more processes than the {gpus} GPU(s) "
            "visible; each process drives one GPU: use -n "
            f"{gpus} or fewer, --share-gpu to run them all on one GPU (slow: for correctness "
            "and debugging), or JAX_PLATFORMS=cpu to run on CPUs."
        )
    return build_command(args, mpirun, env), ""


def share_gpu_refusal(args: LaunchArgs, env: dict[str, str]) -> str:
    """Why --share-gpu cannot run this job ("" when it can)."""
    if args.launcher == "srun":
        return (
            "jaxmg launch: --share-gpu runs the processes on this machine under mpirun; "
            "drop --launcher srun (inside a Slurm allocation, run it on one node)."
        )
    if gpu_count() == 0:
        return (
            "jaxmg launch: --share-gpu runs every process on one GPU, but no GPU is visible "
            "(nvidia-smi lists none, or CUDA_VISIBLE_DEVICES or JAX_PLATFORMS hides them). On "
            "CPUs every process has a device of its own already: drop --share-gpu."
        )
    return ""


def run(args: LaunchArgs) -> int:
    """Runs the job and returns its exit status.

    Args:
        args: The job.

    Returns:
        0 when every process exits 0, otherwise the first failure's status; 124 after
        ``args.timeout`` seconds; 2 when the job cannot start (the message says why).
    """
    env = child_env()
    env.update(args.extra_env)
    if args.share_gpu:
        shared, why = shared_gpu_env(args.nprocs, env)
        if why:
            print(why, file=sys.stderr)
            return USAGE_STATUS
        env.update(shared)
    cmd, why = command_line(args, env)
    if cmd is None:
        print(why, file=sys.stderr)
        return MISSING_MPIRUN_STATUS if "not found" in why else USAGE_STATUS
    if args.dry_run:
        print(subprocess.list2cmdline(cmd))
        return 0
    print(f"jaxmg launch: {subprocess.list2cmdline(cmd)}", file=sys.stderr)
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


def run_namespace(ns: argparse.Namespace) -> int:
    """Runs a parsed `python -m jaxmg launch` command line.

    Args:
        ns: The subcommand's namespace (with ``parser``, for usage errors).

    Returns:
        The job's exit status.
    """
    try:
        args = from_namespace(ns)
    except UsageError as e:
        ns.parser.error(str(e))
    return run(args)


def main(argv: list[str]) -> int:
    """`python -m jaxmg launch ARGS`: parses ARGS and runs the job.

    Args:
        argv: What follows ``python -m jaxmg launch``.

    Returns:
        The job's exit status (2 for a bad command line).
    """
    from jaxmg.cli import command

    return command.run("launch", configure, run_namespace, list(argv))
