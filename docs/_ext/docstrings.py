"""A griffe extension for the API reference: docstrings are plain text, not Markdown links, a
Returns block is one description, and private base classes are not shown.

- jaxmg's docstrings write optional outputs the NumPy way, `(x[, logdet][, status])`; Markdown
  would read `[, logdet][, status]` as a reference link. Outside code spans, every `[` is
  escaped, so the text shows as written.
- A Returns block describes the outputs in prose (`(w, V) or w, ...: w, the eigenvalues ...`).
  Google-style parsing would take everything before its first colon for a type (and strip its
  opening parenthesis: "w, V) or w"), and show it as code with its backticks; here the whole
  block is the description.
- A class's bases named with a leading underscore (`_Unpacks`) are implementation details: the
  reference lists the public ones only.
"""

from __future__ import annotations

import re
import textwrap

import griffe

CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
SECTION = re.compile(r"^(\s*)([A-Z][A-Za-z ]*):\s*$")


def escape_brackets(text: str) -> str:
    """`text` with `[` escaped outside code spans (a Markdown link needs one, so none is left)."""
    out, last = [], 0
    for m in CODE_SPAN.finditer(text):
        out.append(text[last : m.start()].replace("[", "\\["))
        out.append(m.group(0))
        last = m.end()
    out.append(text[last:].replace("[", "\\["))
    return "".join(out)


def returns_block(text: str) -> str | None:
    """The dedented text of the docstring's `Returns:` block, or None without one."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = SECTION.match(line)
        if not m or m.group(2) != "Returns":
            continue
        indent = len(m.group(1))
        block = []
        for body in lines[i + 1 :]:
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break  # the next section (or the docstring's end)
            block.append(body)
        return textwrap.dedent("\n".join(block)).strip("\n") or None
    return None


def public_bases(bases: list) -> list:
    """`bases` less those whose own name starts with an underscore."""
    return [b for b in bases if not str(b).rsplit(".", 1)[-1].startswith("_")]


class PlainBrackets(griffe.Extension):
    """Escapes `[` outside code spans, keeps each Returns block whole, hides `_` bases."""

    def on_object(self, *, obj, loader, **kwargs) -> None:
        if obj.is_class:
            obj.bases = public_bases(obj.bases)
        if obj.docstring is None:
            return
        doc = obj.docstring
        doc.value = escape_brackets(doc.value)
        block = returns_block(doc.value)
        if block is None or doc.parser is None:
            return
        sections = doc.parse()
        for section in sections:
            if section.kind is griffe.DocstringSectionKind.returns:
                section.value = [
                    griffe.DocstringReturn(name="", annotation=None, description=block)
                ]
        doc.__dict__["parsed"] = sections  # what the templates read (a cached property)
