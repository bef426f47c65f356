"""Streamed CSV downloads of pairwise preferences (score table and raw judgements)."""

from __future__ import annotations

import csv
from collections.abc import Iterable

from django.http import StreamingHttpResponse


class _Echo:
    """A file-like object whose ``write`` hands the line back, for ``csv.writer``."""

    def write(self, value: str) -> str:
        return value


def csv_response(rows: Iterable[list[str]], *, filename: str) -> StreamingHttpResponse:
    """Stream ``rows`` as a CSV attachment, one line at a time."""
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
