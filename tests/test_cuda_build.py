"""The GPU engine compiles and links wherever nvcc exists: checked inside the wheel that
`pip wheel .` builds (`scripts/build_wheels.sh both`, which scripts/test.sh runs first), the
file a user's `pip install .` installs and the GPU round trip ships. Also the build backend's
decision (which engines, and why), without building anything.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NVCC = next(
    (
        c
        for c in (os.environ.get("CUDACXX"), *(os.path.join(p, "nvcc") for p in os.get_exec_path()))
        if c and os.path.isfile(c) and os.access(c, os.X_OK)
    ),
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None,
)
needs_nvcc = pytest.mark.skipif(
    NVCC is None or bool(os.environ.get("JAXMG_SKIP_CUDA_BUILD")),
    reason="no nvcc (or JAXMG_SKIP_CUDA_BUILD): the GPU engine is not built here",
)


def built_wheel() -> Path | None:
    """JAXMG_WHEEL, else the one wheel in dist/both/ (`scripts/build_wheels.sh both`)."""
    if env := os.environ.get("JAXMG_WHEEL"):
        return Path(env)
    found = sorted((REPO / "dist" / "both").glob("jaxmg-*.whl"))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def wheel() -> Path:
    path = built_wheel()
    if path is None or not path.is_file():
        pytest.fail(
            "no wheel: run `scripts/build_wheels.sh both` (scripts/test.sh does it where nvcc is)"
        )
    return path


@pytest.fixture(scope="module")
def lib(wheel, tmp_path_factory) -> Path:
    """libjaxmg_cuda.so from the wheel, alone in a folder."""
    dest = tmp_path_factory.mktemp("wheel_lib")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert "jaxmg/_lib/libjaxmg_cuda.so" in names, f"{wheel.name} has no GPU engine: {names}"
        (dest / "libjaxmg_cuda.so").write_bytes(z.read("jaxmg/_lib/libjaxmg_cuda.so"))
    return dest / "libjaxmg_cuda.so"


@needs_nvcc
def test_the_wheel_has_both_engines_and_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "jaxmg/_lib/libjaxmg_cuda.so",
        "jaxmg/_lib/libjaxmg_cpu.so",
        "jaxmg/_lib/libjaxmg_layout_capi.so",
        "jaxmg/__init__.py",
    ):
        assert name in names, f"{name} is not in {wheel.name}"
    sources = [p for d in ("csrc", "cmake") for p in (REPO / d).rglob("*") if p.is_file()]
    newest = max(p.stat().st_mtime for p in sources)
    assert wheel.stat().st_mtime >= newest, (
        f"{wheel.name} is older than the sources: run `scripts/build_wheels.sh both` again"
    )


@needs_nvcc
def test_the_wheel_installs_on_any_python_3(wheel):
    """No Python ABI (ctypes): one wheel for 3.11 here and 3.12 on the GPU machines."""
    name, version, python, abi, platform = wheel.stem.split("-")
    assert (python, abi) == ("py3", "none"), wheel.name
    assert platform.endswith("x86_64") and platform.startswith(("linux", "manylinux")), wheel.name
    meta = zipfile.ZipFile(wheel).read(f"{name}-{version}.dist-info/WHEEL").decode()
    assert "Tag: py3-none-" in meta, meta


@needs_nvcc
def test_gpu_engine_exports_its_ffi_targets_and_bootstrap(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    symbols = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    for name in (
        "jaxmg_cusolvermp_potrs",
        "jaxmg_nccl_get_unique_id",
        "jaxmg_cuda_create_contexts",
        "jaxmg_cuda_rank_of_mesh_position",
        "jaxmg_cuda_versions",
    ):
        assert name in symbols, f"{name} is not exported by {lib.name}"
    # One target per routine of the one list (csrc/routines/targets.h), as the CPU engine's.
    from jaxmg._core import native

    targets = {s for s in symbols if s.startswith("jaxmg_cusolvermp_")}
    assert targets == {native.target("cuda", r) for r in native.routines("cpu")}
    assert "jaxmg_cuda_routines" in symbols


@needs_nvcc
def test_gpu_engine_links_the_wheels_libraries_by_soname(lib):
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    for needed in ("libcusolverMp.so.0", "libcublasmp.so.0", "libnccl.so.2", "libcudart.so.13"):
        assert f"[{needed}]" in out, f"{lib.name} does not link {needed}"
    # Found next to the installed package: site-packages/jaxmg/_lib -> site-packages/nvidia/...
    for folder in ("nvidia/cu13/lib", "nvidia/cublasmp/cu13/lib", "nvidia/nccl/lib"):
        assert f"$ORIGIN/../../{folder}" in out, f"{lib.name}'s RUNPATH lacks {folder}:\n{out}"


@needs_nvcc
def test_the_wheel_needs_no_compiler_no_apt_and_leaks_no_build_path(wheel):
    """scripts/check_wheel.py, as scripts/build_wheels.sh ran it: RUNPATH relative to the
    package ($ORIGIN only), no absolute path of the build inside any library, and the GPU
    engine's NEEDED libraries all from NVIDIA's wheels, the C runtime or the driver."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_wheel.py"), str(wheel), "both"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runpath = next(ln for ln in proc.stdout.splitlines() if "libjaxmg_cuda.so: RUNPATH" in ln)
    assert "$ORIGIN/../../nvidia/cu13/lib" in runpath and "/tmp" not in runpath, runpath


