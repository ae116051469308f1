"""Tests of the documentation: the site builds strictly with every internal link resolving, the
figures match the data they are drawn from, the README is a front page whose example is the
quickstart's, and every example the docs show runs (all of them in one 2-process job).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI not installed")


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


needs_mkdocs = pytest.mark.skipif(not _has("mkdocs"), reason="mkdocs not installed (docs extra)")
needs_matplotlib = pytest.mark.skipif(not _has("matplotlib"), reason="matplotlib not installed")


@needs_mkdocs
def test_site_builds_strictly_with_every_link_resolving(tmp_path):
    site = tmp_path / "site"
    out = subprocess.run(
        [str(ROOT / "scripts" / "docs.sh"), str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "every internal link and anchor resolves" in out.stdout
    for page in (
        "index",
        "install",
        "quickstart",
        "running",
        "routines/potrs",
        "routines/linalg",
        "layout",
        "performance",
        "reliability",
        "migrating",
        "cli",
        "api/jaxmg",
        "api/linalg",
        "guide",
        "memory",
        "faq",
        "glossary",
    ):
        assert (site / f"{page}.html").is_file(), page
    # The reference is generated from the docstrings, and each routine page holds its example.
    api = (site / "api" / "jaxmg.html").read_text()
    assert 'id="jaxmg.potrs"' in api and 'id="jaxmg.lu_solve"' in api
    potrs = (site / "routines" / "potrs.html").read_text()
    assert "jaxmg.potrs" in potrs and "return_logdet" in potrs and "gather" in potrs
    # Returns blocks are whole (no opening parenthesis lost), code spans hold no backticks, and
    # private base classes are not shown.
    assert "(w, V) or w, the status appended" in api
    for page in ("api/jaxmg", "api/linalg", "routines/cho_factor", "routines/lu_factor"):
        text = (site / f"{page}.html").read_text()
        assert not re.search(r"<code>[^<]*`[^<]*</code>", text), page
        assert "_Unpacks" not in text, page
    # Measured numbers are filled in from bench/results, and each page lists its files once.
    perf = (site / "performance.html").read_text()
    assert "{{" not in perf and 'id="data"' in perf and "potrs_h200x2_largest_4082e48.json" in perf
    assert perf.count("potrs_h200x2_mesh1x2_donate_015400a.json") == 1
    # Offline: no font or script is fetched from the web.
    index = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in index


def test_every_example_is_shown_and_every_snippet_exists():
    shown = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    included = set(re.findall(r'--8<-- "(\w+)\.py(?::\w+)?"', shown))
    files = {p.stem for p in EXAMPLES.glob("*.py")}
    assert files <= included, f"examples not shown on any page: {sorted(files - included)}"
    # (a page may also show one of examples/, which its own test runs)
    files |= {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert included <= files, f"pages include missing examples: {sorted(included - files)}"


def test_routine_examples_are_whole_programs():
    # A routine page shows its example whole (set-up included), so it runs as shown.
    for page in sorted((DOCS / "routines").glob("*.md")):
        for name, section in re.findall(r'--8<-- "(\w+)\.py(:\w+)?"', page.read_text()):
            assert not section, (page.name, name, section)
    for example in EXAMPLES.glob("*.py"):
        assert "jax.distributed.initialize()" in example.read_text(), example.name


def test_the_linalg_page_lists_every_public_name():
    import jaxmg.linalg

    page = (DOCS / "routines" / "linalg.md").read_text()
    table = page[page.index("| jaxmg.linalg |") :]
    missing = [n for n in jaxmg.linalg.__all__ if not re.search(rf"`{n}\b", table)]
    assert not missing, missing
    assert "square matrices only" not in page


def test_returns_blocks_and_bases_render_as_written():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import docstrings
    finally:
        sys.path.pop(0)
    doc = (
        "Solves.\n\nArgs:\n  a: x.\n\nReturns:\n  (w, V) or w: w, ascending;\n"
        "    V the vectors.\n\nRaises:\n  ValueError: no.\n"
    )
    assert docstrings.returns_block(doc) == "(w, V) or w: w, ascending;\n  V the vectors."
    assert docstrings.returns_block("No sections.") is None
    assert docstrings.public_bases(["jaxmg.routines.factor._Unpacks", "object"]) == ["object"]


def _bench_hook():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    return bench


@needs_mkdocs
def test_measured_numbers_come_from_bench_results():
    bench = _bench_hook()
    stem = "potrs_h200x2_mesh1x2_donate_015400a"
    assert bench.value(stem, "seconds", n=65536, engine="jaxmg") == "1.012 s"
    assert bench.value(stem, "seconds", n=65536, mesh="1x2", engine="jaxmg") == "1.012 s"
    text, used = bench.expand('{{ bench("' + stem + '", "seconds", n=65536, engine="jax") }}')
    assert text == "1.695 s" and used == [stem]
    text, used = bench.expand('{{ ratio("' + stem + '", n=65536) }}')
    assert text == f"{1.012 / 1.695:.2f}" and used == [stem]
    with pytest.raises(Exception, match="match"):
        bench.value(stem, "seconds", n=65536)  # two records: ambiguous
    assert "potrs_h200x2_e81b98d.json" in bench.data_section(["potrs_h200x2_e81b98d"])
    # The potrs times at N = 65536 are read from their files, never typed.
    for page in DOCS.rglob("*.md"):
        source = page.read_text()
        for typed in ("1.012 s", "1.022 s", "1.153 s", "1.143 s", "49.9 ms"):
            assert typed not in source, (page.name, typed)
    # The performance page names no commit and no result file in its text: they are listed
    # once, in its Data section (its front matter and its bench(...) calls).
    perf = (DOCS / "performance.md").read_text().split("---\n", 2)[2]
    perf = re.sub(r"\{\{.*?\}\}", "", perf, flags=re.S)
    assert not re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7}\b", perf)
    assert not re.findall(r"_[0-9a-f]{7}\.(?:json|log)", perf)
    assert "cuSOLVERMp 0.8 " not in perf


@needs_matplotlib
def test_figures_match_their_data():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "figures.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_relabeling_in_the_layout_figures_is_docs_rule():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import figures
    finally:
        sys.path.pop(0)
    # 8 tiles over 2 shards: position k holds tile (k mod 2) * 4 + k div 2.
    assert figures.relabel(8, 2) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert figures.relabel(6, 3) == [0, 2, 4, 1, 3, 5]
    # Position k of the relabeled order is owned, block-cyclically, by k mod P, and holds a
    # tile that JAX's block sharding puts on that same device: nothing moves.
    for k_tiles, parts in ((8, 2), (12, 3), (8, 4)):
        m = k_tiles // parts
        for k, tile in enumerate(figures.relabel(k_tiles, parts)):
            assert tile // m == k % parts


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for needed in (
        "./scripts/demo.sh",
        "./scripts/test.sh",
        "pip install .",
        "[cuda13]",
        "examples/readme_example.py",
        "docs/figures/routines_vs_jax.svg",
        "srun",
        "notebook",
        "./scripts/docs.sh serve",
    ):
        assert needed in readme, needed
    # Measured tables and result files live on the performance page, not here.
    assert "| routine | N |" not in readme
    assert not re.search(r"bench/results/\w+\.json", readme)
    # The README's example is the quickstart's, which the docs test runs.
    blocks = _python_blocks(readme)
    assert blocks and blocks[0] == (EXAMPLES / "quickstart.py").read_text()
    # Every relative link of the README leads to a file.
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target


RUNNER = """
import runpy
import sys
import time
import traceback

