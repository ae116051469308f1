"""A griffe extension for the API reference: docstrings are plain text, not Markdown links.

jaxmg's docstrings write optional outputs the NumPy way, `(x[, logdet][, status])`; Markdown
would read `[, logdet][, status]` as a reference link. Outside code spans, every `[` is
escaped, so the text shows as written.
"""

from __future__ import annotations

import re

import griffe

CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def escape_brackets(text: str) -> str:
    """`text` with `[` escaped outside code spans (a Markdown link needs one, so none is left)."""
    out, last = [], 0
    for m in CODE_SPAN.finditer(text):
        out.append(text[last : m.start()].replace("[", "\\["))
        out.append(m.group(0))
        last = m.end()
    out.append(text[last:].replace("[", "\\["))
    return "".join(out)


class PlainBrackets(griffe.Extension):
    """Escapes `[` in every docstring outside code spans."""

    def on_object(self, *, obj, loader, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = escape_brackets(obj.docstring.value)
