"""Reading and validating item files (CSV, JSON Lines, Parquet) for :mod:`apps.items.services`.

CSV, JSON Lines and Parquet files carry the same fields: ``external_id`` (required), ``kind``
(text, image, audio, video; default text), ``text``, ``url``, ``media`` (the name of an
uploaded file: an image, audio or video, checked by :func:`apps.items.media.stimulus_file`)
and ``metadata`` (a JSON object). ``gold``, ``gold_reason`` and ``gold_use`` give an item a
known answer (:mod:`apps.recruitment.gold`). Any other column or key is kept in ``metadata``.

Rows are read one at a time and checked against the :class:`~apps.items.models.Item` model's own
field validators and ``clean()``. Problems are collected (up to :data:`MAX_ERRORS`) and raised
together as one :class:`ItemImportError` naming the line and field of each.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import PurePath
from typing import IO, Any, NamedTuple

import pyarrow as pa
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.files import File
from django.template.defaultfilters import filesizeformat

from apps.exchange.formats import TooLargeError, read_parquet
from apps.items.media import stimulus_file
from apps.items.models import Item
from apps.recruitment.gold import GOLD_COLUMNS, GoldSpec, gold_questions, gold_read
from apps.studies.kinds import question_kind
from apps.studies.models import Question, Study
from apps.studies.selectors import covering_questions
from core.limits import MAX_LINE_CHARS

FORMATS = ("csv", "jsonl", "parquet")
MAX_ERRORS = 50
BATCH_SIZE = 500
STRING_FIELDS = ("external_id", "kind", "text", "url", "media")
ITEM_KEYS = {*STRING_FIELDS, "metadata", *GOLD_COLUMNS}
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_BOM = "\ufeff"


class RowError(NamedTuple):
    """One problem in an import: where (line, field) and what."""

    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}, field {self.field}" if self.field else f"line {self.line}"
        return f"{where}: {self.message}"


class ItemImportError(ValidationError):
    """Every problem found in an import; ``errors`` lists them as :class:`RowError` tuples."""

    def __init__(self, errors: list[RowError], *, truncated: bool = False) -> None:
        self.errors = errors
        self.truncated = truncated
        messages = [str(error) for error in errors]
        if truncated:
            messages.append(f"Stopped after {MAX_ERRORS} errors; the rest was not checked.")
        super().__init__(messages)


@dataclass(frozen=True, slots=True)
class RawRow:
    """One row as read from a file (or given to the API), before validation."""

    line: int
    data: dict[str, Any]
    errors: tuple[RowError, ...] = field(default=())


def format_for_name(name: str) -> str:
    """The import format (``"csv"``, ``"jsonl"`` or ``"parquet"``) implied by a file name."""
    fmt = _EXTENSIONS.get(PurePath(name).suffix.lower())
    if fmt is None:
        raise ValidationError(
            {
                "format": f"Cannot tell the format of {name!r}: "
                "use .csv, .jsonl, .ndjson or .parquet."
            }
        )
    return fmt


def parse_items(stream: IO[bytes] | IO[str], *, fmt: str) -> Iterator[RawRow]:
    """Read item rows from a CSV or JSON Lines stream (bytes or text, UTF-8, BOM tolerated).

    Rows come one at a time; problems that belong to one row (invalid JSON, a stray cell) travel
    in :attr:`RawRow.errors` so that validation can report them beside the others. A CSV header
    without ``external_id`` raises :class:`ItemImportError` at once. CSV line numbers count the
    header as line 1 and point at the line where a record starts.
    """
    if fmt not in FORMATS:
        raise ValidationError({"format": f"Unknown format {fmt!r}; use csv, jsonl or parquet."})
    reader = {"csv": _csv_rows, "jsonl": _jsonl_rows, "parquet": _parquet_rows}[fmt]
    return reader(stream)


@dataclass(frozen=True, slots=True)
class ItemBatch:
    """Validated items ready to store: new ones, changed existing ones, and how many were equal,
    and the gold answers of rows that give one, by external id."""

    new: list[Item]
    changed: list[Item]
    unchanged: int
    gold: dict[str, list[GoldSpec]] = field(default_factory=dict)


def clean_rows(
    rows: Iterable[RawRow], *, study: Study, files: Mapping[str, File]
) -> Iterator[ItemBatch]:
    """Validate rows into batches of unsaved items, new or changed.

    An ``external_id`` already in the study updates that item (re-importing the same values
    changes nothing); a repeated one within the rows is an error. Batches are yielded only while
    no error has been seen, so a caller may store them as they come inside one transaction.
    Raises :class:`ItemImportError` once the rows are used up (or :data:`MAX_ERRORS` is reached)
    if anything was wrong.
    """
    errors: list[RowError] = []
    first_line: dict[str, int] = {}
    rows = iter(rows)
    truncated = False
    questions = gold_questions(study=study)
    every_question = list(study.questions.order_by("position", "id"))
    while batch := list(itertools.islice(rows, BATCH_SIZE)):
        ids = [_external_id(row.data) for row in batch]
        existing = {
            item.external_id: item
            for item in Item.objects.filter(study=study, external_id__in=set(ids))
        }
        new: list[Item] = []
        changed: list[Item] = []
        unchanged = 0
        gold: dict[str, list[GoldSpec]] = {}
        for row, external_id in zip(batch, ids, strict=True):
            row_errors = list(row.errors)
            if external_id in first_line:
                message = f"Duplicate of line {first_line[external_id]}; each id may appear once."
                row_errors.append(RowError(row.line, "external_id", message))
            elif external_id:
                first_line[external_id] = row.line
            item = existing.get(external_id) or Item(study=study)
            before = _stored_values(item)
            if not row_errors:
                row_errors = _apply_row(item, row, files=files)
                row_errors += _read_gold(row, external_id, questions=questions, into=gold)
                if not row_errors:
                    row_errors = _kind_problems(row, item, questions=every_question)
            errors += row_errors
            if item.pk is None:
                new.append(item)
            elif _stored_values(item) != before:
                changed.append(item)
            else:
                unchanged += 1
        if len(errors) >= MAX_ERRORS:
            truncated = next(rows, None) is not None
            break
        if not errors:
            yield ItemBatch(new=new, changed=changed, unchanged=unchanged, gold=gold)
    if errors:
        raise ItemImportError(errors[:MAX_ERRORS], truncated=truncated or len(errors) > MAX_ERRORS)


def _stored_values(item: Item) -> tuple[Any, ...]:
    """What an import may change on an item (a newly attached upload changes the file name)."""
    return (item.kind, item.text, item.url, item.media.name, item.metadata)


def _as_text(value: Any) -> str | None:
    """A cell or JSON value as text: ``None`` is empty, numbers are written out, others fail."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else None


