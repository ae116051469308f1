"""Loading the native libraries and registering their FFI targets with JAX.

The libraries have no Python ABI: they are plain shared objects loaded with ctypes, so one build
serves every Python and JAX version that ships the same (versioned) XLA FFI.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import importlib.metadata
import os
from pathlib import Path

import jax

from jaxmg._core import config as _config

_LIBRARIES = {
    "cpu": "libjaxmg_cpu.so",
    "cuda": "libjaxmg_cuda.so",
    "layout": "libjaxmg_layout_capi.so",
}

_ENGINE_NAMES = {"cpu": "scalapack", "cuda": "cusolvermp"}
_PLATFORMS = {"cpu": "cpu", "cuda": "CUDA"}


def library_dirs() -> list[Path]:
    """Directories searched for the native libraries, in order."""
    dirs = []
    if env := _config.library_dir():  # JAXMG_LIB_DIR
        dirs.append(Path(env))
    dirs.append(Path(__file__).parent.parent / "_lib")  # jaxmg/_lib
    try:
        dist = importlib.metadata.distribution("jaxmg")
        dirs.append(Path(str(dist.locate_file("jaxmg/_lib"))))
    except importlib.metadata.PackageNotFoundError:
        pass
    return dirs


def find_library(kind: str) -> Path | None:
    for d in library_dirs():
        path = d / _LIBRARIES[kind]
        if path.is_file():
            return path
    return None


@functools.cache
def load(kind: str) -> ctypes.CDLL:
    """Loads one native library; raises RuntimeError saying how to build it when absent."""
    path = find_library(kind)
    if path is None:
        searched = ", ".join(str(d) for d in library_dirs())
        raise RuntimeError(
            f"jaxmg's native library {_LIBRARIES[kind]} was not found (searched: {searched}). "
            "Build it with scripts/setup.sh (CPU engine) or set JAXMG_LIB_DIR to the folder "
            "that holds it."
        )
    # RTLD_GLOBAL: Open MPI's plugins resolve libmpi symbols through the global namespace.
    try:
        return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise RuntimeError(f"jaxmg could not load {path}: {e}. {_LOAD_HINTS[kind]}") from None


_LOAD_HINTS = {
    "cpu": "The CPU engine needs Open MPI and ScaLAPACK (scripts/setup.sh installs them).",
    "cuda": (
        "The GPU engine needs cuSOLVERMp 0.9.1, cuBLASMp 0.10 and NCCL >= 2.29 from NVIDIA's "
        "wheels (jaxmg's cuda13 extra): pip install nvidia-cusolvermp-cu13==0.9.1.9318.post1 "
        "nvidia-cublasmp-cu13==0.10.0.3695 'nvidia-nccl-cu13>=2.29.2', or put their lib "
        "folders on LD_LIBRARY_PATH."
    ),
    "layout": "Rebuild jaxmg (scripts/setup.sh).",
}


def loaded_libraries(name: str) -> list[str]:
    """Distinct paths of a shared library (e.g. "libnccl.so") mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if name in line and "/" in line}
    except OSError:
        return []
    return sorted(os.path.realpath(p) for p in paths)


def _error_buffer() -> ctypes.Array:
    return ctypes.create_string_buffer(1024)


def target(kind: str, routine: str) -> str:
    """The FFI target of `routine` on the engine for platform `kind` ("cpu" or "cuda")."""
    return f"jaxmg_{_ENGINE_NAMES[kind]}_{routine}"


def _routine_lines(lib: ctypes.CDLL, kind: str) -> list[list[str]]:
    """The routines with an FFI target in an engine's library: the one list
    (csrc/routines/targets.h), which the library exports as lines "name family trait=0|1 ..."."""
    fn = getattr(lib, f"jaxmg_{kind}_routines")
    fn.restype = ctypes.c_char_p
    fn.argtypes = []
    return [line.split() for line in fn().decode().splitlines() if line.strip()]


def _routine_list(lib: ctypes.CDLL, kind: str) -> dict[str, str]:
    """{routine: family} of the routines with an FFI target in an engine's library."""
    return {name: family for name, family, *_ in _routine_lines(lib, kind)}


def routine_traits(kind: str) -> dict[str, dict[str, bool]]:
    """{routine: {trait: value}} of an engine's routines, as the native routines declare them
    (csrc/routines/contract.h RoutineTraits: reads_factor, rectangular, own_solution,
    second_matrix)."""
    return {
        name: {k: v == "1" for k, v in (t.split("=") for t in traits)}
        for name, _, *traits in _routine_lines(load(kind), kind)
    }


