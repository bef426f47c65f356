"""Raw annotation exports (CSV, JSON Lines), streamed in constant memory.

One row per answer: the current live answers by default, or with ``include_history`` every
revision ever made, retractions included (``value`` empty). Views and the API call
:func:`export_response`; scripts can use :func:`annotation_export_rows` with
:func:`stream_csv` / :func:`stream_jsonl` directly.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from apps.annotations.selectors import current_annotations, revisions_of_study
from apps.studies.models import Study

EXPORT_COLUMNS = (
    "study",
    "question",
    "item",
    "annotator",
    "round",
    "label",
    "value",
    "revision",
    "time_spent_ms",
    "created_at",
    "source",
)
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
ROWS_PER_CHUNK = 500
CHUNK_SIZE = 2000

# Export column -> path from the annotation and from the revision, in EXPORT_COLUMNS order.
_ANNOTATION_PATHS = {
    "question": "question__key",
    "item": "item__external_id",
    "annotator": "annotator__username",
    "round": "round",
}
_REVISION_PATHS = {
    "label": "label__key",
    "value": "value",
    "revision": "number",
    "time_spent_ms": "time_spent_ms",
    "created_at": "created_at",
    "source": "source",
}


def annotation_export_rows(
    *, study: Study, include_history: bool = False
) -> Iterator[dict[str, Any]]:
    """One dict per answer, keys :data:`EXPORT_COLUMNS`, ``created_at`` as ISO 8601 text.

    Without history: each annotation's current revision, retracted answers left out. With
    history: every revision in order, a retraction being a row whose ``value`` is ``None``.
    """
    if include_history:
        queryset = revisions_of_study(study=study)
        annotation_prefix, revision_prefix = "annotation__", ""
    else:
        queryset = current_annotations(study=study)
        annotation_prefix, revision_prefix = "", "current_revision__"
    columns = [*_ANNOTATION_PATHS, *_REVISION_PATHS]
    paths = [annotation_prefix + path for path in _ANNOTATION_PATHS.values()] + [
        revision_prefix + path for path in _REVISION_PATHS.values()
    ]
    for values in queryset.values_list(*paths).iterator(chunk_size=CHUNK_SIZE):
        row = dict(zip(columns, values, strict=True))
        row["created_at"] = row["created_at"].isoformat()
        yield {"study": study.pk, **row}


def stream_csv(
    rows: Iterable[dict[str, Any]], *, columns: tuple[str, ...] = EXPORT_COLUMNS
) -> Iterator[str]:
    """CSV text in chunks of a few hundred rows: a header, then ``rows``.

    Dicts and lists (a non-categorical ``value``) are written as JSON; ``None`` as an empty cell.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for count, row in enumerate(rows, start=1):
        writer.writerow(
            {
                key: json.dumps(value) if isinstance(value, dict | list) else value
                for key, value in row.items()
            }
        )
        if count % ROWS_PER_CHUNK == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def stream_jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """JSON Lines text in chunks of a few hundred rows, one object per row."""
    buffer = io.StringIO()
    for count, row in enumerate(rows, start=1):
        buffer.write(json.dumps(row, ensure_ascii=False))
        buffer.write("\n")
        if count % ROWS_PER_CHUNK == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def export_response(
    *, request: HttpRequest, study: Study, fmt: str, include_history: bool = False
) -> StreamingHttpResponse:
    """A download of the study's annotations as ``fmt`` (``"csv"`` or ``"jsonl"``).

    The caller checks that the user may see the study. Under ASGI (daphne) the body is an
    asynchronous iterator, under WSGI a plain one, so neither server buffers the whole file.
    ``request`` may be a Django or a DRF request.
    """
    if fmt not in CONTENT_TYPES:
        raise ValidationError({"format": f"Unknown export format {fmt!r}; use csv or jsonl."})
    rows = annotation_export_rows(study=study, include_history=include_history)
    chunks = stream_csv(rows) if fmt == "csv" else stream_jsonl(rows)
    django_request = getattr(request, "_request", request)  # DRF wraps the HttpRequest
    body = _async_chunks(chunks) if isinstance(django_request, ASGIRequest) else chunks
    suffix = "-history" if include_history else ""
    filename = f"study-{study.pk}-annotations{suffix}.{fmt}"
    return StreamingHttpResponse(
        body,
        content_type=CONTENT_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _drain(buffer: io.StringIO) -> str:
    """Return what the buffer holds and empty it."""
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    """Pull a synchronous (database-reading) iterator chunk by chunk from a worker thread."""
    pull = sync_to_async(next, thread_sensitive=True)
    while (chunk := await pull(chunks, None)) is not None:
        yield chunk
