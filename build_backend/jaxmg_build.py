"""jaxmg's PEP 517 build backend: scikit-build-core, plus the GPU engine's build requirements.

pyproject.toml names this module (`backend-path = ["build_backend"]`). It adds one decision to
scikit-build-core: build the GPU engine (libjaxmg_cuda.so) or not.

- JAXMG_CUDA=ON or OFF (environment, or `-C cmake.define.JAXMG_CUDA=...`) decides;
- otherwise the GPU engine is built when nvcc is found (CUDACXX, PATH, /usr/local/cuda/bin).

A GPU build needs nvcc 13.x (NVIDIA's wheels are built for CUDA 13). Where nvcc is missing (with
JAXMG_CUDA=ON) or of another release, the build stops before anything is downloaded or
compiled, saying so and how to build without the GPU engine (JAXMG_CUDA=OFF);
cmake/cuda_engine.cmake checks the same again, and compiles a small CUDA file, at configure time.

jaxlib (the XLA FFI headers) is a build requirement asked for here, after the decision, so that
pip's isolated environment holds only scikit-build-core when a build is refused. When the GPU
engine is built, NVIDIA's cuSOLVERMp, cuBLASMp and NCCL wheels become build requirements too, so
that an isolated build (plain `pip install .`) has their headers and libraries;
cmake/cuda_engine.cmake finds them in the build environment's site-packages, and the toolkit's
own headers win over the wheels'. Each hook runs in its own process, so every hook makes the
decision again from the same inputs. The decision and its reason are printed (`pip install -v .`
shows them) and handed to CMake, which prints them with the configure summary.

CMake's build tree is one per engine configuration: build/cpu, build/gpu or build/both (unless
`-C build-dir=...` names another), so that switching the GPU engine on or off never reconfigures
another configuration's tree. A build without isolation (scripts/setup.sh, which names its own
build/dev-<engines>) then recompiles only what changed; scikit-build-core starts a tree afresh
in each new isolated environment (plain `pip install .`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from scikit_build_core import build as _skbuild
from scikit_build_core.build import (  # noqa: F401  (re-exported hooks)
    build_sdist,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

# Every build: the XLA FFI headers (jaxlib/include; CMakeLists.txt finds them). Asked for here,
# not in pyproject.toml's [build-system], so that the decision below comes first.
BUILD_REQUIRES = ["jaxlib>=0.10"]
# The versions pyproject.toml's `cuda13` extra installs at run time (keep the two in step), but
# NCCL: the build takes the oldest NCCL headers the engine runs with (2.29, which cuBLASMp 0.10
# needs and libjaxmg_cuda checks for at start-up), so that the library asks the NCCL it finds at
# run time, the same or newer, for nothing it lacks (a communicator's configuration from newer
# headers makes an older libnccl warn "NCCL library version is too old").
CUDA_BUILD_REQUIRES = [
    "nvidia-cusolvermp-cu13==0.9.1.9318.post1",
    "nvidia-cublasmp-cu13==0.10.0.3695",
    "nvidia-nccl-cu13>=2.29.2,<2.30",
]
CUDA_MAJOR = 13  # the CUDA release of those wheels; nvcc must be 13.x

_ON = {"1", "on", "yes", "true", "y"}
_OFF = {"0", "off", "no", "false", "n"}
SKIP_HINT = (
    "To build jaxmg without the GPU engine (CPU engine only), set JAXMG_CUDA=OFF: "
    "`JAXMG_CUDA=OFF pip install .`"
)


class BuildConfigError(RuntimeError):
    """A build that cannot work, found before anything is downloaded or compiled."""


@dataclass(frozen=True)
class Decision:
    cpu: bool
    cpu_reason: str
    cuda: bool
    cuda_reason: str
    nvcc: str | None


def _nvcc() -> str | None:
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def nvcc_release(nvcc: str) -> str | None:
    """'13.0' from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    try:
        out = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _requested(name: str, config_settings: dict | None) -> str | None:
    """JAXMG_CUDA / JAXMG_CPU as asked for: a config setting wins over the environment."""
    value = (config_settings or {}).get(f"cmake.define.{name}")
    if value is None:
        value = os.environ.get(name)
    if isinstance(value, list):
        value = value[-1] if value else None
    value = None if value is None else str(value).strip().lower()
    return value or None


def _switch(name: str, value: str | None) -> bool | None:
    if value is None:
        return None
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise BuildConfigError(f"{name}={value!r}: use ON or OFF")


