"""jaxmg's PEP 517 build backend: scikit-build-core, plus the GPU engine's build requirements.

pyproject.toml names this module (`backend-path = ["build_backend"]`). It adds one decision to
scikit-build-core: build the GPU engine (libjaxmg_cuda.so) or not.

- JAXMG_CUDA=ON or OFF (environment, or `-C cmake.define.JAXMG_CUDA=...`) decides;
- otherwise the GPU engine is built when nvcc is found (CUDACXX, PATH, /usr/local/cuda/bin).

When it is built, NVIDIA's cuSOLVERMp, cuBLASMp and NCCL wheels become build requirements, so
that an isolated build (plain `pip install .`) has their headers and libraries;
cmake/cuda_engine.cmake finds them in the build environment's site-packages. Each hook runs in
its own process, so every hook makes the decision again from the same inputs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from scikit_build_core import build as _skbuild
from scikit_build_core.build import (  # noqa: F401  (re-exported hooks)
    build_sdist,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

# The versions pyproject.toml's `cuda13` extra installs at run time (keep the two in step).
CUDA_BUILD_REQUIRES = [
    "nvidia-cusolvermp-cu13==0.9.1.9318.post1",
    "nvidia-cublasmp-cu13==0.10.0.3695",
    "nvidia-nccl-cu13>=2.29.2",
]

_ON = {"1", "on", "yes", "true", "y"}
_OFF = {"0", "off", "no", "false", "n"}


def _nvcc() -> str | None:
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _requested(config_settings: dict | None) -> str | None:
    """JAXMG_CUDA as asked for: a config setting wins over the environment; None if unset."""
    value = (config_settings or {}).get("cmake.define.JAXMG_CUDA")
    if value is None:
        value = os.environ.get("JAXMG_CUDA")
    if isinstance(value, list):
        value = value[-1] if value else None
    value = None if value is None else str(value).strip().lower()
    return value or None


def build_cuda(config_settings: dict | None = None) -> bool:
    """Whether this build makes the GPU engine."""
    value = _requested(config_settings)
    if value in _ON:
        return True
    if value in _OFF:
        return False
    if value is not None:
        raise ValueError(f"JAXMG_CUDA={value!r}: use ON or OFF")
    return _nvcc() is not None


def _prepare_environment(config_settings: dict | None) -> None:
    """Hands the decision to CMake (pyproject.toml maps JAXMG_CUDA to -DJAXMG_CUDA)."""
    if build_cuda(config_settings):
        os.environ["JAXMG_CUDA"] = "ON"
        nvcc = _nvcc()
        if nvcc and not os.environ.get("CUDACXX") and not shutil.which("nvcc"):
            os.environ["CUDACXX"] = nvcc  # e.g. /usr/local/cuda/bin, not on PATH
    else:
        os.environ["JAXMG_CUDA"] = "OFF"


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    extra = CUDA_BUILD_REQUIRES if build_cuda(config_settings) else []
    return [*_skbuild.get_requires_for_build_wheel(config_settings), *extra]


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    extra = CUDA_BUILD_REQUIRES if build_cuda(config_settings) else []
    return [*_skbuild.get_requires_for_build_editable(config_settings), *extra]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _prepare_environment(config_settings)
    return _skbuild.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _prepare_environment(config_settings)
    return _skbuild.build_editable(wheel_directory, config_settings, metadata_directory)