import jax

jax.distributed.initialize()
jax.distributed.initialize = lambda *args, **kwargs: None  # each example calls it once
failed = []
for path in sys.argv[1:]:
    start = time.perf_counter()
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:  # noqa: BLE001 - report every example
        failed.append(path)
        traceback.print_exc()
        print(f"EXAMPLE FAILED {path}", flush=True)
    else:
        print(f"EXAMPLE OK {path} {time.perf_counter() - start:.1f} s", flush=True)
sys.exit(1 if failed else 0)
"""


@needs_mpirun
def test_every_docs_example_runs_on_two_processes(tmp_path):
    runner = tmp_path / "run_examples.py"
    runner.write_text(textwrap.dedent(RUNNER))
    examples = sorted(EXAMPLES.glob("*.py")) + [ROOT / "examples" / "readme_example.py"]
    out = subprocess.run(
        [sys.executable, "-m", "jaxmg", "launch", "-n", "2", "--timeout", "600", str(runner)]
        + [str(p) for p in examples],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=660,
        check=False,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]
    for path in examples:
        assert log.count(f"EXAMPLE OK {path}") == 2, (path, log[-6000:])
    assert "[Gloo]" not in log  # the launcher drops JAX's connection lines
    # The quickstart's printed result (both processes print, interleaved):
    # log det A = (N - 1) log(1 - r^2) = 2047 log 0.75.
    assert out.stdout.count("-588.885202308") == 2, out.stdout[-2000:]
