"""Raw and curated annotation exports (CSV, JSON Lines, Parquet), streamed in constant memory.

One row per answer: the current live answers by default, or with ``include_history`` every
revision ever made, retractions included (``value`` empty). A *curated* export leaves out every
row of the annotators a manager excluded on the quality dashboard (``analytics.Exclusion``, not
revoked). Annotators are named by username, or by stable per-study pseudonyms
(:mod:`apps.exchange.identity`). Views and the API call :func:`export_response`; scripts can use
:func:`annotation_export_rows` with :func:`stream_csv` / :func:`stream_jsonl` or
:func:`apps.exchange.formats.encode` (columns :data:`EXPORT_SCHEMA`) directly.

:func:`provenance` describes one export: what was left out and why, the flags known about the
annotators kept, and the SHA-256 of the exact bytes :func:`export_response` (or
:func:`export_bytes`) produces with the same options.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from analytics.intervals import rows_figures, study_quality
from analytics.models import Flag
from analytics.selectors import active_exclusions, excluded_annotator_ids, study_flags
from apps.annotations.selectors import current_annotations, revisions_of_study
from apps.exchange import formats
from apps.exchange.formats import CONTENT_TYPES, ROWS_PER_CHUNK, Column
from apps.exchange.identity import USERNAMES, annotator_names
from apps.studies.models import Study
from apps.studies.selectors import question_items

__all__ = ["CONTENT_TYPES", "ROWS_PER_CHUNK"]  # re-exported: the export formats and text chunks

#: The columns of an annotation export and their types (Parquet). ``value`` is the answer as
#: JSON (its shape depends on the question kind); ``label`` the categorical label's key;
#: ``suggested`` / ``suggestion_shown`` the model suggestion the answer's page showed or held
#: out (empty for an answer given without one).
EXPORT_SCHEMA = (
    Column("study", "int"),
    Column("question", "str"),
    Column("item", "str"),
    Column("annotator", "str"),
    Column("round", "int32"),
    Column("label", "str"),
    Column("value", "json"),
    Column("revision", "int32"),
    Column("time_spent_ms", "int"),
    Column("created_at", "timestamp"),
    Column("source", "str"),
    Column("suggested", "str"),
    Column("suggestion_shown", "bool"),
)
EXPORT_COLUMNS = tuple(column.name for column in EXPORT_SCHEMA)
PACKAGE = "annotation-studio"
PROVENANCE_SCHEMA = "annotation-studio/export-provenance/2"
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
    # what the annotator's page did with a model's suggestion (docs/suggestions.md): the
    # label key suggested or withheld, and whether it was shown; empty without one
    "suggested": "suggestion__label__key",
    "suggestion_shown": "suggestion__shown",
}


def _export_queryset(*, study: Study, include_history: bool) -> tuple[QuerySet, str, str]:
    """The rows' queryset (uncurated, in export order) and its annotation and revision prefix."""
    if include_history:
        return revisions_of_study(study=study), "annotation__", ""
    return current_annotations(study=study), "", "current_revision__"


