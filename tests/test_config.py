"""jaxmg.config: the options, their environment defaults (read once), validation with clear
errors, per-thread overrides, the call's `config` attribute against the native decoder, and a
compiled call per configuration. (Processes that disagree: tests/test_reliability.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import jaxmg
from jaxmg._core import config as _config
from jaxmg._core.testing import hooks

CSRC = Path(__file__).resolve().parents[1] / "csrc"


@pytest.fixture(autouse=True)
def _restore():
    yield
    jaxmg.config.reset()


def test_options_defaults_and_environment_names():
    c = jaxmg.config.current()
    assert c == _config._from_environment(os.environ)  # no JAXMG_* set: Config()
    assert "cpu_eigh" in _config.PUBLIC and "test_fail" not in _config.PUBLIC
    assert _config.env_name("gpu_one_device") == "JAXMG_GPU_ONE_DEVICE"
    assert jaxmg.config.eig_band == c.eig_band
    assert "cpu_eigh=" in repr(jaxmg.config)


def test_update_override_and_reset():
    jaxmg.config.update("cpu_eigh", "Two-Stage")  # case and spaces do not matter
    assert jaxmg.config.cpu_eigh == "two-stage"
    with jaxmg.config.override(cpu_eigh="scalapack", eig_band=32):
        assert (jaxmg.config.cpu_eigh, jaxmg.config.eig_band) == ("scalapack", 32)
        with jaxmg.config.override(eig_band=16):
            assert (jaxmg.config.cpu_eigh, jaxmg.config.eig_band) == ("scalapack", 16)
        assert jaxmg.config.eig_band == 32
    assert (jaxmg.config.cpu_eigh, jaxmg.config.eig_band) == ("two-stage", 0)
    jaxmg.config.reset()
    assert jaxmg.config.cpu_eigh == os.environ.get("JAXMG_CPU_EIGH", "auto")


def test_an_override_holds_on_its_own_thread_only():
    seen = {}
    with jaxmg.config.override(gpu_lu="cusolvermp"):
        thread = threading.Thread(target=lambda: seen.update(other=jaxmg.config.gpu_lu))
        thread.start()
        thread.join()
        seen["mine"] = jaxmg.config.gpu_lu
    assert seen == {"mine": "cusolvermp", "other": "auto"}


@pytest.mark.parametrize(
    "name, value, error, message",
    [
        (
            "cpu_eigh",
            "fast",
            ValueError,
            "cpu_eigh must be one of 'auto', 'two-stage', 'scalapack'",
        ),
        ("gpu_lu", "scalapack", ValueError, "gpu_lu must be one of 'auto', 'cusolvermp'"),
        ("eig_band", -1, ValueError, "eig_band must be at least 0"),
        ("eig_q2", "gemm", ValueError, "eig_q2 must be one of 'auto', 'fused'"),
        ("gpu_math", "fp16", ValueError, "gpu_math must be one of 'auto', 'tf32', 'bf16x9'"),
        ("eig_band", "64", TypeError, "eig_band must be an int"),
        ("eig_q2_group", True, TypeError, "eig_q2_group must be an int"),
        ("qr_panel", 256, ValueError, "no configuration option 'qr_panel'; the options are"),
        ("test_fail", "lu:0:1", ValueError, "test hook; set it with jaxmg._core.testing.hooks"),
    ],
)
def test_bad_values_say_what_to_change(name, value, error, message):
    with pytest.raises(error, match="jaxmg.config.update: ") as info:
        jaxmg.config.update(name, value)
    assert message in str(info.value)
    with pytest.raises(error) as info:
        with jaxmg.config.override(**{name: value}):
            pass
    assert message in str(info.value)


def test_hooks_are_checked_too():
    with hooks(test_fail="lu:1:3", rows_per_chunk=5, redistribute=True):
        c = jaxmg.config.current()
        assert (c.test_fail, c.rows_per_chunk, c.redistribute) == ("lu:1:3", 5, True)
    with pytest.raises(ValueError, match="'<algorithm>:<rank>:<step>'"):
        with hooks(test_fail="lu-1-3"):
            pass


def test_the_call_attribute_is_what_the_native_library_decodes():
    """The fields jaxmg/_core/config.py sends are those of csrc/common/config.h's one list
    (kConfigFields, which the decoder reads and the library exports), of the same kinds."""
    from jaxmg._core import native

    fields = native.config_fields("cpu")
    sent = _config.engine_attribute(_config.Config())
    assert list(sent) == list(fields)
    kinds = {
        name: f.metadata["kind"] if f.metadata["kind"] == "choice" else f.type
        for name, f in _config._FIELDS.items()
        if name in sent
    }
    assert {
        n: {"choice": "choice", "int": "count", "str": "text"}[k] for n, k in kinds.items()
    } == (fields)
    struct = (CSRC / "common" / "config.h").read_text()
    assert len(_config.Config().test_fail) < 48 and "char test_fail[48]" in struct
    codes = _config.engine_attribute(
        _config.Config(cpu_inverses="blocked", gpu_eigh="cusolvermp", eig_band=32)
    )
    assert (codes["cpu_inverses"], codes["gpu_eigh"], codes["eig_band"]) == (2, 1, 32)
    assert "kAuto = 0" in struct and "kLibrary = 1" in struct and "kOwn = 2" in struct
    # gpu_math's codes: the Choice values the GPU engine maps to cuBLAS and cuSOLVER math modes
    # (csrc/engines/cusolvermp/local_blas.cc), each decoded (the decoder's largest code last).
    for value, code, member in (
        ("tf32", 3, "kTf32 = 3"),
        ("bf16x9", 4, "kBf16x9 = 4"),
        ("fixed-point", 5, "kFixedPoint = 5"),
        ("bf16x9+fixed-point", 6, "kBf16x9FixedPoint = 6"),
    ):
        assert _config.engine_attribute(_config.Config(gpu_math=value))["gpu_math"] == code
        assert member in struct
    decoder = (CSRC / "ffi" / "config.h").read_text()
    assert "static_cast<int64_t>(Choice::kBf16x9FixedPoint)" in decoder


SCRIPT = textwrap.dedent(
    """
    import json, os, warnings
    import jax, numpy as np
    import jaxmg
    from jaxmg._core import routine
    out = {}
    mesh = jax.make_mesh((1, 1), ("pr", "pc"))
    a, b = np.eye(8) * 2, np.ones(8)
    def probe(name, fn):
        try:
            fn(); out[name] = "ok"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe("first", lambda: jaxmg.potrs(a, b, mesh=mesh))
    out["warnings"] = [str(w.message) for w in caught]
    if out["first"] == "ok":
        out["read"] = [jaxmg.config.cpu_eigh, jaxmg.config.eig_band]
        os.environ["JAXMG_CPU_EIGH"] = "scalapack"  # read once: no effect now
        out["later"] = jaxmg.config.cpu_eigh
        misses = routine._build.cache_info().misses
        jaxmg.potrs(a, b, mesh=mesh)  # the same configuration: the same compiled call
        out["same"] = routine._build.cache_info().misses - misses
        with jaxmg.config.override(cpu_lu="scalapack"):  # another: compiled again
            jaxmg.potrs(a, b, mesh=mesh)
        out["other"] = routine._build.cache_info().misses - misses
    print(json.dumps(out))
    """
)


# The variables these tests set (others, such as JAXMG_LIB_DIR, pass through).
_OURS = {_config.env_name(n) for n in _config.PUBLIC} | set(_config._RETIRED)
_OURS |= {"JAXMG_CALL_TIMEOUT"}


def _run(tmp_path, **env):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={k: v for k, v in os.environ.items() if k not in _OURS} | env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_environment_gives_the_defaults_once_and_each_configuration_compiles(tmp_path):
    out = _run(tmp_path, JAXMG_CPU_EIGH="two-stage", JAXMG_EIG_BAND="32", JAXMG_QR_PANEL="128")
    assert out["first"] == "ok", out
    assert out["read"] == ["two-stage", 32] and out["later"] == "two-stage", out
    assert out["same"] == 0 and out["other"] == 1, out
    # A switch that no longer exists is named, with what replaced it.
    assert any("no longer reads JAXMG_QR_PANEL" in w for w in out["warnings"]), out


@pytest.mark.parametrize(
    "env, message",
    [
        ({"JAXMG_CPU_LU": "own"}, "JAXMG_CPU_LU='own': cpu_lu must be one of 'auto', 'scalapack'"),
        ({"JAXMG_EIG_BAND": "wide"}, "JAXMG_EIG_BAND='wide': eig_band must be an integer"),
        ({"JAXMG_CALL_TIMEOUT": "-1"}, "JAXMG_CALL_TIMEOUT='-1': it must be a positive number"),
    ],
)
def test_a_bad_environment_is_a_clear_error_at_the_first_call(tmp_path, env, message):
    out = _run(tmp_path, **env)
    assert out["first"].startswith("ValueError: environment variable "), out
    assert message in out["first"] and "unset it" in out["first"], out
