"""Runs generated cases of the public API (tests/test_fuzz.py draws them with hypothesis) on every
process and records each one's outcome: a solution (its scaled residual and status) or the
exception (type and message). The test checks that every process saw the same outcome, that
solutions are right and that errors are clear ones.

Usage: mpirun -n P python fuzz_worker.py CASES.json OUT_PREFIX   (writes OUT_PREFIX.<rank>.json)
"""

import json
import sys
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import DTYPES, gather, general, place, rhs, spd  # noqa: E402

cases = json.loads(Path(sys.argv[1]).read_text())
prefix = sys.argv[2]
AXES = ("pr", "pc")
SPECS = {
    "rows-cols": P("pr", "pc"),
    "cols-rows": P("pc", "pr"),
    "rows": P("pr", None),
    "cols": P(None, "pc"),
    "replicated": P(None, None),
}


def run(case):
    mesh = jax.make_mesh(tuple(case["mesh"]), AXES)
    dtype = DTYPES[case["dtype"]]
    n = case["n"]
    make = general if case["routine"] == "lu_solve" else spd
    a = make(n, dtype, case["seed"])
    b = rhs(case["b_rows"], case["nrhs"], DTYPES[case["b_dtype"]], case["seed"])
    spec = SPECS[case["spec"]]
    b_spec = P(spec[0], None) if b.ndim == 2 else P(spec[0])
    try:
        ap, bp = place(a, mesh, spec), place(b, mesh, b_spec)
    except Exception as e:  # noqa: BLE001 - JAX cannot shard it: not a jaxmg call
        return {"outcome": "unplaceable", "type": type(e).__name__}
    kwargs = dict(T_A=case["tile"], pad=case["pad"], donate=case["donate"], return_status=True)
    if case["pass_mesh"]:
        kwargs.update(mesh=mesh, matrix_specs=spec)
    if case["routine"] == "potri":  # the inverse: checked by ‖A X − I‖, a's sharding kept
        call = jax.jit(lambda a: jaxmg.potri(a, **kwargs)) if case["jit"] else None
        inv, status = call(ap) if call else jaxmg.potri(ap, **kwargs)
        # a's sharding; a matrix given replicated comes back sharded over the mesh (no gather)
        same = not n or spec == P(None, None) or inv.sharding.is_equivalent_to(ap.sharding, 2)
        x = gather(inv).astype(np.complex128)
        a64 = a.astype(np.complex128)
        resid = 0.0
        if n:
            resid = np.abs(a64 @ x - np.eye(n)).max() / (
                np.linalg.norm(a64, 2) * max(np.linalg.norm(x, 2), 1e-300)
            )
        return {
            "outcome": "solved",
            "status": int(np.asarray(status.addressable_data(0))),
            "residual": float(resid),
            "tol": 20 * n * float(np.finfo(dtype).eps),
            "shape_ok": x.shape == a.shape and same,
        }
    fn = jaxmg.potrs if case["routine"] == "potrs" else jaxmg.lu_solve
    if case["jit"]:
        x, status = jax.jit(lambda a, b: fn(a, b, **kwargs))(ap, bp)
    else:
        x, status = fn(ap, bp, **kwargs)
    x = gather(x)
    resid = 0.0
    if n and b.size:
        a64 = a.astype(np.complex128)
        x64 = np.asarray(x, np.complex128).reshape(n, -1)
        b64 = b.astype(np.complex128).reshape(n, -1)
        resid = np.linalg.norm(a64 @ x64 - b64) / (
            n * np.linalg.norm(a64, 2) * max(np.linalg.norm(x64), 1e-300)
        )
    return {
        "outcome": "solved",
        "status": int(np.asarray(status.addressable_data(0))),
        "residual": float(resid),
        "tol": 10 * float(np.finfo(dtype).eps),
        "shape_ok": x.shape == b.shape,
    }


records = []
for case in cases:
    try:
        rec = run(case)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        rec = {"outcome": "raised", "type": type(e).__name__, "message": str(e)[:1500]}
    records.append(rec)
with open(f"{prefix}.{jax.process_index()}.json", "w") as f:
    json.dump(records, f)
