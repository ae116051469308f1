"""Runs one process of a `jaxmg launch` job and passes its output on line by line.

Usage (what `jaxmg launch` puts in front of each process; not a user command):

    python rank_output.py PYTHON_ARGS...

It starts ``python PYTHON_ARGS...`` with its stdout and stderr on pipes and copies them to its own,
one whole line per write, dropping exactly the informational line jax.distributed's CPU
collectives (Gloo) print once per process::

    [Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1

Gloo writes that line in pieces. Filtered here, in each process's own stream before mpirun or srun
merges the streams, the pieces cannot interleave with another process's, so the filter matches
the whole line and nothing else. Whole-line writes also keep two processes' lines apart in the
merged output. A partial line (a prompt, a progress bar) is passed on after a short pause.

In a `jaxmg launch --share-gpu` job (JAXMG_LAUNCH_SHARE_GPU=1) it also sets the process's
NCCL_HOSTID to one of its own (`rank_host_id`): NCCL refuses two ranks of one communicator on one
GPU of one host, and with distinct host ids it treats them as separate hosts, talking over
sockets.

Signals the launcher sends (TERM, INT, HUP, QUIT, USR1, USR2) are forwarded to the process, the
process dies with this one (PR_SET_PDEATHSIG), and this one exits with the process's status, or
by the same signal. Kept free of jaxmg and jax imports: it starts in milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import signal
import sys

GLOO_CONNECTED = re.compile(
    rb"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
    rb"Expected number of connected peer ranks is : \d+\r?\n?$"
)
# A partial line that may still become Gloo's message is held until its newline.
GLOO_START = b"[Gloo] Rank"
# Seconds a partial line (no newline yet) waits before it is passed on as it is.
PARTIAL_WAIT_S = 0.2
FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_PR_SET_PDEATHSIG = 1
# Set by `jaxmg launch --share-gpu`: every process runs on one GPU.
SHARE_GPU_VARIABLE = "JAXMG_LAUNCH_SHARE_GPU"
# Where the launchers put a process's rank in the job.
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def rank_host_id(env) -> str | None:
    """NCCL_HOSTID for this process of a --share-gpu job (None outside one): the machine's name
    and the process's rank, so that NCCL sees each process as a host of its own."""
    if env.get(SHARE_GPU_VARIABLE) != "1":
        return None
    rank = next((env[k] for k in RANK_VARIABLES if env.get(k)), None)
    if rank is None:
        return None
    return f"{os.uname().nodename}-jaxmg-rank{rank}"


def keep(line: bytes) -> bool:
    """Whether a whole line (with its newline) is passed on."""
    return GLOO_CONNECTED.match(line) is None


class LineCopier:
    """Splits one stream's bytes into lines and writes each kept line with one write."""

    def __init__(self, fd_out: int):
        self.fd_out = fd_out
        self.pending = b""

    def feed(self, data: bytes) -> None:
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self._write(line + b"\n")

    def flush_partial(self, final: bool = False) -> None:
        """Passes on a partial line: at the end of the stream, or after a pause unless it may
        still become Gloo's message."""
        if self.pending and (final or not self.pending.startswith(GLOO_START)):
            self._write(self.pending)
            self.pending = b""

    def _write(self, chunk: bytes) -> None:
        if not keep(chunk):
            return
        view = memoryview(chunk)
        while view:  # (os calls retry after a signal by themselves: PEP 475)
            try:
                n = os.write(self.fd_out, view)
            except BrokenPipeError:
                return
            view = view[n:]


def _child(argv: list[str], out_w: int, err_w: int, pipes: list[int]) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in pipes:
        os.close(fd)
    env = dict(os.environ)
    host_id = rank_host_id(env)
    if host_id is not None:
        env["NCCL_HOSTID"] = host_id
    try:
        os.execve(sys.executable, [sys.executable, *argv], env)
    except OSError as e:
        os.write(2, f"jaxmg launch: cannot start {sys.executable}: {e}\n".encode())
        os._exit(127)


def run(argv: list[str]) -> int:
    """Runs ``python argv`` with its output filtered; returns its exit status."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(argv, out_w, err_w, [out_r, out_w, err_r, err_w])
    os.close(out_w)
    os.close(err_w)

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)

    copiers = {out_r: LineCopier(1), err_r: LineCopier(2)}
    sel = selectors.DefaultSelector()
    for fd in copiers:
        sel.register(fd, selectors.EVENT_READ)
    while copiers:
        events = sel.select(timeout=PARTIAL_WAIT_S)
        if not events:
            for copier in copiers.values():
                copier.flush_partial()
            continue
        for key, _ in events:
            fd = key.fd
            data = os.read(fd, 65536)
            if data:
                copiers[fd].feed(data)
            else:
                copiers.pop(fd).flush_partial(final=True)
                sel.unregister(fd)
                os.close(fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
