"""Markdown tables of text audee did not write (error messages, a script's last line).

One cell rule for every table audee writes: a cell is one line, a ``|`` inside it stays
text, and ``<name>`` placeholders (a normalized error's) are escaped so a Markdown viewer does
not take them for HTML tags and drop them.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence


def cell(v: object) -> str:
    """A Markdown table cell: no line breaks, and a ``|`` in an error message stays text."""
    return re.sub(r"<(\w+)>", r"&lt;\1&gt;", " ".join(str(v).split()).replace("|", "\\|"))


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table of ``rows`` (each as many cells as ``columns``), every cell by :func:`cell`."""
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
