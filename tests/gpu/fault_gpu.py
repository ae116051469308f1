"""Fault injection on the GPU engine: a local failure on one rank in the middle of each of jaxmg's
own algorithms reaches every rank as the same error, nothing hangs, and the next call works.

The hook: JAXMG_TEST_FAIL="<algorithm>:<rank>:<step>" (csrc/common/deferred.h), read once per
process, so every case is a process (or a launched job) of its own, under a time limit.

Usage (on the GPU machine):
  python tests/gpu/fault_gpu.py single OUT_DIR   # 1 GPU: a 1x1 mesh, rank 0 fails
  python tests/gpu/fault_gpu.py local OUT_DIR    # 1 process, 2 GPUs: 1x2 and 2x1 meshes
  python tests/gpu/fault_gpu.py multi OUT_DIR    # 2 processes (python -m jaxmg launch -n 2)
OUT_DIR/fault_<mode>.json gets each case's records and verdict; the exit status is 1 when a case
failed. (Internally: `fault_gpu.py case MODE ROUTINE MESH OUT_PREFIX` runs one case.)

Each case: the routine (n = 256, tile 32: 8 tile columns, so that step 3 is in the middle) raises
an error naming the injected failure on every process, within the time limit; then potrs (which
none of the injected algorithms is part of) on the same mesh gives the right answer.
"""

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

N, TILE = 256, 32
# routine -> the algorithms (hook names) it runs on the GPU engine and the step injected.
CASES = {
    "lu_solve": [("lu", 3), ("lu_solve", 1)],
    "qr": [("qr", 3), ("orgqr", 3)],
    "inv": [("inv", 3), ("inv_triangular", 3)],
    "potri": [("inv_cholesky", 3)],
    "polar": [("polar", 0), ("polar", 1), ("inv_triangular", 3)],
    "syevd": [
        ("band_reduce", 3),
        ("band_eigh", 0),
        ("band_eigh", 1),
        ("band_eigh", 2),
        ("band_eigh", 3),
    ],
    "eigvalsh": [("band_reduce", 3), ("band_eigvals", 0)],
}
LIMIT = 180  # s per case (a hang ends there)


def run_case(mode, routine, mesh_shape, prefix):
    """One case in this process (JAXMG_TEST_FAIL set by the driver); writes PREFIX.<proc>.json."""
    import jax

    if mode == "multi":
        jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import jaxmg

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from linalg_cases import A_SPEC, B_SPEC, gather, place, rhs, spd

    rows, cols = (int(x) for x in mesh_shape.split("x"))
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    a = spd(N, np.float64, 3)
    b = rhs(N, 2, np.float64, 3)
    ap, bp = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
    calls = {
        "lu_solve": lambda: jaxmg.lu_solve(ap, bp, TILE, mesh=mesh),
        "qr": lambda: jaxmg.qr(ap, TILE, mesh=mesh),
        "inv": lambda: jaxmg.inv(ap, TILE, mesh=mesh),
        "potri": lambda: jaxmg.potri(ap, TILE, mesh=mesh),
        "polar": lambda: jaxmg.polar(ap, TILE, mesh=mesh),
        "syevd": lambda: jaxmg.syevd(ap, TILE, mesh=mesh),
        "eigvalsh": lambda: jaxmg.syevd(ap, TILE, mesh=mesh, return_eigenvectors=False),
    }
    rec = {"routine": routine, "mesh": mesh_shape, "hook": os.environ.get("JAXMG_TEST_FAIL")}
    t0 = time.monotonic()
    try:
        out = calls[routine]()
        jax.block_until_ready(out)
        rec["first"] = {"ok": True}
    except Exception as e:  # noqa: BLE001 (the error is the record)
        rec["first"] = {"ok": False, "type": type(e).__name__, "message": str(e)[-1500:]}
    rec["first"]["seconds"] = round(time.monotonic() - t0, 3)
    try:
        x = gather(jaxmg.potrs(ap, bp, TILE, mesh=mesh))
        err = float(np.abs(x - np.linalg.solve(a, b)).max())
        rec["then"] = {"ok": err < 1e-8, "max_error": err}
    except Exception:  # noqa: BLE001
        rec["then"] = {"ok": False, "message": traceback.format_exc()[-1500:]}
    Path(f"{prefix}.{jax.process_index()}.json").write_text(json.dumps(rec))


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
    meshes = {"single": ["1x1"], "local": ["1x2", "2x1"], "multi": ["1x2", "2x1"]}[mode]
    procs = 2 if mode == "multi" else 1
    ranks = [0] if mode == "single" else [0, 1]
    results, failed = {}, 0
    env_base = dict(os.environ)
    if mode != "single":  # the two-stage eigensolver is opt-in on several GPUs
        env_base.update(JAXMG_GPU_EIGH="two-stage", JAXMG_GPU_EIGVALS="two-stage")
    for mesh in meshes:
        for routine, hooks in CASES.items():
            for algorithm, step in hooks:
                for rank in ranks:
                    name = f"{routine}/{algorithm}:{rank}:{step}/{mesh}"
                    prefix = out_dir / name.replace("/", "_").replace(":", "-")
                    cmd = [sys.executable, __file__, "case", mode, routine, mesh, str(prefix)]
                    if mode == "multi":
                        cmd = [
                            sys.executable,
                            "-m",
                            "jaxmg",
                            "launch",
                            "-n",
                            "2",
                            "--timeout",
                            str(LIMIT),
                            *cmd[1:],
                        ]
                    env = {**env_base, "JAXMG_TEST_FAIL": f"{algorithm}:{rank}:{step}"}
                    t0 = time.monotonic()
                    try:
                        proc = subprocess.run(
                            cmd,
                            capture_output=True,
                            text=True,
                            env=env,
                            timeout=LIMIT + 30,
                            check=False,
                        )
                        rc, tail = proc.returncode, proc.stderr[-2000:]
                    except subprocess.TimeoutExpired:
                        rc, tail = "timeout", ""
                    recs = []
                    for p in range(procs):
                        f = Path(f"{prefix}.{p}.json")
                        recs.append(json.loads(f.read_text()) if f.exists() else None)
                    marker = f"JAXMG_TEST_FAIL={algorithm}:{rank}:{step}"
                    ok = rc == 0 and all(r is not None for r in recs)
                    ok = ok and all(
                        not r["first"]["ok"] and marker in r["first"]["message"] for r in recs
                    )
                    # the same error on every process (the agreed message, without what JAX
                    # wraps around it)
                    ok = ok and len({agreed_part(r["first"]["message"]) for r in recs}) == 1
                    ok = ok and all(r["then"]["ok"] for r in recs)
                    failed += not ok
                    results[name] = {
                        "verdict": "pass" if ok else "FAIL",
                        "rc": rc,
                        "seconds": round(time.monotonic() - t0, 2),
                        "records": recs,
                        "stderr_tail": "" if ok else tail,
                    }
                    print(f"[fault] {name}: {results[name]['verdict']}", flush=True)
                    (out_dir / f"fault_{mode}.json").write_text(json.dumps(results, indent=1))
    print(f"[fault] {mode}: {len(results) - failed} of {len(results)} cases pass", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "case":
        run_case(*sys.argv[2:6])
    else:
        sys.exit(drive(sys.argv[1], Path(sys.argv[2])))
