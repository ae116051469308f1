"""The tests' hooks into the engines: configuration fields no user option sets (the calls made
inside the block carry them, like the rest of the configuration: jaxmg/_core/config.py).

    with hooks(test_fail="lu:1:3"):   # rank 1 of the 1-D LU fails at tile column 3
        jaxmg.lu_solve(a, b)

- test_fail "<algorithm>:<rank>:<step>": that rank of that jaxmg algorithm records an injected
  local failure at that step (csrc/common/deferred.h), which every rank then reports as one
  error (the fault-injection tests: tests/test_reliability.py, tests/gpu/fault_gpu.py).
- rows_per_chunk: the rows a gathering step (R, least-squares solutions) takes at a time, to
  drive several chunks through small matrices (0: by bytes).
- redistribute: the engines redistribute the matrix (p?gemr2d, cuBLASMp's Gemr2D) even on meshes
  that relabel, to exercise that path on any mesh.
"""

from __future__ import annotations

from jaxmg._core import config as _config


def hooks(**values):
    """A context manager that sets test hooks (and any configuration option) on this thread."""
    return _config._override(values, tuple(_config._FIELDS), "jaxmg._core.testing.hooks")
