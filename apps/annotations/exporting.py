"""Raw and curated annotation exports (CSV, JSON Lines), streamed in constant memory.

One row per answer: the current live answers by default, or with ``include_history`` every
revision ever made, retractions included (``value`` empty). A *curated* export leaves out every
row of the annotators a manager excluded on the quality dashboard (``analytics.Exclusion``, not
revoked). Views and the API call :func:`export_response`; scripts can use
:func:`annotation_export_rows` with :func:`stream_csv` / :func:`stream_jsonl` directly.

:func:`provenance` describes one export: what was left out and why, the flags known about the
annotators kept, and the SHA-256 of the exact bytes :func:`export_response` (or
:func:`export_bytes`) produces with the same options.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import io
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Collection, Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Count, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from analytics.models import Flag
from analytics.selectors import active_exclusions, excluded_annotator_ids, study_flags
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
ENCODING = "utf-8"  # of every download; the provenance hashes these very bytes
PACKAGE = "annotation-studio"
PROVENANCE_SCHEMA = "annotation-studio/export-provenance/1"
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


def _export_queryset(*, study: Study, include_history: bool) -> tuple[QuerySet, str, str]:
    """The rows' queryset (uncurated, in export order) and its annotation and revision prefix."""
    if include_history:
        return revisions_of_study(study=study), "annotation__", ""
    return current_annotations(study=study), "", "current_revision__"


def annotation_export_rows(
    *, study: Study, include_history: bool = False, curated: bool = False
) -> Iterator[dict[str, Any]]:
    """One dict per answer, keys :data:`EXPORT_COLUMNS`, ``created_at`` as ISO 8601 text.

    Without history: each annotation's current revision, retracted answers left out. With
    history: every revision in order, a retraction being a row whose ``value`` is ``None``.
    ``curated`` leaves out every row of the study's excluded annotators. The order is fixed
    (annotation id, then revision number), so the same data gives the same file.
    """
    left_out = excluded_annotator_ids(study=study) if curated else set()
    yield from _rows(study=study, include_history=include_history, left_out=left_out)


def _rows(
    *, study: Study, include_history: bool, left_out: Collection[int]
) -> Iterator[dict[str, Any]]:
    """The export rows, without those of the annotators ``left_out`` (ids)."""
    queryset, annotation_prefix, revision_prefix = _export_queryset(
        study=study, include_history=include_history
    )
    if left_out:
        queryset = queryset.exclude(**{f"{annotation_prefix}annotator_id__in": left_out})
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


def _check_format(fmt: str) -> None:
    if fmt not in CONTENT_TYPES:
        raise ValidationError({"format": f"Unknown export format {fmt!r}; use csv or jsonl."})


def _encode(rows: Iterable[dict[str, Any]], *, fmt: str) -> Iterator[bytes]:
    """The file's bytes in chunks: the one serialiser of downloads, files and hashes."""
    chunks = stream_csv(rows) if fmt == "csv" else stream_jsonl(rows)
    return (chunk.encode(ENCODING) for chunk in chunks)


def export_bytes(
    *, study: Study, fmt: str, include_history: bool = False, curated: bool = False
) -> Iterator[bytes]:
    """The export file as byte chunks, exactly as :func:`export_response` sends it."""
    _check_format(fmt)
    rows = annotation_export_rows(study=study, include_history=include_history, curated=curated)
    return _encode(rows, fmt=fmt)


def export_filename(*, study: Study, fmt: str, include_history: bool, curated: bool) -> str:
    """``study-<id>-annotations[-curated][-history].<fmt>``."""
    suffix = ("-curated" if curated else "") + ("-history" if include_history else "")
    return f"study-{study.pk}-annotations{suffix}.{fmt}"


