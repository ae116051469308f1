"""`python -m jaxmg info`: what a user needs to debug a jaxmg setup.

Every probe is independent and guarded: a failing probe prints "unavailable: <reason>" and the
next one still runs. Nothing here initializes jax.distributed or MPI.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shutil
import subprocess
import sys

PROBE_TIMEOUT_S = 30
ENV_PREFIXES = ("JAXMG_", "JAX_", "XLA_", "NCCL_", "OMPI_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONPATH", "OPENBLAS_NUM_THREADS")


def _line(label: str, value: object) -> None:
    print(f"{label + ':' if label else '':<22} {value}", flush=True)


def _probe(label: str, fn) -> None:
    """Prints `label: fn()`, or `label: unavailable: <reason>` when fn raises."""
    try:
        value = fn()
    except BaseException as e:  # noqa: BLE001 - a probe must never stop the report
        if isinstance(e, KeyboardInterrupt):
            raise
        reason = f"{type(e).__name__}: {e}".strip().splitlines()
        value = f"unavailable: {reason[0] if reason else type(e).__name__}"
    if isinstance(value, list | tuple):
        if not value:
            _line(label, "(none)")
        for i, item in enumerate(value):
            _line(label if i == 0 else "", item)
    else:
        _line(label, value)


def _run(cmd: list[str]) -> str:
    """Output of a command; raises with its stderr when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    if out.returncode != 0:
        msg = (out.stderr or out.stdout).strip().splitlines()
        raise RuntimeError(
            f"`{' '.join(cmd)}` exited with {out.returncode}" + (f": {msg[0]}" if msg else "")
        )
    return out.stdout


# --------------------------------------------------------------------------- probes


def _jaxmg_version() -> str:
    import jaxmg

    return f"{jaxmg.__version__} ({os.path.dirname(jaxmg.__file__)})"


def _library(kind: str):
    from jaxmg._core import native as _native

    def probe() -> str:
        path = _native.find_library(kind)
        if path is None:
            searched = ", ".join(dict.fromkeys(str(d) for d in _native.library_dirs()))
            return f"not found (searched: {searched})"
        return str(path)

    return probe


def _jax_version() -> str:
    import jax

    return jax.__version__


def _jaxlib_version() -> str:
    import jaxlib

    return jaxlib.__version__


def _jax_backend() -> str:
    import jax

    return jax.default_backend()


def _jax_devices() -> list[str]:
    import jax

    return [f"{d} (platform {d.platform}, kind {d.device_kind})" for d in jax.devices()]


def _mpirun_version() -> str:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return "not found (install Open MPI: scripts/setup.sh, or apt-get install openmpi-bin)"
    text = _run([mpirun, "--version"]).strip().splitlines()
    return f"{text[0] if text else '(no output)'} ({mpirun})"


def _cpu_library_path():
    from jaxmg._core import native as _native

    path = _native.find_library("cpu")
    if path is None:
        raise FileNotFoundError("libjaxmg_cpu.so not found (build it with scripts/setup.sh)")
    return path


def _linked(pattern: str):
    """Lines of `ldd libjaxmg_cpu.so` naming `pattern` (the libraries it resolves to)."""

    def probe() -> list[str] | str:
        if shutil.which("ldd") is None:
            raise FileNotFoundError("ldd not found")
        lines = _run(["ldd", str(_cpu_library_path())]).splitlines()
        hits = [_ldd_entry(line) for line in lines if pattern in line.lower()]
        return hits or f"not linked (no {pattern} in ldd output)"

    return probe


def _ldd_entry(line: str) -> str:
    """`libx.so.1 => /path/libx.so.1 (0x...)` as `/path/libx.so.1`; unresolved ones as they are."""
    name, _, target = line.strip().partition("=>")
    target = target.strip().rsplit(" (0x", 1)[0].strip()
    if not target:
        return name.strip().rsplit(" (0x", 1)[0]
    if target == "not found":
        return f"{name.strip()} NOT FOUND (the dynamic loader cannot resolve it)"
    return target


def _engines() -> str:
    from jaxmg._core import native as _native

    engines = [k for k in ("cpu", "cuda") if _native.find_library(k) is not None]
    return ", ".join(engines) if engines else "none (build with scripts/setup.sh)"


