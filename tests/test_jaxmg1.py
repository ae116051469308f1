"""JAXMg 1.4.1 code runs unchanged on jaxmg: its test cases, public-API checks and examples,
re-expressed in tests/jaxmg1_cases.py, on 1 and 2 real CPU processes (one worker process
runs every case: tests/mp/jaxmg1_worker.py), and device_supports_vmm on a machine without a
CUDA driver."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from mpirun import mpirun_available, run_cases

WORKER = Path(__file__).parent / "mp" / "jaxmg1_worker.py"


@pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")
@pytest.mark.parametrize("procs", [1, 2])
def test_jaxmg1_cases(tmp_path, procs):
    import jaxmg1_cases

    out = run_cases(procs, WORKER, [], tmp_path, 900)
    records = out["records"]
    assert [r["case"] for r in records] == [name for name, _ in jaxmg1_cases.CASES]
    failed = [r for r in records if not r["ok"]]
    assert not failed, failed


# On four processes (2 x 2 and 4 x 1 grids), the cases of the context forms and JAXMg's context
# examples, which place their outputs for the caller's mesh (the whole worker: 91 cases in 77 s).
FOUR_PROCESS_CASES = "context|ctx"


@pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")
def test_jaxmg1_context_cases_on_four_processes(tmp_path):
    import jaxmg1_cases

    out = run_cases(4, WORKER, [FOUR_PROCESS_CASES], tmp_path, 900)
    records = out["records"]
    parts = FOUR_PROCESS_CASES.split("|")
    expected = [name for name, _ in jaxmg1_cases.CASES if any(p in name for p in parts)]
    assert [r["case"] for r in records] == expected and len(expected) >= 20
    failed = [r for r in records if not r["ok"]]
    assert not failed, failed


def _has_cuda_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_has_cuda_driver(), reason="a CUDA driver is present")
def test_device_supports_vmm_without_a_driver():
    import jaxmg

    with pytest.raises(RuntimeError, match="libcuda"):
        jaxmg.device_supports_vmm()
    with pytest.raises(RuntimeError, match="libcuda"):
        jaxmg.device_supports_vmm(device=1)


def test_device_supports_vmm_takes_an_ordinal():
    import jaxmg

    for bad in ("0", 1.0, True, None):
        with pytest.raises(TypeError, match="device"):
            jaxmg.device_supports_vmm(bad)


def test_device_supports_vmm_with_a_fake_driver(monkeypatch):
    """The driver calls and their error paths, through a stand-in of libcuda."""
    from jaxmg import device as _device

    class Driver:
        def __init__(self, init=0, get=0, attr=0, value=1):
            self.codes, self.value, self.asked = (init, get, attr), value, []

        def cuInit(self, flags):  # noqa: N802 - the driver's name
            return self.codes[0]

        def cuDeviceGet(self, out, ordinal):  # noqa: N802
            self.asked.append(ordinal)
            out._obj.value = ordinal
            return self.codes[1]

        def cuDeviceGetAttribute(self, out, attribute, handle):  # noqa: N802
            self.asked.append(attribute)
            out._obj.value = self.value
            return self.codes[2]

    for value in (0, 1):
        driver = Driver(value=value)
        monkeypatch.setattr(_device, "_libcuda", driver)
        assert _device.device_supports_vmm(3) is bool(value)
        assert driver.asked == [3, 102]  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    for codes, message in (
        ((100, 0, 0), "cuInit"),
        ((0, 101, 0), "cuDeviceGet"),
        ((0, 0, 1), "cuDeviceGetAttribute"),
    ):
        monkeypatch.setattr(_device, "_libcuda", Driver(*codes))
        with pytest.raises(RuntimeError, match=message):
            _device.device_supports_vmm()


def test_gpu_runner_on_cpu(tmp_path):
    """tests/gpu/jaxmg1_gpu.py (the same cases on GPUs) runs here too, on its API cases."""
    import json
    import sys

    from mpirun import run_killable

    script = Path(__file__).parent / "gpu" / "jaxmg1_gpu.py"
    proc = run_killable([sys.executable, str(script), str(tmp_path), "api:"], 300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "jaxmg1_gpu_1p.json").read_text())
    assert result["summary"]["failed"] == [] and result["summary"]["cases"] >= 4
    assert result["facts"]["platform"] == "cpu"
