"""The routines' FFI targets: one list (csrc/routines/targets.h) that the engines' libraries
register and export, and that the Python side reads (jaxmg/_core/native.py)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess

import pytest

import jaxmg.routines
from jaxmg._core import native
from jaxmg._core import routine as _routine

FAMILIES = {"solve", "eigen", "svd", "polar", "product"}


def _exported(path) -> set[str]:
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True
    )
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def cpu_routines() -> dict[str, str]:
    if native.find_library("cpu") is None:
        pytest.skip("no CPU engine built")
    return native.routines("cpu")


def test_the_list_names_each_routine_once_with_a_family(cpu_routines):
    assert len(cpu_routines) >= 28
    assert set(cpu_routines.values()) <= FAMILIES
    assert set(cpu_routines.values()) == FAMILIES  # every family has a routine


def test_the_cpu_library_exports_exactly_the_listed_targets(cpu_routines):
    symbols = _exported(native.find_library("cpu"))
    targets = {s for s in symbols if s.startswith("jaxmg_scalapack_")}
    assert targets == {native.target("cpu", r) for r in cpu_routines}


def _routines_of(module) -> list[_routine.EngineRoutine]:
    """The EngineRoutines a module holds (also in dicts, lists and tuples)."""
    found = []
    for v in vars(module).values():
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list | tuple) else (v,)
        found += [x for x in items if isinstance(x, _routine.EngineRoutine)]
    return found


def _declared(module) -> set[str]:
    """Names of the EngineRoutines a module holds."""
    return {x.name for x in _routines_of(module)}


def _all_declared() -> list[_routine.EngineRoutine]:
    import jaxmg.linalg
    from jaxmg._core import product

    found = _routines_of(product) + _routines_of(jaxmg.linalg)
    for info in pkgutil.iter_modules(jaxmg.routines.__path__):
        found += _routines_of(importlib.import_module(f"jaxmg.routines.{info.name}"))
    return found


def test_python_declares_each_routine_with_the_native_traits(cpu_routines):
    """Every EngineRoutine the package declares has the traits the native routine declares
    (csrc/routines/contract.h RoutineTraits, exported with the list)."""
    native_traits = native.routine_traits("cpu")
    assert set(native_traits) == set(cpu_routines)
    for r in _all_declared():
        t = native_traits[r.name]
        ours = {
            "reads_factor": r.reads_factor,
            "rectangular": r.rectangular,
            "own_solution": r.solution_cols is not None and not r.rectangular,
            "second_matrix": r.second_matrix,
        }
        theirs = dict(t, own_solution=t["own_solution"] and not t["rectangular"])
        assert ours == theirs, r.name


def test_every_routine_module_calls_a_listed_target(cpu_routines):
    """Python's view: each EngineRoutine the package declares has a target in the library."""
    from jaxmg._core import product

    declared = _declared(product)
    for info in pkgutil.iter_modules(jaxmg.routines.__path__):
        declared |= _declared(importlib.import_module(f"jaxmg.routines.{info.name}"))
    assert len(declared) >= 20, sorted(declared)
    missing = declared - set(cpu_routines)
    assert not missing, f"routines without a target in the library: {sorted(missing)}"
