"""The engine steps: one list (csrc/routines/steps.h) from which both engines' declarations are
generated. These checks hold the rest to it: every listed step has its parameters and an
instantiation in each engine, the routines call nothing else, and the CPU library holds each
step for the four element types."""

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


def _list(macro: str) -> list[str]:
    body = re.search(rf"#define {macro}\(X\)(.*?)(?:\n(?!.*\\$)|$)", STEPS_H, re.S)
    assert body, macro
    text = STEPS_H[body.start() :].split("\n")
    lines = [text[0]]
    for line in text[1:]:
        if not lines[-1].rstrip().endswith("\\"):
            break
        lines.append(line)
    return re.findall(r"X\((\w+)\)", "\n".join(lines))


TEMPLATED = _list("JAXMG_ENGINE_STEPS")
PLAIN = _list("JAXMG_ENGINE_PLAIN_STEPS")


def test_each_step_is_listed_once_with_its_parameters():
    steps = TEMPLATED + PLAIN
    assert len(TEMPLATED) >= 35 and len(PLAIN) == 4, (TEMPLATED, PLAIN)
    assert len(set(steps)) == len(steps), "a step is listed twice"
    with_params = set(re.findall(r"#define JAXMG_STEP_(\w+)\b", STEPS_H))
    assert with_params == set(steps), (
        f"parameters without a listed step: {sorted(with_params - set(steps))}; "
        f"listed steps without parameters: {sorted(set(steps) - with_params)}"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_declares_the_list_and_instantiates_each_step_once(engine):
    folder = CSRC / "engines" / engine
    header = (folder / "engine.h").read_text()
    assert "JAXMG_DECLARE_ENGINE_STEPS" in header
    sources = "\n".join(p.read_text() for p in sorted(folder.glob("*.cc")))
    instantiated = re.findall(r"JAXMG_INSTANTIATE_STEP\((\w+), T\)", sources)
    counts = {s: instantiated.count(s) for s in TEMPLATED}
    assert all(c == 1 for c in counts.values()), {s: c for s, c in counts.items() if c != 1}
    assert set(instantiated) <= set(TEMPLATED)
    # No step is also declared or instantiated by hand.
    for step in TEMPLATED + PLAIN:
        assert not re.search(rf"template Status Engine::{step}<", sources), (engine, step)
        assert not re.search(rf"\n\s*Status {step}\(", header), (engine, step)


def test_routines_call_only_listed_steps():
    called = set()
    for path in (CSRC / "routines").glob("*.h"):
        called |= set(re.findall(r"\be\.(?:template )?([A-Z]\w*)\b", path.read_text()))
    assert called, "no step calls found in csrc/routines"
    assert called <= set(TEMPLATED + PLAIN), sorted(called - set(TEMPLATED + PLAIN))


def test_the_cpu_library_holds_every_step_for_every_element_type():
    lib = native.find_library("cpu")
    if lib is None:
        pytest.skip("no CPU engine built")
    out = subprocess.run(
        ["nm", "-D", "-C", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    have = set(re.findall(r"jaxmg::scalapack::Engine::(\w+)<([^()]*?)\s*>\(", out))
    missing = [(s, t) for s in TEMPLATED for t in SCALARS if (s, t) not in have]
    assert not missing, missing
    plain = set(re.findall(r"jaxmg::scalapack::Engine::(\w+)\(", out))
    assert set(PLAIN) <= plain, sorted(set(PLAIN) - plain)