def annotation_export_rows(
    *,
    study: Study,
    include_history: bool = False,
    curated: bool = False,
    identity: str = USERNAMES,
    question_id: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One dict per answer, keys :data:`EXPORT_COLUMNS`, ``created_at`` an aware datetime.

    Without history: each annotation's current revision, retracted answers left out. With
    history: every revision in order, a retraction being a row whose ``value`` is ``None``.
    ``curated`` leaves out every row of the study's excluded annotators; ``identity``
    (``"usernames"`` or ``"pseudonyms"``) names the annotators; ``question_id`` keeps one
    question's answers. The order is fixed (annotation id, then revision number), so the same
    data gives the same file.
    """
    left_out = excluded_annotator_ids(study=study) if curated else set()
    yield from _rows(
        study=study,
        include_history=include_history,
        left_out=left_out,
        name=annotator_names(study_id=study.pk, identity=identity),
        question_id=question_id,
    )


def _rows(
    *,
    study: Study,
    include_history: bool,
    left_out: Collection[int],
    name: Callable[[str], str],
    question_id: int | None = None,
) -> Iterator[dict[str, Any]]:
    """The export rows, without those of the annotators ``left_out`` (ids), annotators named
    by ``name``, of one question if ``question_id`` is given."""
    queryset, annotation_prefix, revision_prefix = _export_queryset(
        study=study, include_history=include_history
    )
    if question_id is not None:
        queryset = queryset.filter(**{f"{annotation_prefix}question_id": question_id})
    if left_out:
        queryset = queryset.exclude(**{f"{annotation_prefix}annotator_id__in": left_out})
    columns = [*_ANNOTATION_PATHS, *_REVISION_PATHS]
    paths = [annotation_prefix + path for path in _ANNOTATION_PATHS.values()] + [
        revision_prefix + path for path in _REVISION_PATHS.values()
    ]
    for values in queryset.values_list(*paths).iterator(chunk_size=CHUNK_SIZE):
        row = dict(zip(columns, values, strict=True))
        row["annotator"] = name(row["annotator"])
        yield {"study": study.pk, **row}


def stream_csv(
    rows: Iterable[dict[str, Any]], *, columns: tuple[str, ...] = EXPORT_COLUMNS
) -> Iterator[str]:
    """CSV text in chunks of a few hundred rows: a header, then ``rows``.

    Dicts and lists (a non-categorical ``value``) are written as JSON, datetimes as ISO 8601;
    ``None`` as an empty cell; text a spreadsheet would run as a formula is neutralised
    (:mod:`core.csv_files`).
    """
    return formats.csv_text(rows, columns=columns)


def stream_jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """JSON Lines text in chunks of a few hundred rows, one object per row."""
    return formats.jsonl_text(rows)


def export_bytes(
    *,
    study: Study,
    fmt: str,
    include_history: bool = False,
    curated: bool = False,
    identity: str = USERNAMES,
) -> Iterator[bytes]:
    """The export file as byte chunks, exactly as :func:`export_response` sends it."""
    formats.check_format(fmt)
    rows = annotation_export_rows(
        study=study, include_history=include_history, curated=curated, identity=identity
    )
    return formats.encode(rows, columns=EXPORT_SCHEMA, fmt=fmt)


def export_filename(
    *,
    study: Study,
    fmt: str,
    include_history: bool,
    curated: bool,
    identity: str = USERNAMES,
) -> str:
    """``study-<id>-annotations[-curated][-history][-pseudonyms].<fmt>``."""
    suffix = (
        ("-curated" if curated else "")
        + ("-history" if include_history else "")
        + ("" if identity == USERNAMES else f"-{identity}")
    )
    return f"study-{study.pk}-annotations{suffix}.{fmt}"


def export_response(
    *,
    request: HttpRequest,
    study: Study,
    fmt: str,
    include_history: bool = False,
    curated: bool = False,
    identity: str = USERNAMES,
) -> StreamingHttpResponse:
    """A download of the study's annotations as ``fmt`` (``"csv"``, ``"jsonl"``, ``"parquet"``).

    The caller checks that the user may see the study. The body is streamed
    (:func:`apps.exchange.formats.download`). ``request`` may be a Django or a DRF request.
    ``curated`` leaves out excluded annotators; ``identity`` names the annotators.
    """
    options = {"include_history": include_history, "curated": curated, "identity": identity}
    return formats.download(
        export_bytes(study=study, fmt=fmt, **options),
        request=request,
        fmt=fmt,
        filename=export_filename(study=study, fmt=fmt, **options),
    )


def provenance(
    *, study: Study, curated: bool, include_history: bool, fmt: str, identity: str = USERNAMES
) -> dict[str, Any]:
    """What an export with these options holds, what it leaves out and why, and its checksum.

    Keys: ``schema``; ``study`` (id, name, status); ``generated_at`` (UTC, ISO 8601);
    ``software`` (package version, git commit or ``None``); ``options`` (format, curated,
    include_history, ``annotators``: usernames or pseudonyms); ``file`` (name,
    columns, rows, bytes, sha256 of the exact file those options download); ``counts`` (rows and
    annotators of the uncurated export vs the file); ``exclusions`` (each excluded annotator:
    who excluded them, when, why, whether the file applies it, the rows left out and every flag
    behind it); ``open_flags`` (open flags of the annotators in the file and of whole questions:
    known, not acted on); ``quality`` (per question key, the latest figures with their 95 %
    intervals and evidence, :func:`analytics.intervals.study_quality`: every annotator's
    round-1 answers, the excluded included); ``figures_on_rows`` (the same study figures
    computed once on the round-1 answers the file ships, ``rows`` "curated" or "all", each
    question's entry naming its annotators, answers and items:
    :func:`analytics.intervals.rows_figures`); ``questions`` (each question's key, kind, scope
    and the number of items it asks about: a question without an answer about an item outside
    its scope was never asked it). Annotators are named
    as in the file (pseudonyms if ``identity`` says so). The file is read once more to hash
    it: if annotations change between this and a download, the checksum tells the two apart.
    """
    formats.check_format(fmt)
    name = annotator_names(study_id=study.pk, identity=identity)
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
    rows = _rows(study=study, include_history=include_history, left_out=left_out, name=name)
    for chunk in formats.encode(_counted(rows, kept), columns=EXPORT_SCHEMA, fmt=fmt):
        digest.update(chunk)
        size += len(chunk)
    flags = list(study_flags(study=study))
    return {
        "schema": PROVENANCE_SCHEMA,
        "study": {"id": study.pk, "name": study.name, "status": study.status},
        "generated_at": timezone.now().astimezone(UTC).isoformat(),
        "software": {"name": PACKAGE, "version": _software_version(), "git_commit": _git_commit()},
        "options": {
            "format": fmt,
            "curated": curated,
            "include_history": include_history,
            "annotators": identity,
        },
        "file": {
            "name": export_filename(
                study=study,
                fmt=fmt,
                include_history=include_history,
                curated=curated,
                identity=identity,
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
                "annotator": name(exclusion.annotator.get_username()),
                "excluded_by": exclusion.by.get_username(),
                "excluded_at": exclusion.created_at.astimezone(UTC).isoformat(),
                "reason": exclusion.reason,
                "applied": curated,
                "rows_left_out": rows_by_annotator.get(exclusion.annotator_id, 0) if curated else 0,
                "flags": [
                    _flag_record(flag, name)
                    for flag in flags
                    if flag.annotator_id == exclusion.annotator_id
                ],
            }
            for exclusion in exclusions
        ],
        "open_flags": [
            _flag_record(flag, name)
            for flag in flags
            if flag.status == Flag.Status.OPEN and flag.annotator_id not in left_out
        ],
        "quality": study_quality(study=study, name=name),
        "figures_on_rows": {
            "rows": "curated" if curated else "all",
            "questions": rows_figures(study=study, left_out=left_out),
        },
        "questions": [
            {
                "key": question.key,
                "kind": question.kind,
                "scope": question.scope,
                "items": question_items(question).count(),
            }
            for question in study.questions.order_by("position", "id")
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


def _flag_record(flag: Flag, name: Callable[[str], str]) -> dict[str, Any]:
    return {
        "annotator": name(flag.annotator.get_username()) if flag.annotator else None,
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