@needs_nvcc
def test_missing_gpu_libraries_give_a_clear_message(lib, tmp_path):
    """Where cuSOLVERMp is not installed, loading the GPU engine says what to install."""
    script = (
        "import jaxmg._core.native as n\n"
        "try:\n"
        "    n.load('cuda')\n"
        "    print('LOADED')\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    env = {
        "JAXMG_LIB_DIR": str(lib.parent),
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": "",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    out = proc.stdout.strip()
    if out == "LOADED":
        pytest.skip("this machine has the GPU libraries")
    assert out.startswith("ERROR"), proc.stderr[-2000:]
    assert "pip install nvidia-cusolvermp-cu13==0.9.1.9318.post1" in out, out
    assert "libjaxmg_cuda.so" in out and "jaxmg[" not in out, out


# The build backend's decision, without building: build_backend/jaxmg_build.py.


def _backend():
    spec = importlib.util.spec_from_file_location(
        "jaxmg_build_under_test", REPO / "build_backend" / "jaxmg_build.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _fake_nvcc(folder: Path, release: str) -> Path:
    nvcc = folder / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.1'\n"
    )
    nvcc.chmod(0o755)
    return nvcc


@pytest.fixture
def backend(monkeypatch, tmp_path):
    pytest.importorskip("scikit_build_core")
    for name in ("JAXMG_CUDA", "JAXMG_CPU", "CUDACXX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc on PATH unless a test puts one there
    module = _backend()
    monkeypatch.setattr(module, "_nvcc", lambda: module.shutil.which("nvcc"))
    return module


def test_backend_without_nvcc_builds_the_cpu_engine_and_says_why(backend):
    d = backend.decide()
    assert (d.cpu, d.cuda) == (True, False)
    assert "no nvcc found" in d.cuda_reason and "JAXMG_CPU=ON, the default" in d.cpu_reason
    assert not any("nvidia" in r for r in backend.get_requires_for_build_wheel())


def test_backend_with_nvcc_13_builds_both_engines(backend, tmp_path):
    nvcc = _fake_nvcc(tmp_path, "13.0")
    d = backend.decide()
    assert d.cuda and d.cpu and str(nvcc) in d.cuda_reason and "13.0" in d.cuda_reason
    assert "JAXMG_CUDA=OFF skips it" in d.cuda_reason
    requires = backend.get_requires_for_build_wheel()
    assert requires[-3:] == backend.CUDA_BUILD_REQUIRES


def test_backend_jaxmg_cuda_off_wins_over_nvcc(backend, tmp_path, monkeypatch):
    _fake_nvcc(tmp_path, "13.0")
    monkeypatch.setenv("JAXMG_CUDA", "OFF")
    d = backend.decide()
    assert not d.cuda and d.cuda_reason.startswith("JAXMG_CUDA=OFF")
    # a config setting wins over the environment
    assert backend.decide({"cmake.define.JAXMG_CUDA": "ON"}).cuda
    monkeypatch.setenv("JAXMG_CPU", "OFF")
    assert not backend.decide().cpu


def test_backend_keeps_one_build_tree_per_engine_configuration(backend, tmp_path, monkeypatch):
    """build/cpu, build/both, build/gpu: switching the GPU engine never reconfigures the CPU
    engine's tree; a build-dir the caller names wins."""
    monkeypatch.delenv("SKBUILD_BUILD_DIR", raising=False)
    assert backend.with_build_dir(None, backend.decide())["build-dir"] == "build/cpu"
    _fake_nvcc(tmp_path, "13.0")
    assert backend.with_build_dir({}, backend.decide())["build-dir"] == "build/both"
    monkeypatch.setenv("JAXMG_CPU", "OFF")
    assert backend.with_build_dir({}, backend.decide())["build-dir"] == "build/gpu"
    named = {"build-dir": "build/dev-cpu"}
    assert backend.with_build_dir(named, backend.decide())["build-dir"] == "build/dev-cpu"


@pytest.mark.parametrize("release", ["12.4", "14.0"])
def test_backend_refuses_an_nvcc_that_is_not_cuda_13(backend, tmp_path, release, capsys):
    _fake_nvcc(tmp_path, release)
    match = f"is {release}: the GPU engine needs nvcc 13"
    with pytest.raises(backend.BuildConfigError, match=match):
        backend.decide()
    with pytest.raises(SystemExit):
        backend.get_requires_for_build_wheel()
    err = capsys.readouterr().err
    assert "JAXMG_CUDA=OFF pip install ." in err, err


def test_backend_refuses_jaxmg_cuda_on_without_nvcc(backend, monkeypatch):
    monkeypatch.setenv("JAXMG_CUDA", "on")
    with pytest.raises(backend.BuildConfigError, match="no nvcc was found") as e:
        backend.decide()
    assert "JAXMG_CUDA=OFF" in str(e.value)
    monkeypatch.setenv("JAXMG_CUDA", "maybe")
    with pytest.raises(backend.BuildConfigError, match="JAXMG_CUDA='maybe': use ON or OFF"):
        backend.decide()


def test_cmake_stops_at_configure_when_no_cuda_compiler_works(tmp_path):
    """`cmake -DJAXMG_CUDA=ON` with an nvcc that cannot compile: the cause, and the skip."""
    cmake = shutil.which(
        "cmake", path=os.pathsep.join([str(Path(sys.executable).parent), *os.get_exec_path()])
    )
    if cmake is None:
        pytest.skip("no cmake")
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'broken' >&2\nexit 1\n")
    nvcc.chmod(0o755)
    env = {**os.environ, "CUDACXX": str(nvcc)}
    proc = subprocess.run(
        [
            cmake,
            "-S",
            str(REPO),
            "-B",
            str(tmp_path / "build"),
            "-DJAXMG_CPU=OFF",
            "-DJAXMG_CUDA=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "no working CUDA compiler found" in out, out[-3000:]
    assert "JAXMG_CUDA=OFF" in out, out[-3000:]


# scripts/check_wheel.py, the check every built wheel passes, finds what it looks for.


def test_check_wheel_finds_a_leaked_build_path_and_missing_engines(tmp_path):
    """A wheel whose library holds the source tree's absolute path, with the GPU engine missing
    from a `both` wheel: both reported, and the checker fails."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import check_wheel
    finally:
        sys.path.pop(0)
    lib = next(
        Path(sys.prefix).glob("lib/python3*/site-packages/jaxmg/_lib/libjaxmg_layout_capi.so"), None
    )
    if lib is None:
        pytest.skip("jaxmg is not installed in this environment (scripts/setup.sh)")
    version = check_wheel.tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    wheel = tmp_path / f"jaxmg-{version}-py3-none-linux_x86_64.whl"
    info = f"jaxmg-{version}.dist-info"
    leaked = lib.read_bytes() + f"{REPO}/csrc/layout/layout.cc\0".encode()
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("jaxmg/_lib/libjaxmg_layout_capi.so", leaked)
        z.writestr("jaxmg/_lib/libjaxmg_cpu.so", lib.read_bytes())
        z.writestr("jaxmg/__init__.py", f'__version__ = "{version}"\n')
        z.writestr(f"{info}/METADATA", f"Name: jaxmg\nVersion: {version}\n")
        z.writestr(f"{info}/licenses/LICENSE", "Apache License")
    _, problems = check_wheel.check(wheel, "both", REPO)
    assert any("a both wheel has" in p for p in problems), problems
    assert any("libjaxmg_layout_capi.so: holds the build's absolute paths" in p for p in problems)
    assert not any("libjaxmg_cpu.so: holds" in p for p in problems), problems
    assert check_wheel.main([str(wheel), "both"]) == 1
    _, problems = check_wheel.check(wheel, "cpu", REPO)
    assert problems == [f"libjaxmg_layout_capi.so: holds the build's absolute paths ['{REPO}']"], (
        problems
    )
