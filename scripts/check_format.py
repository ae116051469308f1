"""Fails when a C++/CUDA source under csrc/ is not formatted by clang-format (.clang-format)."""

import shutil
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
exe = shutil.which("clang-format", path=str(Path(sys.executable).parent)) or shutil.which(
    "clang-format"
)
if exe is None:
    sys.exit("clang-format is not installed (scripts/setup.sh installs it)")
files = sorted(
    str(p) for ext in ("*.h", "*.cc", "*.cu", "*.cuh") for p in root.glob(f"csrc/**/{ext}")
)
proc = subprocess.run([exe, "--dry-run", "--Werror", *files], capture_output=True, text=True)
if proc.returncode != 0:
    print(proc.stderr[-4000:])
    sys.exit(f"clang-format: run `{exe} -i` on the files above")
print(f"clang-format: {len(files)} files clean")
