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
    """The jaxmg modules `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from jaxmg.routines import potri` names a module; `from jaxmg.x import f` a name.
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def test_no_import_cycles():
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    # A package's __init__ re-exports its modules; an edge into a package is not an edge into
    # each of its modules, and __init__ files are left out as importers.
    graph = {
        m: {d for d in _imports(p, modules) if d != m and files[d].name != "__init__.py"}
        for m, p in files.items()
        if p.name != "__init__.py"
    }
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
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