@functools.cache
def layout_plan(
    n: int,
    mesh_rows: int,
    mesh_cols: int,
    tile: int,
    pad: bool,
    symmetric: bool,
    redistribute: bool,
) -> tuple[bool, int]:
    """(relabels, engine order) of the engines' plan of an n x n matrix: whether the engine
    takes the shards as they lie (relabeled tiles) rather than redistributing them, and the
    order of its matrix (n, or larger where it pads). The layout core decides
    (csrc/layout/layout.h MakePlan, through the layout library), as in the engines: there is
    no second copy of the rule here."""
    fn = load("layout").jaxmg_layout_plan
    i64, i32 = ctypes.c_int64, ctypes.c_int
    fn.argtypes = [i64, i32, i32, i64, i32, i32, ctypes.POINTER(i64), ctypes.c_char_p, i32]
    fn.restype = i32
    info, err = (i64 * 8)(), _error_buffer()
    kind = (0 if symmetric else 1) | (2 if redistribute else 0)
    if fn(n, mesh_rows, mesh_cols, tile, int(pad), kind, info, err, len(err)):
        raise ValueError(f"jaxmg's layout plan: {err.value.decode(errors='replace')}")
    return info[0] == 0, int(info[1])


def config_fields(kind: str) -> dict[str, str]:
    """{field: kind} of the configuration an engine's library decodes (choice, count or text):
    csrc/common/config.h's one list, which the library exports as "name kind" lines."""
    fn = getattr(load(kind), f"jaxmg_{kind}_config_fields")
    fn.restype = ctypes.c_char_p
    fn.argtypes = []
    return dict(line.split() for line in fn().decode().splitlines() if line.strip())


@functools.cache
def routines(kind: str) -> dict[str, str]:
    """{routine: family} of the engine for platform `kind` ("cpu" or "cuda"): the routines with
    a target jaxmg_<engine>_<routine> (see `target`), and the family of each target's call
    (csrc/routines/targets.h). Loads the library, without registering or initializing anything."""
    return _routine_list(load(kind), kind)


def family(kind: str, routine: str) -> str:
    """The family of `routine`'s target (solve, eigen, svd, polar, product)."""
    try:
        return routines(kind)[routine]
    except KeyError:
        raise RuntimeError(
            f"jaxmg's native library {_LIBRARIES[kind]} has no target for {routine}: the Python "
            "package and the library come from different builds; reinstall jaxmg"
        ) from None


@functools.cache
def engine(kind: str) -> ctypes.CDLL:
    """Loads an engine's library, registers its FFI targets and initializes it (once)."""
    lib = load(kind)
    for routine in routines(kind):
        name = target(kind, routine)
        jax.ffi.register_ffi_target(
            name, jax.ffi.pycapsule(getattr(lib, name)), platform=_PLATFORMS[kind]
        )
    if kind == "cpu":
        _init_mpi(lib)
    if kind == "cuda":
        _check_one_nccl()
    return lib


def _check_one_nccl() -> None:
    """Our communicator and XLA's must come from the same libnccl (the wheel jaxlib uses)."""
    ncc = set(loaded_libraries("libnccl.so"))
    if len(ncc) > 1:
        raise RuntimeError(
            "two different libnccl libraries are loaded in this process: "
            + ", ".join(sorted(ncc))
            + ". jaxmg's GPU engine must use the NCCL that jaxlib loads (the nvidia-nccl-cu13 "
            "wheel); remove the other one from LD_LIBRARY_PATH."
        )


@functools.cache
def start_mpi() -> ctypes.CDLL:
    """Initializes MPI through the CPU engine's library (once); returns the library.

    Called at `import jaxmg` in processes started by mpirun, so that MPI's collective start-up
    happens in every process together, not inside the first jaxmg call (where processes that make
    no call, as in a program over a sub-mesh, would leave the others waiting). Errors from MPI
    calls are returned to jaxmg (MPI_ERRORS_RETURN), not a job abort.
    """
    lib = load("cpu")
    err = _error_buffer()
    if lib.jaxmg_mpi_init(err, len(err)) != 0:
        raise RuntimeError(f"jaxmg could not initialize MPI: {err.value.decode()}")
    atexit.register(_finalize_mpi, lib)
    return lib


def _finalize_mpi(lib: ctypes.CDLL) -> None:
    """At exit: first wait for the computations still running (jaxmg calls are side effects,
    so jax.effects_barrier waits for them; one may be inside MPI on another thread), then
    MPI_Finalize. A program that ends without waiting for its last results hung here."""
    try:
        jax.effects_barrier()
    finally:
        lib.jaxmg_mpi_finalize()


def start_mpi_if_launched() -> None:
    """start_mpi() in a process launched by Open MPI's mpirun, where the CPU engine is built; a
    missing CPU engine (a GPU-only build) is not an error here."""
    if "OMPI_COMM_WORLD_SIZE" not in os.environ or find_library("cpu") is None:
        return
    try:
        start_mpi()
    except RuntimeError:
        pass  # reported, with what to do, by the first call that needs the CPU engine


def _init_mpi(lib: ctypes.CDLL) -> None:
    start_mpi()
    rank, size = lib.jaxmg_mpi_rank(), lib.jaxmg_mpi_size()
    if size != jax.process_count() or rank != jax.process_index():
        raise RuntimeError(
            f"the CPU engine runs one JAX process per MPI rank, but MPI rank {rank} of {size} is "
            f"JAX process {jax.process_index()} of {jax.process_count()}. Launch with "
            "`mpirun -n N python script.py` or `python -m jaxmg launch -n N script.py` and call "
            "jax.distributed.initialize() (no arguments) before using jaxmg."
        )
