"""jaxmg's modules import each other without cycles, counting the imports inside functions (a
lazy import that hides a cycle is a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jaxmg"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The jaxmg modules `path` imports, anywhere in the file (at the top, inside functions,
    under conditions), relative imports resolved."""
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # `from . import x`, `from ..y import z`
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            if not module:
                continue
            # `from jaxmg.routines import potri` names a module; `from jaxmg.x import f` a name.
            names = [f"{module}.{a.name}" for a in node.names] + [module]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def _graph() -> dict[str, set[str]]:
    """Each jaxmg module (not a package's __init__) and the jaxmg modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    # A package's __init__ re-exports its modules; an edge into a package is not an edge into
    # each of its modules, and __init__ files are left out as importers.
    return {
        m: {d for d in _imports(p, modules) if d != m and files[d].name != "__init__.py"}
        for m, p in files.items()
        if p.name != "__init__.py"
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of `graph` meets, each as the path that closes it."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(path[path.index(d) :] + [d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_the_walk_sees_every_kind_of_import():
    """The graph holds top-level imports and imports inside functions (gesvd's of qr), the
    core (the rules, the routine factory) does not import the routines; the walk finds a cycle
    it is given."""
    graph = _graph()
    assert "jaxmg._core.routine" in graph["jaxmg.routines.potrs"]
    assert "jaxmg.routines.qr" in graph["jaxmg.routines.gesvd"]  # inside a function
    assert "jaxmg._core.factory" in graph["jaxmg.routines.syevd"]
    for core in ("jaxmg._core.rules", "jaxmg._core.factory"):
        assert not any(d.startswith("jaxmg.routines") for d in graph[core])
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


CSRC = PACKAGE.parent / "csrc"
# The C++ layers from the bottom: a layer includes its own headers and those of the layers before
# it, never one after it. The FFI layer (csrc/ffi/) is the top: it alone sees XLA's headers.
LAYERS = ["common", "layout", "cuda", "algorithms", "routines", "engines", "ffi"]


def test_cpp_dependencies_point_down():
    """No C++ or CUDA file includes a layer above its own (engines and routines see the contract,
    routines/contract.h, and never csrc/ffi/ or XLA's headers), and no file over 1,000 lines."""
    import re

    include = re.compile(r'^#include "([a-z_]+)/', re.M)
    wrong, long_files = [], []
    for path in sorted(CSRC.rglob("*")):
        if path.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        layer = path.relative_to(CSRC).parts[0]
        text = path.read_text()
        if text.count("\n") > 1000:
            long_files.append(str(path.relative_to(CSRC)))
        for name in include.findall(text):
            if name == "xla" and layer != "ffi":
                wrong.append(f"{path.relative_to(CSRC)} includes xla/")
            elif name in LAYERS and LAYERS.index(name) > LAYERS.index(layer):
                wrong.append(f"{path.relative_to(CSRC)} includes {name}/")
    assert not wrong, wrong
    assert not long_files, long_files


def test_no_locals_in_the_library():
    """Every function passes its arguments by name: `locals()` (which hands over whatever is
    bound at that point, and made a routine `del` the arguments it only accepts) appears
    nowhere in the package."""
    calls = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("locals", "vars")
        and not node.args
    ]
    assert calls == [], f"locals()/vars() in the library: {calls}"
