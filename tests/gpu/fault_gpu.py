"""Fault injection on the GPU engine: a local failure on one rank in the middle of each of jaxmg's
own algorithms reaches every rank as the same error, nothing hangs, and the next call works.

The hook: test_fail="<algorithm>:<rank>:<step>" (jaxmg._core.testing.hooks, read by
csrc/common/deferred.h), part of the configuration each call carries, set around each case.

Usage (on the GPU machine):
  python tests/gpu/fault_gpu.py single OUT_DIR   # 1 GPU: a 1x1 mesh, rank 0 fails
  python tests/gpu/fault_gpu.py local OUT_DIR    # 1 process, 2 GPUs: 1x2 and 2x1 meshes
  python tests/gpu/fault_gpu.py multi OUT_DIR    # 2 processes (python -m jaxmg launch -n 2)
  python tests/gpu/fault_gpu.py shared2 OUT_DIR  # 2 ranks sharing one GPU (launch --share-gpu):
                                                 # 1x2 and 2x1, each rank failing in turn
  python tests/gpu/fault_gpu.py shared4 OUT_DIR  # 4 ranks sharing one GPU: 4x1, 1x4 and 2x2,
                                                 # the last rank failing
The cases of a mode run in one process (multi: one launched job of two), under a time limit; a
hang ends it there. OUT_DIR/fault_<mode>.json gets each case's records and verdict; the exit
status is 1 when a case failed or did not finish. A case whose routine succeeds on every process
did not run the algorithm on that grid (another engine path: e.g. cuSOLVERMp's LU on a P x 1
grid) and is listed as "not on this path". (Internally: `fault_gpu.py cases MODE OUT_PREFIX`.)

Each case: the routine (n = 256, tile 32: 8 tile columns, so that step 3 is in the middle) raises
an error naming the injected failure on every process; then potrs on the same mesh, without the
hook, gives the right answer. The "buffers" hook fails a step's allocations on one rank at the
engine's k-th agreement on them (before the step's collectives).
"""

import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

N, TILE = 256, 32
# routine -> the algorithms (hook names) it runs on the GPU engine and the step injected.
CASES = {
    # "buffers": the engine's k-th agreement on a step's allocations (AgreeOnBuffers).
    "potrs": [("buffers", 0), ("buffers", 1)],
    "lu_solve": [("lu", 3), ("lu_solve", 1), ("buffers", 0)],
    "qr": [("qr", 3), ("orgqr", 3), ("buffers", 0)],
    "inv": [("inv", 3), ("inv_triangular", 3)],
    "potri": [("inv_cholesky", 3)],
    "polar": [("polar", 0), ("polar", 1), ("inv_triangular", 3)],
    "syevd": [
        ("buffers", 0),
        ("band_reduce", 3),
        ("band_eigh", 0),
        ("band_eigh", 1),
        ("band_eigh", 2),
        ("band_eigh", 3),
    ],
    "eigvalsh": [("band_reduce", 3), ("band_eigvals", 0)],
}
# s for all the cases of a mode (a hang ends there); FAULT_LIMIT: another
LIMIT = int(os.environ.get("FAULT_LIMIT", "420"))


MESHES = {
    "single": ["1x1"],
    "local": ["1x2", "2x1"],
    "multi": ["1x2", "2x1"],
    "shared2": ["1x2", "2x1"],
    "shared4": ["4x1", "1x4", "2x2"],
}
FAILING_RANKS = {"single": [0], "shared4": [3]}  # (the others: each rank in turn)
# FAULT_MESHES: some of the mode's meshes (e.g. "2x2"), into fault_<mode>-<meshes>.json;
# FAULT_CASES: a regular expression that picks cases by name (routine/algorithm:rank:step/mesh).
PICKED = [m for m in os.environ.get("FAULT_MESHES", "").split(",") if m]
PICK_CASES = os.environ.get("FAULT_CASES", "")


def processes(mode):
    """The mode's process count: shared<P> is P ranks on one GPU; multi is 2 processes."""
    return int(mode[len("shared") :]) if mode.startswith("shared") else 2 if mode == "multi" else 1


def case_names(mode):
    meshes = [m for m in MESHES[mode] if not PICKED or m in PICKED]
    ranks = FAILING_RANKS.get(mode, [0, 1])
    return [
        (routine, algorithm, rank, step, mesh)
        for mesh in meshes
        for routine, hooks in CASES.items()
        for algorithm, step in hooks
        for rank in ranks
        if re.search(PICK_CASES, f"{routine}/{algorithm}:{rank}:{step}/{mesh}")
    ]


def call(jaxmg, routine, a, b, mesh):
    if routine == "potrs":
        return jaxmg.potrs(a, b, TILE, mesh=mesh)
    if routine == "lu_solve":
        return jaxmg.lu_solve(a, b, TILE, mesh=mesh)
    if routine == "eigvalsh":
        return jaxmg.syevd(a, TILE, mesh=mesh, return_eigenvectors=False)
    return getattr(jaxmg, routine)(a, TILE, mesh=mesh)  # qr, inv, potri, polar, syevd


