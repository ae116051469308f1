"""Runs every case of tests/jaxmg1_cases.py (JAXMg 1.4.1's test cases and examples,
re-expressed) in one process of a multi-process CPU job; process 0 writes the records.

Usage: mpirun -n P python jaxmg1_worker.py [SELECT] OUT.json
"""

import json
import sys
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import jaxmg1_cases  # noqa: E402

select = sys.argv[1] if len(sys.argv) > 2 else None
out_path = sys.argv[-1]
records = jaxmg1_cases.run_all(select)
if jax.process_index() == 0:
    Path(out_path).write_text(json.dumps(dict(records=records), indent=1, default=str))
