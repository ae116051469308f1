"""What a new user does: install jaxmg's wheel into a fresh virtual environment, then a
distributed solve.

The wheels are built as a user's `pip install .` builds them (`pip wheel .` with pip's default
build isolation, by scripts/build_wheels.sh: the same PEP 517 hooks in the same isolated
environment; build requirements from pyproject.toml and build_backend/ alone), installed into a
new venv, and each installed package then solves on a 2x1 mesh of two MPI processes, run from a
temporary folder so that the repository's own jaxmg/ cannot shadow it. pip's cache
(PIP_CACHE_DIR or ~/.cache/pip) makes a second run faster (the CPU test about 2 minutes on 2
cores, its wheel's build included). Deselect with `-m "not install"`.

- The CPU wheel (`scripts/build_wheels.sh cpu`, or JAXMG_CPU_WHEEL) goes over JAXMg 1.x, the
  predecessor under the same distribution name, as the install page says: installing it
  replaces JAXMg, and `pip install -U jaxmg` from the index keeps it.
- nvcc present (JAXMG_CUDA unset): `pip install '<wheel>[cuda13]'` with both engines, and the
  GPU engine finds NVIDIA's installed wheels through its RUNPATH. The CUDA build takes minutes,
  so where scripts/build_wheels.sh has built the wheel with both engines (scripts/test.sh runs
  it once and tests/test_cuda_build.py checks it) that file is installed (JAXMG_WHEEL, or
  dist/both/); without one (or with JAXMG_WHEEL=source), the source copy itself is built, as a
  user's `pip install '.[cuda13]'` does.
- A GPU build that cannot work (an nvcc that is not CUDA 13) stops before any download or
  compile, with the cause and JAXMG_CUDA=OFF.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
from mpirun import MPI_FLAGS, mpirun_available, run_killable

REPO = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
PIP_TIMEOUT = 1500  # seconds: cold cache, 2 cores (a warm run takes a fraction of it)
CUDA_PIP_TIMEOUT = 2400  # the GPU engine's build from source, and jax[cuda13]'s wheels
SOLVE_TIMEOUT = 300

pytestmark = [
    pytest.mark.install,
    pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)"),
]

# Run by each of 2 processes under mpirun with the venv's Python; process 0 prints one JSON line.
SOLVE = textwrap.dedent(
    """
    import importlib.metadata
    import json

    import jax

    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)

    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    import jaxmg

    n = 96
    i = np.arange(n)
    a = np.exp(-np.abs(i[:, None] - i[None, :]) / 8.0)  # SPD (Kac-Murdock-Szego)
    b = np.stack([np.ones(n), np.linspace(-1.0, 1.0, n)], axis=1)
    mesh = jax.make_mesh((2, 1), ("pr", "pc"))

    def place(x, spec):
        sharding = NamedSharding(mesh, spec)
        return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

    x, logdet = jaxmg.potrs(place(a, P("pr", "pc")), place(b, P("pr", None)), return_logdet=True)
    x = np.asarray(multihost_utils.process_allgather(x, tiled=True))
    residual = np.linalg.norm(a @ x - b) / (np.linalg.norm(a, 2) * np.linalg.norm(x))
    logdet_err = abs(float(np.asarray(logdet.addressable_data(0))) - np.linalg.slogdet(a)[1])
    if jax.process_index() == 0:  # a file: the ranks' stdout lines can interleave
        with open("result.json", "w") as f:
            json.dump({
                "processes": jax.process_count(),
                "jaxmg": jaxmg.__file__,
                "version": jaxmg.__version__,
                "distribution": importlib.metadata.version("jaxmg"),
                "residual": float(residual),
                "logdet_err": float(logdet_err),
            }, f)
    """
)

NETWORK_ERRORS = (
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Failed to establish a new connection",
)


def copy_repository(dest: Path) -> Path:
    """The files git knows (tracked, or new and not ignored) as they are in the working tree."""
    dest.mkdir()
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = None
    if files is None:  # not a git checkout (e.g. an unpacked sdist): all but build outputs
        shutil.copytree(
            REPO,
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(".git", ".venv", "build", ".gpu", "__pycache__", "*.so"),
        )
        return dest
    for name in files:
        src = REPO / name
        if src.is_file():  # deleted but still tracked: skipped
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would point Python or jaxmg at the repository or its venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "JAXMG_LIB_DIR", "PIP_NO_BUILD_ISOLATION"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if sys.prefix != sys.base_prefix:  # the venv running the tests: off PATH
        here = str(Path(sys.prefix) / "bin")
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != here)
    env.update(extra)
    return env


def built_wheel() -> Path | None:
    """The wheel with both engines scripts/build_wheels.sh built (JAXMG_WHEEL, or dist/both/),
    if any; JAXMG_WHEEL=source: none, build the source copy."""
    if env := os.environ.get("JAXMG_WHEEL"):
        return None if env == "source" else Path(env)
    found = sorted((REPO / "dist" / "both").glob("jaxmg-*.whl"))
    return found[-1] if found else None


def cpu_wheel() -> tuple[Path, str]:
    """(the CPU wheel, what its build said): JAXMG_CPU_WHEEL, else `scripts/build_wheels.sh cpu`
    (`pip wheel .` with build isolation, JAXMG_CUDA=OFF; checked by scripts/check_wheel.py)."""
    if env := os.environ.get("JAXMG_CPU_WHEEL"):
        return Path(env), ""
    t0 = time.monotonic()
    proc = run_killable(
        ["bash", str(REPO / "scripts" / "build_wheels.sh"), "cpu"],
        PIP_TIMEOUT,
        cwd=REPO,
        env=clean_env(PYTHON=sys.executable),
    )
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 and any(e in said for e in NETWORK_ERRORS):
        pytest.skip(f"pip could not reach the package index:\n{said[-2000:]}")
    assert proc.returncode == 0, f"scripts/build_wheels.sh cpu failed:\n{said[-6000:]}"
    print(f"scripts/build_wheels.sh cpu took {time.monotonic() - t0:.0f} s")
    return Path(proc.stdout.strip().splitlines()[-1]), said


def find_nvcc() -> str | None:
    for c in (os.environ.get("CUDACXX"), *(os.path.join(p, "nvcc") for p in os.get_exec_path())):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None


def fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin" / "python"


def pip_install(python: Path, spec: str, env: dict[str, str], cwd: Path, timeout: float, *opts):
    """`pip install -v [OPTS] SPEC` (plain pip, build isolation); skips the test without the
    index."""
    t0 = time.monotonic()
    pip = run_killable(
        [str(python), "-m", "pip", "install", "-v", "--progress-bar", "off", *opts, spec],
        timeout,
        cwd=cwd,
        env=env,
    )
    seconds = time.monotonic() - t0
    log = pip.stdout[-6000:] + "\n" + pip.stderr[-8000:]
    if pip.returncode != 0 and any(e in log for e in NETWORK_ERRORS):
        pytest.skip(f"pip could not reach the package index:\n{pip.stderr[-2000:]}")
    what = " ".join(["pip install", *opts, spec])
    assert pip.returncode == 0, f"{what} failed after {seconds:.0f} s:\n{log}"
    print(f"{what} took {seconds:.0f} s")
    return pip


def installed_version(python: Path, env: dict[str, str], cwd: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('jaxmg'))"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def site_packages(python: Path, env: dict[str, str], cwd: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out)


def distributed_solve(python: Path, site: Path, run_dir: Path) -> None:
    """The 2-process potrs with the installed package, checked against NumPy; then JAXMg 1.x's
    README example, verbatim, on 2 processes."""
    run_dir.mkdir()  # neither the repository nor the copy: the installed jaxmg
    (run_dir / "solve.py").write_text(SOLVE)
    shutil.copy(REPO / "examples" / "readme_example.py", run_dir / "readme_example.py")
    cmd = ["mpirun", "-n", "2", *MPI_FLAGS]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    run_env = clean_env(JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    run_env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    seed = run_killable(
        [*cmd, str(python), "readme_example.py"], SOLVE_TIMEOUT, cwd=run_dir, env=run_env
    )
    lines = [line.strip() for line in seed.stdout.splitlines()]
    assert seed.returncode == 0 and "True" in lines and "False" not in lines, (
        f"the seed example (exit {seed.returncode}):\n{seed.stdout[-3000:]}\n{seed.stderr[-3000:]}"
    )
    cmd += [str(python), "solve.py"]
    proc = run_killable(cmd, SOLVE_TIMEOUT, cwd=run_dir, env=run_env)
    out = run_dir / "result.json"
    assert proc.returncode == 0 and out.exists(), (
        f"the solve failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    result = json.loads(out.read_text())
    assert result["processes"] == 2
    assert Path(result["jaxmg"]).resolve().is_relative_to(site.resolve()), result["jaxmg"]
    assert result["version"] == result["distribution"] == VERSION, result
    assert result["residual"] < 1e-12, result
    assert result["logdet_err"] < 1e-9, result


def test_cpu_wheel_replaces_jaxmg_1x_then_a_distributed_solve(tmp_path):
    """The CPU wheel over the newest JAXMg 1.x the index has for this Python (1.4.1 needs 3.12;
    1.1.1 on 3.11), with the pin of the install page; then `pip install -U jaxmg` from the index
    alone keeps it, and 2 processes solve with it."""
    wheel, said = cpu_wheel()
    if said:
        assert "jaxmg build: CPU engine ON (JAXMG_CPU=ON)" in said, said[-4000:]
        assert "GPU engine OFF (JAXMG_CUDA=OFF" in said, said[-4000:]
    assert wheel.name == f"jaxmg-{VERSION}-py3-none-linux_x86_64.whl", wheel
    python = fresh_venv(tmp_path)
    env = clean_env()

    pip_install(python, "jaxmg<2", env, tmp_path, PIP_TIMEOUT, "--no-deps")  # JAXMg, the files
    predecessor = installed_version(python, env, tmp_path)
    assert predecessor.startswith("1."), predecessor
    pip = pip_install(
        python, f"jaxmg=={VERSION}", env, tmp_path, PIP_TIMEOUT, "--find-links", str(wheel.parent)
    )
    assert f"Successfully uninstalled jaxmg-{predecessor}" in pip.stdout, pip.stdout[-3000:]
    assert installed_version(python, env, tmp_path) == VERSION
    pip = pip_install(python, "jaxmg", env, tmp_path, PIP_TIMEOUT, "-U", "--no-deps")
    assert "Requirement already satisfied: jaxmg" in pip.stdout, pip.stdout[-3000:]
    assert installed_version(python, env, tmp_path) == VERSION

    site = site_packages(python, env, tmp_path)
    libs = site / "jaxmg" / "_lib"
    for name in ("libjaxmg_cpu.so", "libjaxmg_layout_capi.so"):
        assert (libs / name).is_file(), f"{name} not installed in {libs}"
    assert not (libs / "libjaxmg_cuda.so").exists(), "JAXMG_CUDA=OFF built the GPU engine"
    # Nothing of JAXMg is left in the package: every file is one of this wheel's.
    record = (site / f"jaxmg-{VERSION}.dist-info" / "RECORD").read_text().splitlines()
    ours = {line.rsplit(",", 2)[0] for line in record}
    files = {
        str(p.relative_to(site))
        for p in (site / "jaxmg").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert files <= ours, f"JAXMg's files were left behind: {sorted(files - ours)}"
    assert not list(site.glob("jaxmg-1.*.dist-info")), "JAXMg's metadata was left behind"
    distributed_solve(python, site, tmp_path / "run")


@pytest.mark.skipif(
    find_nvcc() is None or bool(os.environ.get("JAXMG_SKIP_CUDA_BUILD")),
    reason="no nvcc (or JAXMG_SKIP_CUDA_BUILD): the GPU engine is not built here",
)
def test_pip_install_cuda13_with_nvcc_builds_both_engines_then_a_distributed_solve(tmp_path):
    python = fresh_venv(tmp_path)
    env = clean_env()
    env.pop("JAXMG_CUDA", None)  # the build decides, as for a user: nvcc found -> both engines
    wheel = built_wheel()
    if wheel is not None:
        assert wheel.is_file(), wheel
        source = wheel
    else:
        source = copy_repository(tmp_path / "src")
    pip = pip_install(python, f"{source}[cuda13]", env, tmp_path, CUDA_PIP_TIMEOUT)
    if wheel is None:
        said = pip.stdout + pip.stderr
        assert "jaxmg engines: GPU engine (libjaxmg_cuda.so) ON: nvcc 13." in said, said[-4000:]
        assert "configure-time CUDA compile check passed" in said, said[-4000:]

    site = site_packages(python, env, tmp_path)
    libs = site / "jaxmg" / "_lib"
    for name in ("libjaxmg_cpu.so", "libjaxmg_layout_capi.so", "libjaxmg_cuda.so"):
        assert (libs / name).is_file(), f"{name} not installed in {libs}"
    # Every library the GPU engine needs is found through its RUNPATH in the installed wheels,
    # with no LD_LIBRARY_PATH, but the GPU driver's libcuda.so.1 (no GPU here).
    ldd_env = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
    ldd = subprocess.run(
        ["ldd", str(libs / "libjaxmg_cuda.so")], capture_output=True, text=True, env=ldd_env
    ).stdout
    missing = [ln.split()[0] for ln in ldd.splitlines() if "not found" in ln]
    assert set(missing) <= {"libcuda.so.1"}, ldd
    for soname in ("libcusolverMp.so.0", "libcublasmp.so.0", "libnccl.so.2", "libcudart.so.13"):
        line = next((ln for ln in ldd.splitlines() if soname in ln), "")
        assert str(site.resolve()) in str(Path(line.split("=>")[-1].split()[0]).resolve()), ldd
    # One NCCL that serves XLA and jaxmg: cuBLASMp 0.10 needs >= 2.29.2.
    versions = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(m.version('nvidia-nccl-cu13'), "
            "m.version('jax'), m.version('nvidia-cusolvermp-cu13'))",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout.split()
    nccl = tuple(int(x) for x in versions[0].split("+")[0].split(".")[:3])
    assert nccl >= (2, 29, 2), versions
    assert versions[2] == "0.9.1.9318.post1", versions
    distributed_solve(python, site, tmp_path / "run")


def test_a_gpu_build_that_cannot_work_stops_before_building_and_says_how_to_skip(tmp_path):
    """An nvcc of another CUDA release: the build stops at its first step, naming JAXMG_CUDA=OFF."""
    source = copy_repository(tmp_path / "src")
    python = fresh_venv(tmp_path)
    nvcc = tmp_path / "cuda12" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    env = clean_env(CUDACXX=str(nvcc))
    env.pop("JAXMG_CUDA", None)
    t0 = time.monotonic()
    pip = run_killable(
        [str(python), "-m", "pip", "install", "--progress-bar", "off", str(source)],
        PIP_TIMEOUT,
        cwd=tmp_path,
        env=env,
    )
    seconds = time.monotonic() - t0
    log = pip.stdout + pip.stderr
    if pip.returncode != 0 and any(e in log for e in NETWORK_ERRORS):
        pytest.skip("pip could not reach the package index")
    assert pip.returncode != 0, log[-4000:]
    assert f"{nvcc} is 12.4: the GPU engine needs nvcc 13.x" in log, log[-4000:]
    assert "JAXMG_CUDA=OFF pip install ." in log, log[-4000:]
    assert "nvidia-cusolvermp" not in log and "Building CXX" not in log, log[-4000:]
    print(f"the refused build stopped after {seconds:.0f} s")