def run_cases(mode, prefix):
    """Every case of the mode in this process; writes PREFIX.<proc>.json after each case."""
    import jax

    if processes(mode) > 1:
        jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import jaxmg
    from jaxmg._core.testing import hooks

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from linalg_cases import A_SPEC, B_SPEC, gather, place, rhs, spd

    if mode != "single":  # the two-stage eigensolver is opt-in on several GPUs
        jaxmg.config.update("gpu_eigh", "two-stage")
        jaxmg.config.update("gpu_eigvals", "two-stage")
    a = spd(N, np.float64, 3)
    b = rhs(N, 2, np.float64, 3)
    x_ref = np.linalg.solve(a, b)
    records = {}
    for routine, algorithm, rank, step, mesh_shape in case_names(mode):
        rows, cols = (int(x) for x in mesh_shape.split("x"))
        mesh = jax.make_mesh((rows, cols), ("pr", "pc"), devices=jax.devices()[: rows * cols])
        ap, bp = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
        hook = f"{algorithm}:{rank}:{step}"
        rec = {"hook": hook}
        t0 = time.monotonic()
        try:
            with hooks(test_fail=hook):
                jax.block_until_ready(call(jaxmg, routine, ap, bp, mesh))
            rec["first"] = {"ok": True}
        except Exception as e:  # noqa: BLE001 (the error is the record)
            rec["first"] = {"ok": False, "type": type(e).__name__, "message": str(e)[:4000]}
        rec["first"]["seconds"] = round(time.monotonic() - t0, 3)
        try:
            err = float(np.abs(gather(jaxmg.potrs(ap, bp, TILE, mesh=mesh)) - x_ref).max())
            rec["then"] = {"ok": err < 1e-8, "max_error": err}
        except Exception:  # noqa: BLE001
            rec["then"] = {"ok": False, "message": traceback.format_exc()[-1500:]}
        records[f"{routine}/{hook}/{mesh_shape}"] = rec
        Path(f"{prefix}.{jax.process_index()}.json").write_text(json.dumps(records))


def agreed_part(message):
    """The engine's error in a raised message: from the injected failure to the agreement's note."""
    start = message.find("jaxmg: injected failure")
    end = message.find("every rank stopped with this error]", start)
    return (
        message[start:]
        if end < 0
        else message[start : end + len("every rank stopped with this error]")]
    )


def drive(mode, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = processes(mode)
    out_name = f"fault_{mode}" + ("-" + "-".join(PICKED) if PICKED else "")
    prefix = out_dir / f"{out_name}_records"
    cmd = [sys.executable, __file__, "cases", mode, str(prefix)]
    if procs > 1:
        launch = ["launch", "-n", str(procs), "--timeout", str(LIMIT)]
        launch += ["--share-gpu"] if mode.startswith("shared") else []
        cmd = [sys.executable, "-m", "jaxmg", *launch, __file__, "cases", mode, str(prefix)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT + 30, check=False)
        rc, tail = proc.returncode, proc.stderr[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, tail = "timeout", (e.stderr or b"")[-3000:].decode(errors="replace")
    seconds = round(time.monotonic() - t0, 1)
    recs = []
    for p in range(procs):
        f = Path(f"{prefix}.{p}.json")
        recs.append(json.loads(f.read_text()) if f.exists() else {})
    results, failed, absent = {}, 0, 0
    for routine, algorithm, rank, step, mesh in case_names(mode):
        name = f"{routine}/{algorithm}:{rank}:{step}/{mesh}"
        got = [r.get(name) for r in recs]
        marker = f"test_fail={algorithm}:{rank}:{step}"
        done = all(g is not None for g in got)
        ok = done and all(not g["first"]["ok"] and marker in g["first"]["message"] for g in got)
        # the same error on every process (the agreed message, without what JAX wraps around it)
        ok = ok and len({agreed_part(g["first"]["message"]) for g in got}) == 1
        ok = ok and all(g["then"]["ok"] for g in got)
        # Every process succeeded: this grid does not run the algorithm (the routine took
        # another engine path); recorded, not a failure.
        off_path = done and all(g["first"]["ok"] and g["then"]["ok"] for g in got)
        verdict = "pass" if ok else ("not on this path" if off_path else "FAIL")
        if not done:
            verdict = "FAIL (did not finish: a hang or an earlier crash)"
        failed += verdict.startswith("FAIL")
        absent += off_path
        results[name] = {"verdict": verdict, "records": got}
        print(f"[fault] {name}: {verdict}", flush=True)
    summary = {"mode": mode, "rc": rc, "seconds": seconds, "cases": len(results)}
    summary.update(failed=failed, not_on_path=absent, stderr_tail="" if not failed else tail)
    out = {"summary": summary, "cases": results}
    (out_dir / f"{out_name}.json").write_text(json.dumps(out, indent=1))
    print(f"[fault] {mode}: {json.dumps(summary)[:600]}", flush=True)
    return 1 if failed or rc != 0 else 0


if __name__ == "__main__":
    if sys.argv[1] == "cases":
        run_cases(sys.argv[2], sys.argv[3])
    else:
        sys.exit(drive(sys.argv[1], Path(sys.argv[2])))
