"""Plain-text tables for the command line."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "") -> str:
    """Columns two spaces apart under a header and a rule: readable in a terminal, in a file, and
    through `grep`, `cut` or `column` (no box drawing, no wrapping; the last column is not padded)."""
    cells = [[str(c) for c in header], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header) - 1)]

    def line(row: list[str]) -> str:
        return (indent + "  ".join([c.ljust(w) for c, w in zip(row, widths)] + [row[-1]])).rstrip()

    return "\n".join([line(cells[0]), line(["-" * len(h) for h in cells[0]]), *(line(r) for r in cells[1:])])
