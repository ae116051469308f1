"""The reliability scenarios of tests/test_reliability.py and tests/test_fuzz.py, run as jobs of 2
processes with `python -m jaxmg launch` (on the GPU machine: one process per GPU, the cuSOLVERMp
engine; on a CPU machine the same jobs run the ScaLAPACK engine). Each job runs under a time
limit; OUT_DIR/reliability.json gets every job's records, exit status, time and a verdict.

Usage: python tests/gpu/reliability_gpu.py OUT_DIR [FUZZ_CASES.json]
(RELIABILITY_ONLY=fault-injection: tests/gpu/fault_gpu.py's two-process cases instead.)
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

out_dir = Path(sys.argv[1])
fuzz_cases = Path(sys.argv[2]) if len(sys.argv) > 2 else None
MP = Path(__file__).resolve().parents[1] / "mp"
RESULTS: dict = {"jobs": {}}
ONLY = set(os.environ.get("RELIABILITY_ONLY", "").split())  # a subset of the jobs, by name


def want(name):
    return not ONLY or name in ONLY


def launch(name, script, args, limit, env=None):
    tmp = Path(tempfile.mkdtemp(prefix=f"jaxmg_{name}_"))
    cmd = [sys.executable, "-m", "jaxmg", "launch", "-n", "2", "--timeout", str(limit)]
    cmd += [str(MP / script), *[a.replace("{tmp}", str(tmp)) for a in args]]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    job = {
        "rc": proc.returncode,
        "seconds": round(time.monotonic() - t0, 2),
        "ended_at": time.time(),
        "stderr_tail": "\n".join(
            line for line in proc.stderr.splitlines()[-40:] if "Gloo" not in line
        )[-3000:],
    }
    recs = {}
    for f in sorted(tmp.iterdir()):
        if f.suffix == ".json":
            recs[f.name] = json.loads(f.read_text())
        elif f.suffix == ".log":
            recs[f.name] = f.read_text()[-400:]
    job["outputs"] = recs
    RESULTS["jobs"][name] = job
    print(f"[reliability] {name}: rc={job['rc']} in {job['seconds']} s", flush=True)
    return job


def verdict(name, ok, why=""):
    RESULTS["jobs"][name]["verdict"] = "pass" if ok else f"FAIL {why}"
    print(f"[reliability] {name}: {'pass' if ok else 'FAIL ' + why}", flush=True)
    json.dump(RESULTS, open(out_dir / "reliability.json", "w"), indent=1)


def both(job):
    return [job["outputs"].get(f"out.{r}.json") for r in (0, 1)]


# On GPUs the routines of different kinds may want different contexts: that is found first.
for scenario, field in (("divergent-tile", "tile"), ("divergent-routine", "routine|GPU context")):
    if not want(scenario):
        continue
    job = launch(scenario, "agreement_worker.py", [scenario, "{tmp}/out"], 240)
    r = both(job)
    ok = all(x and not x["first"]["ok"] for x in r) and all(x["then"]["ok"] for x in r)
    ok = ok and all(
        any(f"disagree on the {f}" in x["first"]["message"] for f in field.split("|")) for x in r
    )
    verdict(scenario, ok, json.dumps(r)[:600])

if want("retry"):
    job = launch("retry", "agreement_worker.py", ["retry", "{tmp}/out"], 240)
    r = both(job)
    ok = all(x and x["first"]["ok"] and x["first"]["error_max"] < 1e-12 for x in r)
    verdict("retry", ok and r[0]["bad"]["type"] == "ValueError", json.dumps(r)[:600])

for scenario in ("absent-peer", "absent-peer-warm"):
    if not want(scenario):
        continue
    job = launch(
        scenario, "agreement_worker.py", [scenario, "{tmp}/out"], 240, {"JAXMG_CALL_TIMEOUT": "5"}
    )
    r0 = both(job)[0] or {}
    first, then = r0.get("first", {}), r0.get("then", {})
    ok = not first.get("ok", True) and "JAXMG_CALL_TIMEOUT" in first.get("message", "")
    ok = ok and 4 < first.get("seconds", 0) < 60 and not then.get("ok", True)
    verdict(scenario, ok, json.dumps(r0)[:800])

if want("threads"):
    job = launch("threads", "threads_worker.py", ["{tmp}/out.json"], 240, {"ROUNDS": "50"})
    rec = job["outputs"].get("out.json") or {}
    ok = (
        bool(rec)
        and not rec["other"]
        and all(w == 0 and ok_ + e == rec["calls"] for ok_, e, w, _ in rec["per_process"])
    )
    verdict("threads", ok, json.dumps(rec)[:600])

if want("soak"):
    job = launch(
        "soak",
        "soak_worker.py",
        ["1000", "{tmp}/out"],
        400,
        {"SOAK_N": os.environ.get("SOAK_N", "256")},
    )
    ok = True
    for r in both(job):
        if not r:
            ok = False
            continue
        s, e = r["after_warmup"], r["end"]
        ok = ok and r["outcomes"] == {
            "ok": 700,
            "status>0": 100,
            "not-symmetric": 100,
            "value-error": 100,
        }
        ok = ok and e["fds"] == s["fds"] and e["threads"] == s["threads"]
        ok = ok and e["rss_kib"] - s["rss_kib"] < 16 * 1024
        ok = ok and e.get("device_bytes_in_use", 0) == s.get("device_bytes_in_use", 0)
    verdict("soak", ok, json.dumps(both(job))[:800])

if fuzz_cases is not None and want("fuzz"):
    cases = json.loads(fuzz_cases.read_text())
    job = launch("fuzz", "fuzz_worker.py", [str(fuzz_cases), "{tmp}/out"], 400)
    r = both(job)
    bad = []
    for i, case in enumerate(cases):
        outs = [x[i] for x in r if x]
        kinds = {o["outcome"] for o in outs}
        if len(outs) != 2 or len(kinds) != 1:
            bad.append((case, outs))
        elif kinds == {"solved"} and not all(
            o["status"] == 0 and o["residual"] <= o["tol"] and o["shape_ok"] for o in outs
        ):
            bad.append((case, outs))
        elif kinds == {"raised"} and outs[0]["type"] not in ("ValueError", "TypeError"):
            bad.append((case, outs))
    job["cases"] = len(cases)
    verdict("fuzz", not bad, json.dumps(bad)[:1500])

if want("kill"):
    kill_n = os.environ.get("KILL_N", "8192")
    job = launch(
        "kill",
        "kill_worker.py",
        [kill_n, "1", os.environ.get("KILL_DELAY", "1.0"), "{tmp}/out"],
        120,
    )
    logs = [job["outputs"].get(f"out.{r}.log", "") for r in (0, 1)]
    alive = []
    for log in logs:
        if log.startswith("pid"):
            pid = int(log.split()[1])
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and stat.read_text().split(") ")[-1][0] != "Z":
                alive.append(pid)
    # From the kill (the victim's second call + KILL_DELAY) to the job's end: the matrices'
    # generation before the first call is not part of it.
    lines = [line.split() for line in logs[1].splitlines() if line.startswith("call 1 ")]
    killed_at = float(lines[0][2]) + float(os.environ.get("KILL_DELAY", "1.0")) if lines else 0
    job["after_kill_s"] = round(job["ended_at"] - killed_at, 2) if lines else None
    ok = job["rc"] != 0 and bool(lines) and job["after_kill_s"] < 60 and not alive
    verdict("kill", ok, json.dumps({"logs": logs, "alive": alive, "after": job["after_kill_s"]}))

# Fault injection in the middle of each own algorithm (tests/gpu/fault_gpu.py multi: two
# processes, 1x2 and 2x1 meshes); opt-in (a few minutes): RELIABILITY_ONLY=fault-injection.
if "fault-injection" in ONLY:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("fault_gpu.py")), "multi", str(out_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    RESULTS["jobs"]["fault-injection"] = {
        "rc": proc.returncode,
        "seconds": round(time.monotonic() - t0, 2),
        "stdout_tail": proc.stdout[-3000:],
    }
    verdict("fault-injection", proc.returncode == 0, proc.stdout[-600:])

RESULTS["summary"] = {k: v.get("verdict") for k, v in RESULTS["jobs"].items()}
json.dump(RESULTS, open(out_dir / "reliability.json", "w"), indent=1)
print(json.dumps(RESULTS["summary"], indent=1))
