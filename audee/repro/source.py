"""Python source made from data: the one way a value from a case file reaches a generated script.

A repro script is code audee writes and a user runs; a case file is data that someone else
may have written.  So a template is filled only with typed pieces, in one pass:

* :class:`Code`: text audee wrote itself (its own source, its version, names it chose), verbatim;
* :class:`Data`: any JSON value, as a Python string literal made by ``repr`` of its JSON text
  (ASCII, every quote, backslash, newline and lone surrogate escaped); the template reads it
  with ``json.loads``;
* :class:`Comment`: lines of text as ``#`` comments, each character outside printable ASCII
  written as its escape, so a line stays one comment line whatever it holds.

:func:`fill` substitutes every ``__NAME__`` placeholder at once (a value that holds another
placeholder's name is not filled again), refuses a plain ``str`` (a site must say what its
text is), and keeps the first two lines of a template free of values: they decide the
source's encoding (PEP 263), which no file may choose.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

_PLACEHOLDER = re.compile(r"__([A-Z][A-Z0-9_]*[A-Z0-9])__")


@dataclass(frozen=True)
class Code:
    """Text audee produced itself: pasted verbatim."""

    text: str

    def render(self) -> str:
        return self.text


@dataclass(frozen=True)
class Data:
    """A JSON value as a Python string literal of its JSON text (``json.loads(literal) ==
    value``).  ``rows``: a mapping written one key a line and a list value one item a line,
    so a model reads layer by layer in the script; still nothing but string literals."""

    value: Any
    rows: bool = False

    def render(self) -> str:
        if not self.rows or not isinstance(self.value, dict):
            return repr(_dumps(self.value))
        lines = _rows(self.value)
        return "(\n" + "\n".join("    " + repr(line + "\n") for line in lines) + "\n)"


@dataclass(frozen=True)
class Comment:
    """Lines of text as ``#`` comments (an empty line is a bare ``#``)."""

    lines: Sequence[str]

    def render(self) -> str:
        return "\n".join(("# " + comment_safe(line)).rstrip() if line else "#" for line in self.lines)


Piece = Union[Code, Data, Comment]


def _dumps(value: Any) -> str:
    """JSON text in ASCII (NaN and Infinity as ``json.loads`` reads them back)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


def _rows(value: dict[str, Any]) -> list[str]:
    items = list(value.items())
    lines = ["{"]
    for i, (key, v) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        if isinstance(v, list) and v:
            lines.append(f" {_dumps(str(key))}: [")
            lines += [f"  {_dumps(x)}{',' if j < len(v) - 1 else ''}" for j, x in enumerate(v)]
            lines.append(f" ]{sep}")
        else:
            lines.append(f" {_dumps(str(key))}: {_dumps(v)}{sep}")
    return lines + ["}"]


def comment_safe(text: Any) -> str:
    """``text`` as one comment line: printable ASCII kept, anything else (newlines, other
    controls, non-ASCII, lone surrogates) written as its Python escape."""
    return "".join(ch if " " <= ch <= "~" else ascii(ch)[1:-1] for ch in str(text))


def fill(template: str, values: Mapping[str, Piece]) -> str:
    """``template`` with every ``__NAME__`` replaced by ``values[NAME]`` rendered, in one pass.
    Every placeholder must have a value and every value a placeholder."""
    for name, piece in values.items():
        if not isinstance(piece, (Code, Data, Comment)):
            raise TypeError(f"{name}: a script piece must be Code, Data or Comment, not {type(piece).__name__}")
    head = "".join(template.splitlines(keepends=True)[:2])
    if _PLACEHOLDER.search(head):
        raise ValueError("the first two lines of a script decide its encoding: no placeholder there")
    found = set(_PLACEHOLDER.findall(template))
    if found != set(values):
        raise ValueError(f"placeholders without a value: {sorted(found - set(values))}; "
                         f"values without a placeholder: {sorted(set(values) - found)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)].render(), template)
