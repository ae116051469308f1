"""The engine steps: the contract is csrc/routines/steps.h (EngineSteps, plain declarations), and
each engine's engine.cc asserts at compile time that its steps have the contract's types
(StepsMatch). These checks cover what the compiler does not: every step of the contract has its
assertion, the engines declare the steps in the contract's order, the routines call nothing else,
and the CPU library holds every step for the four element types."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from jaxmg._core import native

CSRC = Path(__file__).resolve().parents[1] / "csrc"
STEPS_H = (CSRC / "routines" / "steps.h").read_text()
ENGINES = ("scalapack", "cusolvermp")
SCALARS = ("float", "double", "std::complex<float>", "std::complex<double>")
DECLARATION = re.compile(r"^ *(template <typename T>\n *)?Status (\w+)\(", re.M)


def _class_body(text: str, head: str) -> str:
    start = text.index(head)
    return text[start : text.index("\n};", start)]


CONTRACT = DECLARATION.findall(_class_body(STEPS_H, "class EngineSteps {"))
STEPS = [name for _, name in CONTRACT]
TEMPLATED = [name for template, name in CONTRACT if template]
PLAIN = [name for template, name in CONTRACT if not template]


def test_each_step_is_declared_once_and_asserted():
    assert len(TEMPLATED) >= 37 and len(PLAIN) == 2, (TEMPLATED, PLAIN)
    assert len(set(STEPS)) == len(STEPS), "a step is declared twice"
    asserted = re.findall(r"static_assert\(\s*kSame<decltype\(&E::(?:template )?(\w+)", STEPS_H)
    assert asserted == ["plan", "asymmetric", *STEPS], "StepsMatchFor and EngineSteps differ"


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_declares_the_steps_in_the_contracts_order(engine):
    folder = CSRC / "engines" / engine
    header = _class_body((folder / "engine.h").read_text(), "class Engine {")
    declared = [name for _, name in DECLARATION.findall(header) if name in STEPS]
    assert declared == STEPS
    assert "static_assert(StepsMatch<Engine>());" in (folder / "engine.cc").read_text()


def test_routines_call_only_listed_steps():
    called = set()
    for path in (CSRC / "routines").glob("*.h"):
        called |= set(re.findall(r"\be\.(?:template )?([A-Z]\w*)\b", path.read_text()))
    assert called, "no step calls found in csrc/routines"
    assert called <= set(STEPS), sorted(called - set(STEPS))


def _nm(*args: str) -> str:
    lib = native.find_library("cpu")
    if lib is None:
        pytest.skip("no CPU engine built")
    return subprocess.run(
        ["nm", "-D", "-C", *args, str(lib)], capture_output=True, text=True, check=True
    ).stdout


def test_the_cpu_library_holds_every_step_for_every_element_type():
    out = _nm("--defined-only")
    have = set(re.findall(r"jaxmg::scalapack::Engine::(\w+)<([^()]*?)\s*>\(", out))
    missing = [(s, t) for s in TEMPLATED for t in SCALARS if (s, t) not in have]
    assert not missing, missing
    plain = set(re.findall(r"jaxmg::scalapack::Engine::(\w+)\(", out))
    assert set(PLAIN) <= plain, sorted(set(PLAIN) - plain)


def test_the_cpu_library_needs_nothing_of_jaxmg_from_outside():
    """An explicit instantiation left out is an undefined symbol of the library."""
    undefined = [line for line in _nm("--undefined-only").splitlines() if "jaxmg::" in line]
    assert not undefined, undefined