def _external_id(data: Mapping[str, Any]) -> str:
    return (_as_text(data.get("external_id")) or "").strip()


def _read_gold(
    row: RawRow,
    external_id: str,
    *,
    questions: list[Question],
    into: dict[str, list[GoldSpec]],
) -> list[RowError]:
    """Put the row's gold answers (if any) in ``into``; return the problems found."""
    try:
        specs = gold_read(row.data, questions=questions, line=row.line)
    except ValidationError as exc:
        return [RowError(row.line, "gold", message) for message in exc.messages]
    if specs:
        into[external_id] = specs
    return []


def _kind_problems(row: RawRow, item: Item, *, questions: list[Question]) -> list[RowError]:
    """What the kinds of the questions that apply to ``item`` find wrong with it
    (:meth:`~apps.studies.kinds.QuestionKind.item_problems`: an arena prompt without two
    model responses)."""
    return [
        RowError(row.line, name, message)
        for question in covering_questions(questions, item)
        for name, message in question_kind(question.kind).item_problems(question, item).items()
    ]


def _apply_row(item: Item, row: RawRow, *, files: Mapping[str, File]) -> list[RowError]:
    """Copy a row's values onto ``item`` and validate it; return the problems found."""
    errors: list[RowError] = []
    values: dict[str, str] = {}
    for name in STRING_FIELDS:
        value = _as_text(row.data.get(name))
        if value is None:
            errors.append(RowError(row.line, name, "Enter a text value."))
        else:
            values[name] = value if name == "text" else value.strip()
    metadata = row.data.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        errors.append(RowError(row.line, "metadata", "Enter a JSON object."))
    if errors:
        return errors
    extra = {key: value for key, value in row.data.items() if key not in ITEM_KEYS}
    item.external_id = values["external_id"]
    item.kind = values["kind"] or Item.Kind.TEXT
    item.text = values["text"]
    item.url = values["url"]
    item.metadata = {**metadata, **extra}
    if values["media"]:
        upload = files.get(values["media"])
        if upload is None:
            return [RowError(row.line, "media", f"No uploaded file named {values['media']!r}.")]
        try:
            item.media = stimulus_file(upload, kind=item.kind)
        except ValidationError as exc:
            return [RowError(row.line, "media", message) for message in exc.messages]
    try:
        item.full_clean(
            exclude=["study", "position"], validate_unique=False, validate_constraints=False
        )
    except ValidationError as exc:
        return [
            RowError(row.line, "" if name == NON_FIELD_ERRORS else name, message)
            for name, messages in exc.message_dict.items()
            for message in messages
        ]
    return []