def decide(config_settings: dict | None = None) -> Decision:
    """Which engines this build makes and why; raises BuildConfigError for a GPU build that
    cannot work (no nvcc although JAXMG_CUDA=ON, or an nvcc that is not CUDA 13.x)."""
    cpu = _switch("JAXMG_CPU", _requested("JAXMG_CPU", config_settings))
    cpu_reason = (
        "JAXMG_CPU=ON, the default; it needs Open MPI and ScaLAPACK, JAXMG_CPU=OFF skips it"
        if cpu is None
        else f"JAXMG_CPU={'ON' if cpu else 'OFF'}"
    )
    cuda = _switch("JAXMG_CUDA", _requested("JAXMG_CUDA", config_settings))
    nvcc = _nvcc()
    if cuda is False:
        reason = "JAXMG_CUDA=OFF"
        if nvcc:
            reason += f"; nvcc at {nvcc} is not used"
        return Decision(cpu is not False, cpu_reason, False, reason, None)
    if nvcc is None:
        if cuda:
            raise BuildConfigError(
                "JAXMG_CUDA=ON, but no nvcc was found (CUDACXX, PATH, /usr/local/cuda/bin). "
                f"The GPU engine needs nvcc {CUDA_MAJOR}.x (no GPU is needed to build it): "
                "put it on PATH or name it in CUDACXX. " + SKIP_HINT
            )
        return Decision(
            cpu is not False,
            cpu_reason,
            False,
            "no nvcc found (CUDACXX, PATH, /usr/local/cuda/bin); CUDA 13's nvcc builds it",
            None,
        )
    release = nvcc_release(nvcc)
    if release is None or int(release.split(".")[0]) != CUDA_MAJOR:
        why = "JAXMG_CUDA=ON" if cuda else "nvcc was found, so the GPU engine is built by default"
        raise BuildConfigError(
            f"{why}, but {nvcc} is {'of an unknown release' if release is None else release}: "
            f"the GPU engine needs nvcc {CUDA_MAJOR}.x (NVIDIA's cuSOLVERMp, cuBLASMp and NCCL "
            f"wheels are built for CUDA {CUDA_MAJOR}). Put CUDA {CUDA_MAJOR}'s nvcc first on PATH "
            "or name it in CUDACXX. " + SKIP_HINT
        )
    if cuda:
        reason = f"JAXMG_CUDA=ON, nvcc {release} at {nvcc}"
    else:
        reason = f"nvcc {release} found at {nvcc}; JAXMG_CUDA=OFF skips it"
    return Decision(cpu is not False, cpu_reason, True, reason, nvcc)


def _decide_or_exit(config_settings: dict | None) -> Decision:
    try:
        decision = decide(config_settings)
    except BuildConfigError as e:
        print(f"\njaxmg build: {e}\n", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    return decision


def _say(d: Decision) -> None:
    print(
        f"jaxmg build: CPU engine {'ON' if d.cpu else 'OFF'} ({d.cpu_reason}); "
        f"GPU engine {'ON' if d.cuda else 'OFF'} ({d.cuda_reason})",
        file=sys.stderr,
        flush=True,
    )


def build_cuda(config_settings: dict | None = None) -> bool:
    """Whether this build makes the GPU engine."""
    return decide(config_settings).cuda


def engines(d: Decision) -> str:
    """The engine configuration's name: cpu, gpu, both or none (layout core alone)."""
    return {(True, False): "cpu", (False, True): "gpu", (True, True): "both"}.get(
        (d.cpu, d.cuda), "none"
    )


def with_build_dir(config_settings: dict | None, d: Decision) -> dict:
    """CMake's build tree is build/<engines> (build/cpu, build/gpu, build/both) unless the caller
    names one (`-C build-dir=...`, or SKBUILD_BUILD_DIR): one tree per engine configuration, so
    that a build with the GPU engine on and one with it off never reconfigure each other's
    cache."""
    settings = dict(config_settings or {})
    if "build-dir" not in settings and not os.environ.get("SKBUILD_BUILD_DIR"):
        settings["build-dir"] = f"build/{engines(d)}"
    return settings


def _prepare_environment(config_settings: dict | None) -> dict:
    """Hands the decision to CMake (pyproject.toml maps JAXMG_CUDA to -DJAXMG_CUDA); returns the
    config settings with the build tree of this engine configuration."""
    d = _decide_or_exit(config_settings)
    _say(d)
    os.environ["JAXMG_CPU_REASON"] = d.cpu_reason
    os.environ["JAXMG_CUDA_REASON"] = d.cuda_reason
    os.environ["JAXMG_CUDA"] = "ON" if d.cuda else "OFF"
    if d.cuda and not os.environ.get("CUDACXX") and not shutil.which("nvcc"):
        os.environ["CUDACXX"] = d.nvcc  # e.g. /usr/local/cuda/bin, not on PATH
    return with_build_dir(config_settings, d)


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    d = _decide_or_exit(config_settings)  # first: a build that cannot work stops here
    _say(d)
    extra = CUDA_BUILD_REQUIRES if d.cuda else []
    return [*_skbuild.get_requires_for_build_wheel(config_settings), *BUILD_REQUIRES, *extra]


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    d = _decide_or_exit(config_settings)
    _say(d)
    extra = CUDA_BUILD_REQUIRES if d.cuda else []
    return [*_skbuild.get_requires_for_build_editable(config_settings), *BUILD_REQUIRES, *extra]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    settings = _prepare_environment(config_settings)
    return _skbuild.build_wheel(wheel_directory, settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    settings = _prepare_environment(config_settings)
    return _skbuild.build_editable(wheel_directory, settings, metadata_directory)