def _gpu_engine() -> str:
    from jaxmg._core import native as _native

    path = _native.find_library("cuda")
    if path is None:
        return "not built"
    lib = _native.load("cuda")
    if not hasattr(lib, "jaxmg_cuda_versions"):
        return f"built ({path}), but it does not export jaxmg_cuda_versions (rebuild for versions)"
    fn = lib.jaxmg_cuda_versions
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(4096)
    rc = fn(buf, len(buf))
    text = buf.value.decode(errors="replace").strip()
    if rc != 0:
        raise RuntimeError(f"jaxmg_cuda_versions returned {rc}" + (f": {text}" if text else ""))
    return text or "(empty)"


def _nvidia_smi() -> list[str] | str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found (no NVIDIA driver on this machine)"
    out = _run(
        [smi, "--query-gpu=driver_version,name,memory.total", "--format=csv,noheader"]
    ).strip()
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return [f"GPU {i}: {line}" for i, line in enumerate(lines)] or "no GPU listed"


def _gpus_for_launch() -> str:
    from jaxmg.cli import launch as _launch

    n = _launch.gpu_count()
    if not n:
        return "0 (processes run on CPUs)"
    return f"{n} (one process drives them all without a launcher; launch -n N takes N <= {n})"


def _cpu_slots() -> str:
    from jaxmg.cli import launch as _launch

    return f"{os.cpu_count()} CPUs, {_launch.cpu_slots()} processes before --oversubscribe"


def _environment() -> list[str]:
    names = sorted(k for k in os.environ if k.startswith(ENV_PREFIXES) or k in ENV_NAMES)
    return [f"{k}={os.environ[k]}" for k in names]


def _configuration() -> str:
    from jaxmg._core import config as _config

    current, default = _config.current(), _config.Config()
    changed = [
        f"{n}={getattr(current, n)}"
        for n in _config.PUBLIC
        if getattr(current, n) != getattr(default, n)
    ]
    return ", ".join(changed) or "every option at its default (jaxmg.config)"


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Describes `python -m jaxmg info` (it takes no options).

    Args:
        p: The parser of the subcommand.

    Returns:
        ``p``.
    """
    p.description = (
        "Print jaxmg's version, the native libraries it found, the engines, Python, jax and "
        "jaxlib, the devices JAX sees, Open MPI, ScaLAPACK, the GPU engine's libraries, the "
        "options of jaxmg.config that differ from their defaults and the environment variables "
        "that matter. A probe that fails prints 'unavailable: <reason>'."
    )
    return p


def run_namespace(ns: argparse.Namespace) -> int:
    """Runs `python -m jaxmg info`.

    Args:
        ns: The subcommand's (empty) namespace.

    Returns:
        0.
    """
    return main([])


def main(argv: list[str] | None = None) -> int:
    """Prints the report.

    Args:
        argv: Must be empty (``python -m jaxmg info`` takes no arguments).

    Returns:
        0, or 2 when arguments are given.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv:
        from jaxmg.cli import command

        return command.run("info", configure, run_namespace, argv)
    print("jaxmg setup", flush=True)
    _probe("jaxmg", _jaxmg_version)
    _probe("libjaxmg_cpu", _library("cpu"))
    _probe("libjaxmg_cuda", _library("cuda"))
    _probe("libjaxmg_layout", _library("layout"))
    _probe("engines", _engines)
    _probe("python", lambda: f"{platform.python_version()} ({sys.executable})")
    _probe("platform", platform.platform)
    _probe("jax", _jax_version)
    _probe("jaxlib", _jaxlib_version)
    _probe("jax backend", _jax_backend)
    _probe("jax devices", _jax_devices)
    _probe("Open MPI", _mpirun_version)
    _probe("ScaLAPACK", _linked("scalapack"))
    _probe("MPI library", _linked("libmpi"))
    _probe("CPUs", _cpu_slots)
    _probe("GPU engine", _gpu_engine)
    _probe("NVIDIA driver", _nvidia_smi)
    _probe("GPUs for launch", _gpus_for_launch)
    _probe("configuration", _configuration)
    _probe("environment", _environment)
    return 0
