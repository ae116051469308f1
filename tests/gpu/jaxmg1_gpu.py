"""JAXMg 1.4.1's test cases on GPUs: tests/jaxmg1_cases.py (the cases the CPU tests run on 1, 2
and 4 processes, tests/test_jaxmg1.py) with JAXMg's GPU sizes (tiles 64 and 96, N >= 512), on
the cuSOLVERMp engine. Run on the GPU machine, not by pytest:

  python tests/gpu/jaxmg1_gpu.py OUT_DIR [SELECT]                          # 1 process, 1 GPU
  python -m jaxmg launch -n 2 tests/gpu/jaxmg1_gpu.py OUT_DIR [SELECT]     # 1 GPU per process

Process 0 writes OUT_DIR/jaxmg1_gpu_<P>p.json: the records (one per case, "ok" and the
measurements), a summary (cases, failed) and the run's facts (jaxmg's commit from
JAXMG_COMMIT or git, devices, versions). The exit status is 1 when a case failed. SELECT runs
the cases whose name contains it. The CPU tests run this script too (on CPU, SELECT "api:"),
so it is exercised in CI.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax

if "OMPI_COMM_WORLD_SIZE" in os.environ:  # launched: one process per GPU
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import jaxmg1_cases  # noqa: E402

import jaxmg  # noqa: E402


def commit() -> str:
    if os.environ.get("JAXMG_COMMIT"):
        return os.environ["JAXMG_COMMIT"]
    try:
        root = Path(__file__).resolve().parents[2]
        return subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    out_dir = Path(sys.argv[1])
    select = sys.argv[2] if len(sys.argv) > 2 else None
    start = time.perf_counter()

    def result_of(records):
        failed = [r["case"] for r in records if not r["ok"]]
        return failed, dict(
            facts=dict(
                commit=commit(),
                processes=jax.process_count(),
                devices=[d.device_kind for d in jax.devices()],
                platform=jax.devices()[0].platform,
                jax=jax.__version__,
                jaxmg=jaxmg.__version__,
                seconds=round(time.perf_counter() - start, 1),
            ),
            summary=dict(cases=len(records), failed=failed),
            records=records,
        )

    path = out_dir / f"jaxmg1_gpu_{jax.process_count()}p.json"

    def write(records):  # after each case: a run stopped at its time limit keeps what ran
        if jax.process_index() == 0:
            out_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result_of(records)[1], indent=1, default=str))
            last = records[-1]
            print(
                f"[{'ok' if last['ok'] else 'FAIL'}] {last['case']} {last.get('seconds')} s",
                flush=True,
            )

    records = jaxmg1_cases.run_all(select, on_record=write)
    failed, result = result_of(records)
    if jax.process_index() == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"{len(records) - len(failed)}/{len(records)} cases passed; failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
