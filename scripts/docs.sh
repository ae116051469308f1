#!/usr/bin/env bash
# Builds the documentation site into site/ (mkdocs-material + mkdocstrings, strict: a warning,
# a broken internal link or a missing anchor fails the build), then checks every internal link
# of the built pages. Offline: no fonts or assets are fetched. Run after ./scripts/setup.sh.
#   ./scripts/docs.sh          build into site/ and check
#   ./scripts/docs.sh DIR      build into DIR and check
#   ./scripts/docs.sh serve    read the site at http://127.0.0.1:8000, search included (opened
#                              from disk, site/index.html has no search box); more arguments
#                              go to mkdocs serve (--dev-addr 0.0.0.0:8000)
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1  # the theme's notice about its successor, printed on every build
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "serve" ]; then
  shift
  exec "$PY" -m mkdocs serve "$@"
fi
SITE=${1:-site}
"$PY" -m mkdocs build --strict --clean --site-dir "$SITE"
# Every internal link and image of the built pages leads to a file, and every #anchor to an id.
"$PY" - "$SITE" <<'PY'
import html.parser, pathlib, sys, urllib.parse

site = pathlib.Path(sys.argv[1]).resolve()


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" or (tag == "a" and key == "name"):
                self.ids.add(value)
            if key in ("href", "src") and value:
                self.links.append(value)


pages = {}
for path in site.rglob("*.html"):
    if path.name == "404.html":  # absolute links by design: it is served from any depth
        continue
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    pages[path] = page
broken = []
for path, page in pages.items():
    for link in page.links:
        url = urllib.parse.urlsplit(link)
        if url.scheme or url.netloc or link.startswith(("mailto:", "data:", "javascript:")):
            continue
        target = (path.parent / urllib.parse.unquote(url.path)).resolve() if url.path else path
        if target.is_dir():
            target = target / "index.html"
        if not target.exists() or site not in (target, *target.parents):
            broken.append(f"{path.relative_to(site)}: {link} (no such file)")
        elif url.fragment and target.suffix == ".html":
            ids = pages[target].ids if target in pages else set()
            if urllib.parse.unquote(url.fragment) not in ids:
                broken.append(f"{path.relative_to(site)}: {link} (no such anchor)")
if broken:
    print("broken internal links:\n  " + "\n  ".join(sorted(set(broken))), file=sys.stderr)
    sys.exit(1)
print(f"[docs] {len(pages)} pages, every internal link and anchor resolves")
PY