def export_response(
    *,
    request: HttpRequest,
    study: Study,
    fmt: str,
    include_history: bool = False,
    curated: bool = False,
) -> StreamingHttpResponse:
    """A download of the study's annotations as ``fmt`` (``"csv"`` or ``"jsonl"``).

    The caller checks that the user may see the study. Under ASGI (daphne) the body is an
    asynchronous iterator, under WSGI a plain one, so neither server buffers the whole file.
    ``request`` may be a Django or a DRF request. ``curated`` leaves out excluded annotators.
    """
    chunks = export_bytes(study=study, fmt=fmt, include_history=include_history, curated=curated)
    django_request = getattr(request, "_request", request)  # DRF wraps the HttpRequest
    body = _async_chunks(chunks) if isinstance(django_request, ASGIRequest) else chunks
    filename = export_filename(
        study=study, fmt=fmt, include_history=include_history, curated=curated
    )
    return StreamingHttpResponse(
        body,
        content_type=CONTENT_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def provenance(*, study: Study, curated: bool, include_history: bool, fmt: str) -> dict[str, Any]:
    """What an export with these options holds, what it leaves out and why, and its checksum.

    Keys: ``schema``; ``study`` (id, name, status); ``generated_at`` (UTC, ISO 8601);
    ``software`` (package version, git commit or ``None``); ``options``; ``file`` (name,
    columns, rows, bytes, sha256 of the exact file those options download); ``counts`` (rows and
    annotators of the uncurated export vs the file); ``exclusions`` (each excluded annotator:
    who excluded them, when, why, whether the file applies it, the rows left out and every flag
    behind it); ``open_flags`` (open flags of the annotators in the file and of whole questions:
    known, not acted on). The file is read once more to hash it: if annotations change between
    this and a download, the checksum tells the two apart.
    """
    _check_format(fmt)
    exclusions = list(active_exclusions(study=study))
    left_out = {exclusion.annotator_id for exclusion in exclusions} if curated else set()
    queryset, annotation_prefix, _ = _export_queryset(study=study, include_history=include_history)
    annotator = f"{annotation_prefix}annotator_id"
    rows_by_annotator = dict(
        queryset.order_by()
        .values_list(annotator)
        .annotate(n=Count("pk"))
        .values_list(annotator, "n")
    )
    kept: Counter[str] = Counter()
    digest, size = hashlib.sha256(), 0
    rows = _rows(study=study, include_history=include_history, left_out=left_out)
    for chunk in _encode(_counted(rows, kept), fmt=fmt):
        digest.update(chunk)
        size += len(chunk)
    flags = list(study_flags(study=study))
    return {
        "schema": PROVENANCE_SCHEMA,
        "study": {"id": study.pk, "name": study.name, "status": study.status},
        "generated_at": timezone.now().astimezone(UTC).isoformat(),
        "software": {"name": PACKAGE, "version": _software_version(), "git_commit": _git_commit()},
        "options": {"format": fmt, "curated": curated, "include_history": include_history},
        "file": {
            "name": export_filename(
                study=study, fmt=fmt, include_history=include_history, curated=curated
            ),
            "columns": list(EXPORT_COLUMNS),
            "rows": kept.total(),
            "bytes": size,
            "sha256": digest.hexdigest(),
        },
        "counts": {
            "rows_total": sum(rows_by_annotator.values()),
            "rows_exported": kept.total(),
            "annotators_total": len(rows_by_annotator),
            "annotators_kept": len(kept),
        },
        "exclusions": [
            {
                "annotator": exclusion.annotator.get_username(),
                "excluded_by": exclusion.by.get_username(),
                "excluded_at": exclusion.created_at.astimezone(UTC).isoformat(),
                "reason": exclusion.reason,
                "applied": curated,
                "rows_left_out": rows_by_annotator.get(exclusion.annotator_id, 0) if curated else 0,
                "flags": [
                    _flag_record(flag)
                    for flag in flags
                    if flag.annotator_id == exclusion.annotator_id
                ],
            }
            for exclusion in exclusions
        ],
        "open_flags": [
            _flag_record(flag)
            for flag in flags
            if flag.status == Flag.Status.OPEN and flag.annotator_id not in left_out
        ],
    }


def provenance_json(record: dict[str, Any]) -> str:
    """A provenance record as the text of its ``.provenance.json`` file."""
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"


def _counted(rows: Iterable[dict[str, Any]], counter: Counter[str]) -> Iterator[dict[str, Any]]:
    """Pass ``rows`` through, counting them per annotator (username) in ``counter``."""
    for row in rows:
        counter[row["annotator"]] += 1
        yield row


def _flag_record(flag: Flag) -> dict[str, Any]:
    return {
        "annotator": flag.annotator.get_username() if flag.annotator else None,
        "question": flag.question.key,
        "indicator": flag.indicator,
        "reason": flag.reason,
        "figures": flag.figures,
        "status": flag.status,
        "active": flag.active,
        "raised_at": flag.created_at.astimezone(UTC).isoformat(),
    }


def _software_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git_commit() -> str | None:
    """The commit checked out beside the code, read from ``.git`` (no git process); or None.

    Follows a worktree's ``gitdir:`` file and its ``commondir``, loose refs and ``packed-refs``.
    """
    git_dir = Path(settings.BASE_DIR) / ".git"
    try:
        if git_dir.is_file():
            git_dir = git_dir.parent / git_dir.read_text().removeprefix("gitdir:").strip()
        head = (git_dir / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            head = _resolve_ref(git_dir, head.removeprefix("ref: "))
    except (OSError, UnicodeDecodeError, StopIteration, IndexError):
        return None
    return head if _COMMIT.fullmatch(head) else None


def _resolve_ref(git_dir: Path, ref: str) -> str:
    """The commit a ref names: its loose file (here or in the common dir) or ``packed-refs``."""
    common_file = git_dir / "commondir"
    common = git_dir / common_file.read_text().strip() if common_file.is_file() else git_dir
    for directory in (git_dir, common):
        if (directory / ref).is_file():
            return (directory / ref).read_text().strip()
    packed = (common / "packed-refs").read_text().splitlines()
    return next(line.split()[0] for line in packed if line.endswith(f" {ref}"))


_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


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
