"""A matrix too big for one device, built where it lies (docs/bigmatrix.md), on 2 processes:
a kernel built inside jit shard by shard on meshes of Explicit and of Auto axes, solved with
potrs (value and gradient) and cho_factor / cho_solve against NumPy, with the shardings of the
kernel and of the results; the warning for a large replicated matrix; the error, and the
padding, for an order that does not divide over the mesh; and the page's examples."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases, run_killable

ROOT = Path(__file__).resolve().parents[1]
MP = Path(__file__).resolve().parent / "mp"

pytestmark = pytest.mark.skipif(not mpirun_available(), reason="Open MPI not installed")

MESHES = [(2, 1), (1, 2)]
TYPES = ["Explicit", "Auto"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bigmatrix")
    return run_cases(2, MP / "bigmatrix_worker.py", [], tmp, timeout=400)


def _ok(rec):
    assert "error" not in rec, f"{rec['error']}\n{rec.get('trace', '')}"
    return rec


@pytest.mark.parametrize("types", TYPES)
@pytest.mark.parametrize("mesh", MESHES, ids=lambda m: f"{m[0]}x{m[1]}")
def test_a_kernel_built_in_jit_solves_on_explicit_and_auto_meshes(results, mesh, types):
    r = _ok(results[f"gp_{mesh[0]}x{mesh[1]}_{types}"])
    tol = results["tol"]  # 10 n eps cond(K), relative
    for key in ("kernel", "alpha", "logdet", "nll", "grad", "cho_solve", "cho_logdet"):
        assert r[key] <= tol, (key, r[key], tol)
    # The kernel lies in blocks, rows over "rows" and columns over "cols": no device holds it.
    assert r["kernel_spec"] == ["rows" if mesh[0] > 1 else None, "cols" if mesh[1] > 1 else None]
    assert r["kernel_shards"] == [[64 // mesh[0], 64 // mesh[1]]]
    assert r["temp_bytes"] < r["matrix_bytes"]
    # The solutions lie like y (on Explicit axes, in their types too).
    assert r["alpha_spec"] == r["y_spec"] == r["cho_solve_spec"]
    if types == "Explicit":
        assert r["alpha_type"] == "float64[64@rows]", r["alpha_type"]


def test_a_large_replicated_matrix_warns_once_per_call_site(results):
    r = _ok(results["warnings"])
    for case in ("replicated", "numpy", "factor", "jit", "grad"):
        seen = r[case]
        assert len(seen) == 1, (case, seen)  # once: three calls of one line, or a gradient
        category, filename, message = seen[0]
        assert category == "ReplicatedMatrixWarning", (case, seen)
        assert filename == r["file"], (case, filename)  # the caller's line, not jaxmg's
        assert "64 x 64 float64 (32.0 KiB), is replicated" in message, message
        assert "each of the 2 devices holds all of it" in message, message
        assert "docs/bigmatrix.md" in message and "replicated_warning_bytes" in message
    assert r["replicated_x"] < 1e-12  # and the call still solves
    assert r["sharded"] == []  # a sharded matrix: no warning
    assert r["default_threshold"] == []  # 32 KiB is below the default 1 GiB
    assert r["off"] == []  # 0: never


@pytest.mark.parametrize("types", ["explicit", "auto"])
def test_an_order_that_does_not_divide_says_how_to_pad(results, types):
    r = _ok(results["divisibility"])
    cases = [f"{types}_numpy"] + (["auto_jit"] if types == "auto" else [])
    for case in cases:
        message = r[case]
        assert message.startswith("ValueError: the matrix order 9 is not divisible by the 2 "), (
            case,
            message,
        )
        assert "pad the matrix to a multiple of 2 (here 10)" in message, message
        assert "[[A, 0], [0, I]]" in message and "docs/bigmatrix.md#padding" in message
    qr = r[f"{types}_qr"]
    assert "the 9 matrix rows are not divisible" in qr and "multiple of 2 (here 10)" in qr, qr
    # The padding the message describes solves the original system.
    assert r[f"{types}_padded"] < 1e-14 and r[f"{types}_padded_tail"] == 0.0
    assert r[f"{types}_padded_logdet"] < 1e-13


def test_the_config_option_is_checked():
    import jaxmg

    assert jaxmg.config.replicated_warning_bytes == 1 << 30
    with pytest.raises(ValueError, match="replicated_warning_bytes must be at least 0"):
        jaxmg.config.update("replicated_warning_bytes", -1)
    # Read in Python only: not part of the engines' attribute.
    from jaxmg._core import config as _config

    assert "replicated_warning_bytes" not in _config.engine_attribute(_config.Config())


def test_the_pages_examples_run_on_two_processes(tmp_path):
    """docs/bigmatrix.md's examples (the docs test runs them too, with every other example;
    this runs them alone)."""
    for name in ("bigmatrix_callback", "bigmatrix_jit", "bigmatrix_padding"):
        script = ROOT / "docs" / "examples" / f"{name}.py"
        cmd = [sys.executable, "-m", "jaxmg", "launch", "-n", "2", "--timeout", "300", str(script)]
        proc = run_killable(cmd, 330, cwd=tmp_path)
        assert proc.returncode == 0, (name, proc.stdout[-3000:] + proc.stderr[-3000:])
