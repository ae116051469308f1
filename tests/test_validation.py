"""Bad input raises a clear ValueError/TypeError before any engine work (no process launched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg

MESH = jax.make_mesh((1, 1), ("pr", "pc"))


def spd(n, dtype=np.float64):
    return (np.eye(n) * 2).astype(dtype)


@pytest.mark.parametrize(
    "a, b, kwargs, error, message",
    [
        (np.ones((4, 3)), np.ones(4), {}, ValueError, "square"),
        (spd(4), np.ones(5), {}, ValueError, "shape (4,) or (4, K)"),
        (spd(4), np.ones((4, 2, 1)), {}, ValueError, "shape (4,) or (4, K)"),
        (spd(4, np.int32), np.ones(4, np.int32), {}, TypeError, "float32, float64"),
        (spd(4, np.float16), np.ones(4, np.float16), {}, TypeError, "float16"),
        (spd(4), np.ones(4, np.float32), {}, TypeError, "b.astype(a.dtype)"),
        (spd(4), np.ones(4), {"T_A": 0}, ValueError, "positive integer"),
        (spd(4), np.ones(4), {"T_A": 2.5}, ValueError, "positive integer"),
        (spd(4), np.ones(4), {"T_A": True}, ValueError, "positive integer"),
        (spd(6), np.ones(6), {"T_A": 4, "pad": False}, ValueError, "pad=True"),
        (spd(4), np.ones(4), {"matrix_specs": P("x", None)}, ValueError, "'x'"),
        (spd(4), np.ones(4), {"matrix_specs": P("pr", "pr")}, ValueError, "both sharded"),
        (spd(4), np.ones(4), {"matrix_specs": "pr"}, TypeError, "PartitionSpec"),
        (spd(4), np.ones(4), {"mesh": "mesh"}, TypeError, "jax.sharding.Mesh"),
        (
            spd(4),
            np.ones(4),
            {"matrix_specs": P("pr"), "in_specs": (P("pr"), P())},
            ValueError,
            "not both",
        ),
    ],
)
def test_bad_input_message(a, b, kwargs, error, message):
    kwargs.setdefault("mesh", MESH)
    with pytest.raises(error) as info:
        jaxmg.potrs(a, b, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "form, kwargs",
    [
        ("potrs_blocks", {"return_logdet": 1}),
        ("lu_solve_blocks", {"return_status": "yes"}),
        ("syevd_blocks", {"return_eigenvectors": None}),
    ],
)
def test_blocks_forms_reject_flags_that_are_not_bools(form, kwargs):
    """The per-block forms check their flags as the public functions do, before any work."""
    a = np.eye(4)
    args = (a,) if form == "syevd_blocks" else (a, np.ones(4))
    with pytest.raises(TypeError, match=f"{next(iter(kwargs))} must be a Python bool"):
        getattr(jaxmg, form)(*args, mesh=MESH, **kwargs)


def test_no_mesh_anywhere():
    with pytest.raises(ValueError, match="jax.set_mesh"):
        jaxmg.potrs(spd(4), np.ones(4))


SCRIPT = textwrap.dedent(
    """
    import json, jax, numpy as np
    from jax.sharding import PartitionSpec as P
    import jaxmg
    out = {}
    def probe(name, fn):
        try:
            fn(); out[name] = "no error"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    m22 = jax.make_mesh((2, 2), ("pr", "pc"))
    m4 = jax.make_mesh((4,), ("x",))
    m3d = jax.make_mesh((2, 2, 1), ("a", "b", "c"))
    a6, b6 = np.eye(6), np.ones(6)
    probe("indivisible", lambda: jaxmg.potrs(a6, b6, mesh=m4))
    probe("unused_axis", lambda: jaxmg.potrs(np.eye(4), np.ones(4), mesh=m3d,
                                            matrix_specs=P("a", None)))
    probe("several_devices", lambda: jaxmg.potrs(np.eye(4), np.ones(4), mesh=m22))
    from jax.sharding import NamedSharding
    a22 = jax.device_put(np.eye(4), NamedSharding(m22, P("pr", "pc")))
    b4 = np.ones(4, a22.dtype)
    probe("spec_disagrees", lambda: jaxmg.lu_solve(a22, b4, matrix_specs=P("pc", "pr")))
    # The GPU bootstrap's device order: from the concrete mesh, and rebuilt for an abstract one.
    import dataclasses
    from jaxmg._core import gpu as _gpu
    from jaxmg._core import placement as _placement
    for name, mesh, spec in (("grid22", m22, P("pr", "pc")), ("grid22t", m22, P("pc", "pr")),
                             ("grid4", m4, P(None, "x"))):
        placement = _placement.resolve_placement(np.eye(4), mesh, spec)
        concrete = [d.id for d in _gpu._device_grid(placement).flat]
        abstract = dataclasses.replace(placement, mesh=mesh.abstract_mesh, device_ids=None)
        out[name] = [concrete, [d.id for d in _gpu._device_grid(abstract).flat],
                     list(placement.device_ids)]
    print(json.dumps(out))
    """
)


def test_mesh_errors_with_several_devices(tmp_path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["indivisible"].startswith("ValueError") and "not divisible" in out["indivisible"]
    assert out["unused_axis"].startswith("ValueError") and "'b'" in out["unused_axis"]
    assert out["several_devices"].startswith("ValueError")
    assert "one device per process" in out["several_devices"]
    # A matrix_specs that disagrees with a's real sharding is refused (it would move the matrix).
    assert out["spec_disagrees"].startswith("ValueError") and "disagrees" in out["spec_disagrees"]
    for name in ("grid22", "grid22t", "grid4"):
        concrete, rebuilt, placed = out[name]
        assert concrete == rebuilt == placed, (name, out[name])
    assert out["grid22"][0] != out["grid22t"][0]  # the spec decides which axis is rows
