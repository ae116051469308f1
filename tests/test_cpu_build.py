"""The CPU engine's MPI and ScaLAPACK, chosen at CMake's configure step (CMakeLists.txt): named
with JAXMG_SCALAPACK_LIBRARIES (as for MKL or a cluster's modules), found by pkg-config or by
name otherwise, and a list that cannot link stops the configure step with the cause. Configure
only (seconds each), with this machine's Open MPI and Debian's ScaLAPACK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEBIAN_SCALAPACK = Path("/usr/lib/x86_64-linux-gnu/libscalapack-openmpi.so")
CMAKE = shutil.which(
    "cmake", path=os.pathsep.join([str(Path(sys.executable).parent), *os.get_exec_path()])
)
pytestmark = pytest.mark.skipif(
    CMAKE is None or shutil.which("mpicxx") is None or not DEBIAN_SCALAPACK.exists(),
    reason="needs cmake, Open MPI's mpicxx and Debian's ScaLAPACK (scripts/setup.sh)",
)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    """One build tree for every test: the compiler is detected once, and each configure names
    its ScaLAPACK switches, so a changed list is what is checked (its link check cached by the
    list)."""
    return tmp_path_factory.mktemp("cpu_build")


def configure(build_dir: Path, libraries: str = "", modules: str = "") -> tuple[int, str]:
    """(exit status, CMake's output with its line wrapping undone)."""
    proc = subprocess.run(
        [
            CMAKE,
            "-S",
            str(REPO),
            "-B",
            str(build_dir),
            "-DJAXMG_CUDA=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DJAXMG_SCALAPACK_LIBRARIES={libraries}",
            f"-DJAXMG_SCALAPACK_PKGCONFIG={modules or 'scalapack-openmpi;scalapack'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


@pytest.mark.parametrize(
    "libraries",
    [f"{DEBIAN_SCALAPACK} -lopenblas", f"-L{DEBIAN_SCALAPACK.parent};-lscalapack-openmpi"],
    ids=["path-and-flag", "semicolons"],
)
def test_a_named_scalapack_is_linked_and_said(build_dir, libraries):
    rc, out = configure(build_dir, libraries)
    assert rc == 0, out[-3000:]
    assert "CPU engine: ScaLAPACK from JAXMG_SCALAPACK_LIBRARIES=" in out, out[-3000:]


def test_without_pkg_config_modules_scalapack_is_found_by_name(build_dir):
    rc, out = configure(build_dir, modules="no-such-module")
    assert rc == 0, out[-3000:]
    assert "CPU engine: ScaLAPACK from /" in out and "with LAPACK" in out, out[-3000:]
    # and pkg-config's module again, in the same tree
    rc, out = configure(build_dir)
    assert rc == 0 and "ScaLAPACK from pkg-config scalapack-openmpi" in out, out[-3000:]


def test_a_list_without_blacs_stops_at_configure_with_the_cause(build_dir):
    rc, out = configure(build_dir, "-lopenblas")
    assert rc != 0
    assert "a program calling BLACS (Csys2blacs_handle)" in out, out[-3000:]
    assert "JAXMG_SCALAPACK_LIBRARIES" in out and "docs/install.md" in out, out[-3000:]


def test_a_named_file_that_does_not_exist_stops_at_configure(build_dir):
    rc, out = configure(build_dir, "/no/such/libmkl_core.so")
    assert rc != 0
    assert "names /no/such/libmkl_core.so, which does not exist" in out, out[-3000:]
