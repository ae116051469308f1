"""An MkDocs hook: measured numbers come from bench/results, not from the pages' text.

A page writes `{{ bench("FILE", "seconds", n=65536, engine="jaxmg") }}`: the record of
bench/results/FILE.json whose fields match the keywords (exactly one, or the build fails), its
field formatted. `mesh="1x2"` matches the record's mesh [1, 2]. Options: `fmt` (a format
spec, default ".3f" for seconds, else "g"), `unit` (default " s" for seconds, " ms" with
`scale=1000`), `scale` (a factor applied first). `{{ ratio("FILE", n=65536) }}` is jaxmg's time
over JAX's in that file (the one jaxmg and the one JAX record that match the keywords), to two
decimals.

Each page that cites results ends with a "Data" section listing the files once: those its
`bench(...)` calls read, and those its front matter names under `data:` (numbers the text
gives from files that are not read here).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
CALL = re.compile(r"\{\{\s*((?:bench|ratio)\(.*?\))\s*\}\}", re.S)
OPTIONS = ("fmt", "unit", "scale")


def load(stem: str) -> dict:
    path = RESULTS / f"{stem}.json"
    if not path.is_file():
        raise PluginError(f"bench: no file bench/results/{stem}.json")
    return json.loads(path.read_text())


def _matches(record: dict, key: str, want) -> bool:
    have = record.get(key)
    if key == "mesh" and isinstance(want, str):
        return have is not None and "x".join(map(str, have)) == want
    return have == want


def value(stem: str, field: str, **keys) -> str:
    """The formatted `field` of the one record of `stem` that matches `keys`."""
    options = {k: keys.pop(k) for k in OPTIONS if k in keys}
    record = _record(stem, **keys)
    if field not in record:
        raise PluginError(f"bench: the record of {stem} matching {keys} has no {field!r}")
    x = record[field] * options.get("scale", 1)
    seconds = field == "seconds" or field.endswith(("_s", "_seconds"))
    fmt = options.get("fmt", ".3f" if seconds else "g")
    unit = options.get("unit", (" ms" if options.get("scale") == 1000 else " s") if seconds else "")
    return f"{x:{fmt}}{unit}"


def _record(stem: str, **keys) -> dict:
    records = [r for r in load(stem)["records"] if all(_matches(r, k, v) for k, v in keys.items())]
    if len(records) != 1:
        raise PluginError(f"bench: {len(records)} records of {stem} match {keys} (need one)")
    return records[0]


def ratio(stem: str, **keys) -> str:
    """jaxmg's time over JAX's: the seconds of the one record of each engine matching `keys`."""
    jaxmg = _record(stem, engine="jaxmg", **keys)["seconds"]
    return f"{jaxmg / _record(stem, engine='jax', **keys)['seconds']:.2f}"


def _call(source: str):
    node = ast.parse(source, mode="eval").body
    name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
    if name not in ("bench", "ratio"):
        raise PluginError(f"bench: not a bench(...) or ratio(...) call: {source}")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    return (value if name == "bench" else ratio), args, kwargs


def expand(markdown: str) -> tuple[str, list[str]]:
    """markdown with every bench(...) replaced by its value, and the files read, in order."""
    used: list[str] = []

    def one(m):
        fn, args, kwargs = _call(m.group(1))
        if args[0] not in used:
            used.append(args[0])
        return fn(*args, **kwargs)

    return CALL.sub(one, markdown), used


def names(entry: str) -> list[str]:
    """The file names of bench/results an entry stands for: a stem (`.json` added), a name, or a
    glob with `{a,b}` alternatives; none is an error."""
    m = re.search(r"\{([^}]*)\}", entry)
    if m:
        return [
            n
            for alt in m.group(1).split(",")
            for n in names(entry[: m.start()] + alt + entry[m.end() :])
        ]
    if "*" in entry:
        found = sorted(p.name for p in RESULTS.glob(entry))
    else:
        name = entry if "." in entry else f"{entry}.json"
        found = [name] if (RESULTS / name).exists() else []
    if not found:
        raise PluginError(f"bench: no file bench/results/{entry}")
    return found


def data_section(files: list[str]) -> str:
    listed = []
    for entry in files:
        listed += [n for n in names(entry) if n not in listed]
    lines = ["", "## Data", ""]
    lines.append(
        "The numbers on this page come from these files of `bench/results/` (each names the "
        "commit it measured):"
    )
    lines.append("")
    lines += [f"- `{name}`" for name in listed]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, page, config, files, **kwargs):
    markdown, used = expand(markdown)
    for stem in page.meta.get("data", []) or []:
        if stem not in used:
            used.append(stem)
    if used:
        markdown = markdown.rstrip("\n") + "\n" + data_section(used)
    return markdown
