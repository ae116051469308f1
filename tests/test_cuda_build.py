"""The GPU engine compiles and links wherever nvcc exists (scripts/test.sh builds it first)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).parents[1] / "build" / "cuda" / "libjaxmg_cuda.so"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc: the GPU engine is not built here")


def test_gpu_engine_was_built():
    assert LIB.is_file(), "run scripts/build_cuda.sh (scripts/test.sh does it when nvcc exists)"


def test_gpu_engine_exports_its_ffi_targets_and_bootstrap():
    if not LIB.is_file():
        pytest.skip("not built")
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True, text=True)
    symbols = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    for name in (
        "jaxmg_cusolvermp_potrs",
        "jaxmg_nccl_get_unique_id",
        "jaxmg_cuda_create_contexts",
        "jaxmg_cuda_rank_of_mesh_position",
        "jaxmg_cuda_versions",
    ):
        assert name in symbols, f"{name} is not exported by {LIB.name}"


def test_gpu_engine_links_the_wheels_libraries_by_soname():
    if not LIB.is_file():
        pytest.skip("not built")
    out = subprocess.run(["readelf", "-d", str(LIB)], capture_output=True, text=True).stdout
    for needed in ("libcusolverMp.so.0", "libcublasmp.so.0", "libnccl.so.2", "libcudart.so.13"):
        assert f"[{needed}]" in out, f"{LIB.name} does not link {needed}"


def test_missing_gpu_libraries_give_a_clear_message(tmp_path):
    """Where cuSOLVERMp is not installed, loading the GPU engine says what to install."""
    if not LIB.is_file():
        pytest.skip("not built")
    script = (
        "import jaxmg._core.native as n\n"
        "try:\n"
        "    n.load('cuda')\n"
        "    print('LOADED')\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    env = {"JAXMG_LIB_DIR": str(LIB.parent), "PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    out = proc.stdout.strip()
    if out == "LOADED":
        pytest.skip("this machine has the GPU libraries")
    assert out.startswith("ERROR"), proc.stderr[-2000:]
    assert "jaxmg[cuda13]" in out and "libjaxmg_cuda.so" in out