def _text_lines(stream: IO[bytes] | IO[str]) -> Iterator[str]:
    """Lines of a text or UTF-8 byte stream, a leading BOM removed; decoded one line at a time."""
    lines = iter(stream)
    first = next(lines, None)
    if isinstance(first, bytes):
        yield first.decode().removeprefix(_BOM)
        for raw in lines:
            yield raw.decode()  # type: ignore[union-attr]
    elif first is not None:
        yield first.removeprefix(_BOM)
        yield from lines  # type: ignore[misc]


def _broken_row(line: int, message: str, *, field: str = "", data: dict | None = None) -> RawRow:
    return RawRow(line, data or {}, (RowError(line, field, message),))


def _csv_rows(stream: IO[bytes] | IO[str]) -> Iterator[RawRow]:
    reader = csv.reader(_text_lines(stream))
    try:
        header = [name.strip() for name in next(reader, [])]
    except UnicodeDecodeError:
        raise ItemImportError([RowError(1, "", "The file is not UTF-8 text.")]) from None
    if "external_id" not in header:
        raise ItemImportError(
            [RowError(1, "external_id", "The header row needs an external_id column.")]
        )
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise ItemImportError([RowError(1, repeated[0], "This column appears twice.")])
    line = reader.line_num + 1
    try:
        for cells in reader:
            start, line = line, reader.line_num + 1
            if any(cell.strip() for cell in cells):
                yield _csv_row(start, header, cells)
    except UnicodeDecodeError:
        yield _broken_row(line, "The file is not UTF-8 text.")
    except csv.Error as exc:
        yield _broken_row(line, f"Not valid CSV: {exc}.")


def _csv_row(line: int, header: list[str], cells: list[str]) -> RawRow:
    if len(cells) > len(header):
        return _broken_row(line, f"{len(cells)} cells but the header names {len(header)} columns.")
    data: dict[str, Any] = {
        name: cell for name, cell in zip(header, cells, strict=False) if cell != ""
    }
    if "metadata" in data:
        try:
            data["metadata"] = json.loads(data["metadata"])
        except json.JSONDecodeError as exc:
            return _broken_row(line, f"Not valid JSON: {exc.msg}.", field="metadata", data=data)
    return RawRow(line, data)


def _jsonl_rows(stream: IO[bytes] | IO[str]) -> Iterator[RawRow]:
    line = 0
    try:
        for line, text in enumerate(_text_lines(stream), start=1):
            if not text.strip():
                continue
            if len(text) > MAX_LINE_CHARS:
                yield _broken_row(
                    line, f"A line of {len(text):,} characters; the limit is {MAX_LINE_CHARS:,}."
                )
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                yield _broken_row(line, f"Not valid JSON: {exc.msg}.")
                continue
            except RecursionError:
                yield _broken_row(line, "Not valid JSON here: nested too deeply.")
                continue
            if isinstance(data, dict):
                yield RawRow(line, data)
            else:
                yield _broken_row(line, "Each line must hold one JSON object.")
    except UnicodeDecodeError:
        yield _broken_row(line + 1, "The file is not UTF-8 text.")


def _parquet_rows(stream: IO[bytes] | IO[str]) -> Iterator[RawRow]:
    """Rows of a Parquet file (a seekable binary stream), numbered from 1, read in batches.

    Typed columns come as Python values (numbers are written out by the row validation);
    ``metadata`` may be a struct or JSON text; timestamps among the extra columns are kept in
    ``metadata`` as ISO 8601 text.
    """
    limit = settings.UPLOAD_MAX_IMPORT_BYTES
    try:
        rows = read_parquet(stream, max_bytes=limit)  # type: ignore[arg-type]
        first = next(rows, None)
    except (pa.ArrowException, OSError) as exc:
        raise ItemImportError([RowError(1, "", f"Not a Parquet file: {exc}.")]) from None
    except TooLargeError as exc:
        message = (
            f"The file holds {filesizeformat(exc.size)} once decompressed; an item file may hold "
            f"{filesizeformat(limit)} (UPLOAD_MAX_IMPORT_BYTES)."
        )
        raise ItemImportError([RowError(1, "", message)]) from None
    if first is not None and "external_id" not in first:
        raise ItemImportError([RowError(1, "external_id", "The file needs an external_id column.")])
    for line, data in enumerate(itertools.chain([first] if first else [], rows), start=1):
        row = {
            key: value.isoformat() if isinstance(value, datetime | date) else value
            for key, value in data.items()
            if value is not None
        }
        if isinstance(row.get("metadata"), str):
            try:
                row["metadata"] = json.loads(row["metadata"])
            except json.JSONDecodeError as exc:
                yield _broken_row(line, f"Not valid JSON: {exc.msg}.", field="metadata", data=row)
                continue
        yield RawRow(line, row)
