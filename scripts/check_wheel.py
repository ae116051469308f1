"""Checks a jaxmg wheel of one kind (cpu, gpu or both) before it is shipped.

    python scripts/check_wheel.py WHEEL KIND [--source-root DIR]

- the native libraries the kind promises are in it, and no others;
- its version, LICENSE and metadata agree with the source tree;
- every library's RUNPATH names only folders relative to itself ($ORIGIN/...): the GPU engine
  finds NVIDIA's wheels next to the installed package, nothing points into the machine that
  built it;
- no absolute path of the build (the source tree, CMake's build tree, pip's build environment)
  is left in any library;
- the GPU engine needs nothing a compiler or apt would have to supply: each NEEDED library is
  one of NVIDIA's pip wheels (pyproject.toml's cuda13 extra), the C/C++ runtime, or the GPU
  driver's libcuda.so.1.

Prints what it found (libraries, NEEDED, RUNPATH); exits 1 with the problems otherwise.
scripts/build_wheels.sh runs it on every wheel it builds; the tests run it again.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

LIBS = {
    "cpu": {"libjaxmg_layout_capi.so", "libjaxmg_cpu.so"},
    "gpu": {"libjaxmg_layout_capi.so", "libjaxmg_cuda.so"},
    "both": {"libjaxmg_layout_capi.so", "libjaxmg_cpu.so", "libjaxmg_cuda.so"},
}
# What the GPU engine may link: NVIDIA's wheels (found through RUNPATH), the C and C++ runtime,
# and the driver's libcuda.so.1 (present wherever there is a GPU).
GPU_NEEDED_OK = re.compile(
    r"^(libcusolverMp\.so\.0|libcublasmp\.so\.0|libnccl\.so\.2|libcudart\.so\.13|"
    r"libcublas(Lt)?\.so\.13|libcusolver\.so\.12|libcuda\.so\.1|libnvshmem_host\.so\.3|"
    r"libstdc\+\+\.so\.6|libgcc_s\.so\.1|libm\.so\.6|libc\.so\.6|libdl\.so\.2|"
    r"libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$"
)
RUNPATH_FOLDERS = ("nvidia/cu13/lib", "nvidia/cublasmp/cu13/lib", "nvidia/nccl/lib")


def dynamic_section(lib: Path) -> tuple[list[str], list[str]]:
    """(NEEDED, RUNPATH entries) from `readelf -d`."""
    out = subprocess.run(
        ["readelf", "-d", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+?)\]", out)
    runpath = [
        p for m in re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*?)\]", out) for p in m.split(":")
    ]
    return needed, runpath


def leaked_paths(lib: Path, roots: list[str]) -> list[str]:
    """Absolute build paths (any of roots, or pip's build environment) inside the library."""
    data = lib.read_bytes()
    found = []
    for root in {r.rstrip("/") for r in roots if r and r != "/"}:
        if root.encode() in data:
            found.append(root)
    for marker in (b"/pip-build-env-", b"/pip-req-build-"):
        if marker in data:
            found.append(marker.decode())
    return found


def check(wheel: Path, kind: str, source_root: Path) -> tuple[list[str], list[str]]:
    """(report lines, problems)."""
    report, problems = [], []
    project = tomllib.loads((source_root / "pyproject.toml").read_text())["project"]
    name, version = wheel.name.split("-")[:2]
    if name != "jaxmg" or version != project["version"]:
        problems.append(f"{wheel.name}: not jaxmg {project['version']}")
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
        names = z.namelist()
        libs = {n.rsplit("/", 1)[-1] for n in names if n.startswith("jaxmg/_lib/") and ".so" in n}
        if libs != LIBS[kind]:
            problems.append(
                f"native libraries {sorted(libs)}, a {kind} wheel has {sorted(LIBS[kind])}"
            )
        info = f"jaxmg-{version}.dist-info"
        if not any(n.startswith(f"{info}/") and n.rsplit("/", 1)[-1] == "LICENSE" for n in names):
            problems.append("no LICENSE in the wheel's .dist-info")
        meta = z.read(f"{info}/METADATA").decode() if f"{info}/METADATA" in names else ""
        if f"Version: {project['version']}" not in meta:
            problems.append("METADATA's version is not pyproject.toml's")
        init = z.read("jaxmg/__init__.py").decode()
        if f'__version__ = "{project["version"]}"' not in init:
            problems.append("jaxmg.__version__ is not pyproject.toml's version")
        roots = [str(source_root.resolve()), tempfile.gettempdir() + "/pip-"]
        for lib_name in sorted(libs):
            lib = Path(tmp) / lib_name
            lib.write_bytes(z.read(f"jaxmg/_lib/{lib_name}"))
            needed, runpath = dynamic_section(lib)
            report.append(f"{lib_name}: NEEDED {', '.join(needed)}")
            report.append(f"{lib_name}: RUNPATH {':'.join(runpath) or '(none)'}")
            absolute = [p for p in runpath if not p.startswith("$ORIGIN")]
            if absolute:
                problems.append(f"{lib_name}: RUNPATH names absolute folders {absolute}")
            if leaks := leaked_paths(lib, roots):
                problems.append(f"{lib_name}: holds the build's absolute paths {leaks}")
            if lib_name == "libjaxmg_cuda.so":
                for folder in RUNPATH_FOLDERS:
                    if f"$ORIGIN/../../{folder}" not in runpath:
                        problems.append(f"{lib_name}: RUNPATH lacks $ORIGIN/../../{folder}")
                if others := [n for n in needed if not GPU_NEEDED_OK.match(n)]:
                    problems.append(
                        f"{lib_name}: needs {others}, not from NVIDIA's wheels or the C runtime"
                    )
    return report, problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheel", type=Path)
    p.add_argument("kind", choices=sorted(LIBS))
    p.add_argument("--source-root", type=Path, default=Path(__file__).resolve().parents[1])
    args = p.parse_args(argv)
    report, problems = check(args.wheel, args.kind, args.source_root)
    for line in report:
        print(f"[wheel] {line}")
    for line in problems:
        print(f"[wheel] PROBLEM: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
