"""Reading and validating a model run's uploads (CSV, JSON Lines or NPZ) for the services.

Three files make a run; every one names items by ``external_id`` and annotators by username,
as the annotation exports do:

* **predictions** (required): ``item``, ``annotator`` and, for a categorical question,
  ``label`` (a label key of the question) or, for a continuous question, ``trace`` (a list of
  numbers at the question's analysis rate, as long as the annotators' traces of the item); one
  row per (item, annotator) predicted. A categorical question's run may instead predict per
  **item** (a general model, the same for every annotator): no ``annotator`` column, and the
  label probabilities as a ``probabilities`` object ``{"label key": p}`` (a JSON cell in a CSV)
  or as one ``p_<label key>`` column (NPZ: array) per label; ``label`` is then optional (the
  most probable label if absent). Probabilities lie in [0, 1] and sum to 1 (within
  :data:`PROBABILITY_TOLERANCE`; stored rescaled to sum exactly 1, labels left out are 0).
* **features** / **attention** (optional): ``annotator``, ``vector`` (a list of numbers) and
  ``item``. Give ``item`` on every row (per-item vectors, averaged here into each annotator's
  mean, Zhang et al. Eqs. 5-6) or on none (one already averaged vector per annotator).

CSV files have a header row; a CSV ``vector`` or ``trace`` cell holds a JSON list
(``"[0.1, 0.2]"``). NPZ files hold one array per field (``item``, ``annotator`` and ``label``
as string arrays of equal length; ``vector`` and ``trace`` as 2-D float arrays), and their
"line" is the row number from 1.

Text files are read one row at a time. Problems are collected (up to ``MAX_ERRORS``) in the
item import's style, :class:`~apps.items.importing.RowError` naming line and field, and raised
together as one :class:`UploadError`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.template.defaultfilters import filesizeformat
from numpy.typing import NDArray

from apps.exchange.formats import npy_header
from apps.items.importing import MAX_ERRORS, ItemImportError, RawRow, RowError, parse_items
from core.limits import MAX_NPZ_ENTRIES, MAX_VECTOR_LENGTH

FORMATS = ("csv", "jsonl", "npz")
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".npz": "npz"}
PREDICTION_FIELDS = ("item", "annotator", "label")
ITEM_PREDICTION_FIELDS = ("item",)
PROBABILITIES = "probabilities"
PROBABILITY_PREFIX = "p_"
#: How far a row's probabilities may sum from 1 (rounding in a CSV written to 3 decimals).
PROBABILITY_TOLERANCE = 0.01
TRACE_FIELDS = ("item", "annotator", "trace")
VECTOR_FIELDS = ("annotator", "vector")


class UploadError(ItemImportError):
    """Every problem found in one uploaded file, as :class:`RowError` tuples in ``errors``."""


def upload_format(name: str) -> str:
    """The upload format (``"csv"``, ``"jsonl"`` or ``"npz"``) implied by a file name."""
    fmt = _EXTENSIONS.get(PurePath(name).suffix.lower())
    if fmt is None:
        raise ValidationError(
            f"Cannot tell the format of {name!r}: use .csv, .jsonl, .ndjson or .npz."
        )
    return fmt


def read_rows(
    stream: IO[bytes] | IO[str], *, fmt: str, required: tuple[str, ...], max_rows: int
) -> Iterator[RawRow]:
    """Rows of an upload, one at a time; a missing column or array raises :class:`UploadError`.

    ``required`` names the CSV columns or NPZ arrays that must be present (JSON Lines rows are
    checked one by one in validation). An NPZ is refused from its arrays' headers, before any
    is loaded, when an array has more than ``max_rows`` rows (:attr:`Axes.max_rows`) or they
    hold more than ``settings.UPLOAD_MAX_MODEL_RUN_BYTES`` uncompressed (:func:`npz_check`).
    """
    if fmt == "jsonl":
        return parse_items(stream, fmt="jsonl")
    if fmt == "csv":
        return _csv_rows(stream, required)
    if fmt == "npz":
        npz_check(stream, max_rows=max_rows)  # type: ignore[arg-type]
        return _npz_rows(stream, required)
    raise ValidationError(f"Unknown format {fmt!r}; use csv, jsonl or npz.")


@dataclass(frozen=True)
class Axes:
    """What an upload is checked against: the study's items, annotators and the labels."""

    items: Mapping[str, int]  # external_id -> item id
    annotators: Mapping[str, int]  # username -> user id
    labels: Mapping[str, int]  # label key -> label id
    question_key: str = ""

    @property
    def max_rows(self) -> int:
        """The most rows a file can have: one per (item, annotator)."""
        return len(self.items) * len(self.annotators)


@dataclass
class _Collector:
    """Errors of one file, stopping at ``MAX_ERRORS``."""

    errors: list[RowError] = field(default_factory=list)

    def add(self, errors: Iterable[RowError]) -> None:
        self.errors += errors

    @property
    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS

    def raise_if_any(self, rows: Iterator[RawRow]) -> None:
        if self.errors:
            truncated = len(self.errors) > MAX_ERRORS or (
                self.full and next(rows, None) is not None
            )
            raise UploadError(self.errors[:MAX_ERRORS], truncated=truncated)


ValueCleaner = Callable[[RawRow, int], tuple[Any, RowError | None]]
"""Turns a row's predicted value (for a known item id) into what is stored, or an error."""


def label_value(axes: Axes) -> ValueCleaner:
    """Cleaner of categorical predictions: ``label`` must be a label key of the question."""

    def clean(row: RawRow, item: int) -> tuple[Any, RowError | None]:
        key = _text(row.data.get("label"))
        label = axes.labels.get(key or "")
        if label is not None:
            return label, None
        choices = ", ".join(axes.labels)
        message = (
            f"{key!r} is not a label of {axes.question_key!r}; choose from {choices}."
            if key
            else "Give the predicted label key."
        )
        return None, RowError(row.line, "label", message)

    return clean


def trace_value(lengths: Mapping[int, int], *, rate_hz: float) -> ValueCleaner:
    """Cleaner of trace predictions: ``trace``, finite numbers at the question's analysis rate,
    as many as the annotators' traces of the item have (``lengths``; unchecked for items no
    one has traced yet)."""

    def clean(row: RawRow, item: int) -> tuple[Any, RowError | None]:
        trace, message = _vector(row.data.get("trace"))
        if not message and trace.size < 2:
            message = "Give at least two samples."
        expected = lengths.get(item)
        if not message and expected is not None and trace.size != expected:
            message = (
                f"{trace.size} samples; the annotators' traces of this item have {expected} "
                f"(at {rate_hz:g} Hz)."
            )
        return (None, RowError(row.line, "trace", message)) if message else (trace, None)

    return clean


def clean_predictions(
    rows: Iterable[RawRow], *, axes: Axes, value: ValueCleaner
) -> list[tuple[int, int, Any]]:
    """Validate prediction rows into (item id, user id, cleaned value) triples.

    ``value`` cleans the predicted value (:func:`label_value`, :func:`trace_value`). Raises
    :class:`UploadError` naming every unknown item or annotator, bad value, missing field and
    repeated (item, annotator) pair, or an empty file.
    """
    rows = iter(rows)
    found = _Collector()
    first_line: dict[tuple[int, int], int] = {}
    out: list[tuple[int, int, Any]] = []
    for row in rows:
        errors = list(row.errors)
        if not errors:
            item, annotator, errors = _item_and_annotator(row, axes, item_required=True)
            cleaned, problem = value(row, item) if item is not None else (None, None)
            errors += [problem] if problem else []
            if not errors:
                key = (item, annotator)
                if key in first_line:
                    message = (
                        f"Duplicate of line {first_line[key]}; predict each item and annotator "
                        "once."
                    )
                    errors.append(RowError(row.line, "", message))
                else:
                    first_line[key] = row.line
                    out.append((item, annotator, cleaned))  # type: ignore[arg-type]
        found.add(errors)
        if found.full:
            break
    if not out and not found.errors:
        found.add([RowError(1, "", "The file holds no prediction.")])
    found.raise_if_any(rows)
    return out


def predicts_per_item(stream: IO[bytes] | IO[str], *, fmt: str) -> bool:
    """Whether a categorical predictions file predicts per item (:func:`clean_item_predictions`):
    it names no ``annotator`` column (CSV header, NPZ array, first JSON Lines row) and gives
    probabilities (a ``probabilities`` column or ``p_<label>`` columns). Reads the file's head
    and leaves ``stream`` where it was; an unreadable head says ``False`` (the per-annotator
    reading then reports it)."""
    fields = _head_fields(stream, fmt=fmt)
    has_probabilities = PROBABILITIES in fields or any(
        name.startswith(PROBABILITY_PREFIX) for name in fields
    )
    return "annotator" not in fields and has_probabilities


def _head_fields(stream: IO[bytes] | IO[str], *, fmt: str) -> set[str]:
    start = stream.tell()
    try:
        if fmt == "npz":
            with zipfile.ZipFile(stream) as archive:  # type: ignore[arg-type]
                return {name.removesuffix(".npy") for name in archive.namelist()}
        line: str | bytes = b""
        for line in stream:
            if line.strip():
                break
        text = line.decode("utf-8-sig") if isinstance(line, bytes) else line.lstrip("\ufeff")
        if fmt == "csv":
            return {name.strip() for name in next(csv.reader([text]), [])}
        head = json.loads(text)
        return set(head) if isinstance(head, dict) else set()
    except (*_NPZ_ERRORS, UnicodeDecodeError, csv.Error, RecursionError):
        return set()
    finally:
        stream.seek(start)


def clean_item_predictions(
    rows: Iterable[RawRow], *, axes: Axes
) -> list[tuple[int, int, dict[str, float] | None]]:
    """Validate per-item prediction rows into (item id, label id, probabilities) triples.

    ``probabilities`` maps every label key of the question (in scale order) to a probability
    (rescaled to sum 1), or is ``None`` for a row giving only its ``label``. Raises
    :class:`UploadError` naming every unknown item, unknown label key, probability outside
    [0, 1], sum away from 1, row naming an annotator, repeated item, or an empty file; nothing
    is returned (so nothing is written) unless every row is valid.
    """
    rows = iter(rows)
    found = _Collector()
    first_line: dict[int, int] = {}
    out: list[tuple[int, int, dict[str, float] | None]] = []
    for row in rows:
        errors = list(row.errors)
        if not errors:
            item, label, probabilities, errors = _item_prediction(row, axes)
            if not errors and item is not None and label is not None:
                if item in first_line:
                    message = f"Duplicate of line {first_line[item]}; predict each item once."
                    errors.append(RowError(row.line, "", message))
                else:
                    first_line[item] = row.line
                    out.append((item, label, probabilities))
        found.add(errors)
        if found.full:
            break
    if not out and not found.errors:
        found.add([RowError(1, "", "The file holds no prediction.")])
    found.raise_if_any(rows)
    return out


def _item_prediction(
    row: RawRow, axes: Axes
) -> tuple[int | None, int | None, dict[str, float] | None, list[RowError]]:
    """One per-item row: its item id, label id, probabilities and the problems."""
    errors: list[RowError] = []
    item = None
    item_name = _text(row.data.get("item"))
    if item_name:
        item = axes.items.get(item_name)
        if item is None:
            errors.append(RowError(row.line, "item", f"Unknown item {item_name!r}."))
    else:
        errors.append(RowError(row.line, "item", "Give the item's external_id."))
    if row.data.get("annotator") not in (None, ""):
        errors.append(
            RowError(
                row.line,
                "annotator",
                "Per-item predictions name no annotator (the file's first row has none).",
            )
        )
    probabilities, problems = _probabilities(row, axes)
    errors += problems
    key = _text(row.data.get("label"))
    label = axes.labels.get(key or "")
    if key and label is None:
        choices = ", ".join(axes.labels)
        message = f"{key!r} is not a label of {axes.question_key!r}; choose from {choices}."
        errors.append(RowError(row.line, "label", message))
    elif not key and probabilities is not None:
        label = axes.labels[max(probabilities, key=probabilities.__getitem__)]  # first maximum
    elif not key and not problems:
        message = "Give the label probabilities (or at least the predicted label)."
        errors.append(RowError(row.line, PROBABILITIES, message))
    return item, label, probabilities, errors


def _probabilities(row: RawRow, axes: Axes) -> tuple[dict[str, float] | None, list[RowError]]:
    """The row's probabilities over every label key (``None``: none given) and the problems:
    a ``probabilities`` object or ``p_<key>`` columns (not both)."""
    given: dict[str, Any] = {}
    source = {}  # label key -> the field that gave it (for the messages)
    raw = row.data.get(PROBABILITIES)
    columns = {
        name: value
        for name, value in row.data.items()
        if name.startswith(PROBABILITY_PREFIX) and value not in (None, "")
    }
    if raw not in (None, "") and columns:
        message = f"Give {PROBABILITIES} or p_<label> columns, not both."
        return None, [RowError(row.line, PROBABILITIES, message)]
    if raw not in (None, ""):
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except (json.JSONDecodeError, RecursionError):
                raw = None
        if not isinstance(raw, dict) or not raw:
            message = 'Give an object of label key -> probability, e.g. {"neutral": 0.7, ...}.'
            return None, [RowError(row.line, PROBABILITIES, message)]
        given = {str(key): value for key, value in raw.items()}
        source = dict.fromkeys(given, PROBABILITIES)
    else:
        given = {name.removeprefix(PROBABILITY_PREFIX): value for name, value in columns.items()}
        source = {key: PROBABILITY_PREFIX + key for key in given}
    if not given:
        return None, []
    errors: list[RowError] = []
    values: dict[str, float] = {}
    choices = ", ".join(axes.labels)
    for key, value in given.items():
        if key not in axes.labels:
            message = f"{key!r} is not a label of {axes.question_key!r}; choose from {choices}."
            errors.append(RowError(row.line, source[key], message))
            continue
        number = _number(value)
        if number is None or not 0.0 <= number <= 1.0:
            message = f"The probability of {key!r} is {value!r}; give a number from 0 to 1."
            errors.append(RowError(row.line, source[key], message))
            continue
        values[key] = number
    if errors:
        return None, errors
    total = math.fsum(values.values())
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        field_name = PROBABILITIES if raw not in (None, "") else ""
        message = (
            f"The probabilities sum to {total:.4g}; they must sum to 1 "
            f"(within {PROBABILITY_TOLERANCE:g})."
        )
        return None, [RowError(row.line, field_name, message)]
    return {key: values.get(key, 0.0) / total for key in axes.labels}, []


def _number(value: Any) -> float | None:
    """A probability cell as a finite float (CSV cells are text), or ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, int | float | np.integer | np.floating) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class MeanVectors:
    """Each annotator's mean vector (``vectors[k]`` for ``annotator_ids[k]``)."""

    annotator_ids: list[int]
    vectors: NDArray[np.float64]  # (n_annotators, dim)
    n_items: list[int]  # per-item vectors averaged; 0 for an already averaged upload


def clean_vectors(rows: Iterable[RawRow], *, axes: Axes) -> MeanVectors:
    """Validate feature or attention rows and average them per annotator (running sums).

    Raises :class:`UploadError` naming unknown items or annotators, vectors that are not a
    non-empty list of finite numbers or whose length differs from the first one, ``item`` given
    on some rows only, repeated rows, or an empty file.
    """
    rows = iter(rows)
    found = _Collector()
    dim: tuple[int, int] | None = None  # (length, line of the first vector)
    per_item: bool | None = None
    first_line: dict[tuple[int | None, int], int] = {}
    sums: dict[int, NDArray[np.float64]] = {}
    counts: dict[int, int] = {}
    for row in rows:
        errors = list(row.errors)
        if not errors:
            has_item = row.data.get("item") not in (None, "")
            if per_item is None:
                per_item = has_item
            elif has_item != per_item:
                errors.append(
                    RowError(
                        row.line,
                        "item",
                        "Give item on every row (per-item vectors) or on none (averaged vectors).",
                    )
                )
        if not errors:
            item, annotator, errors = _item_and_annotator(row, axes, item_required=False)
            vector, message = _vector(row.data.get("vector"))
            if message:
                errors.append(RowError(row.line, "vector", message))
            elif dim is None:
                dim = (vector.size, row.line)
            elif vector.size != dim[0]:
                message = f"{vector.size} numbers; the first vector (line {dim[1]}) has {dim[0]}."
                errors.append(RowError(row.line, "vector", message))
            if not errors:
                key = (item, annotator)
                if key in first_line:
                    what = "item and annotator" if per_item else "annotator"
                    message = f"Duplicate of line {first_line[key]}; one vector per {what}."
                    errors.append(RowError(row.line, "", message))
                else:
                    first_line[key] = row.line
                    sums[annotator] = sums.get(annotator, 0.0) + vector  # type: ignore[index]
                    counts[annotator] = counts.get(annotator, 0) + 1  # type: ignore[index]
        found.add(errors)
        if found.full:
            break
    if not sums and not found.errors:
        found.add([RowError(1, "", "The file holds no vector.")])
    found.raise_if_any(rows)
    ids = sorted(sums)
    return MeanVectors(
        annotator_ids=ids,
        vectors=np.array([sums[a] / counts[a] for a in ids]),
        n_items=[counts[a] if per_item else 0 for a in ids],
    )


def _text(value: Any) -> str | None:
    """A cell or JSON value as stripped text (numbers written out); ``None`` if neither."""
    if isinstance(value, int | float | np.integer) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else None


def _item_and_annotator(
    row: RawRow, axes: Axes, *, item_required: bool
) -> tuple[int | None, int | None, list[RowError]]:
    """The row's item and annotator ids (``None`` when absent or unknown) and the problems."""
    errors: list[RowError] = []
    item = None
    item_name = _text(row.data.get("item"))
    if item_name:
        item = axes.items.get(item_name)
        if item is None:
            errors.append(RowError(row.line, "item", f"Unknown item {item_name!r}."))
    elif item_required:
        errors.append(RowError(row.line, "item", "Give the item's external_id."))
    name = _text(row.data.get("annotator"))
    annotator = axes.annotators.get(name or "")
    if annotator is None:
        message = f"{name!r} is not an annotator of the study." if name else "Give the annotator."
        errors.append(RowError(row.line, "annotator", message))
    return item, annotator, errors


def _vector(value: Any) -> tuple[NDArray[np.float64], str]:
    """A vector value as floats, or an empty array and the reason it is not one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return np.empty(0), f"Not a JSON list of numbers: {exc.msg}."
        except RecursionError:
            return np.empty(0), "Not a JSON list of numbers: nested too deeply."
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list) or not value:
        return np.empty(0), "Give a non-empty list of numbers."
    if len(value) > MAX_VECTOR_LENGTH:
        return np.empty(0), f"{len(value):,} numbers; a vector holds at most {MAX_VECTOR_LENGTH:,}."
    bad = next(
        (j for j, v in enumerate(value) if isinstance(v, bool) or not isinstance(v, int | float)),
        None,
    )
    if bad is not None:
        return np.empty(0), f"Position {bad} is not a number."
    vector = np.asarray(value, dtype=np.float64)
    if not np.isfinite(vector).all():
        first = int(np.flatnonzero(~np.isfinite(vector))[0])
        return np.empty(0), f"Position {first} is {vector[first]}; give finite numbers."
    return vector, ""


def _csv_rows(stream: IO[bytes] | IO[str], required: tuple[str, ...]) -> Iterator[RawRow]:
    """CSV rows as dicts (empty cells left out); line numbers count the header as line 1."""
    text = (
        stream
        if isinstance(stream, io.TextIOBase)
        else io.TextIOWrapper(
            stream,  # type: ignore[arg-type]
            encoding="utf-8-sig",
            newline="",
        )
    )
    reader = csv.reader(text)
    try:
        header = [name.strip() for name in next(reader, [])]
    except UnicodeDecodeError:
        raise UploadError([RowError(1, "", "The file is not UTF-8 text.")]) from None
    missing = [name for name in required if name not in header]
    if missing:
        raise UploadError(
            [RowError(1, name, "The header row needs this column.") for name in missing]
        )
    line = reader.line_num + 1
    try:
        for cells in reader:
            start, line = line, reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) > len(header):
                message = f"{len(cells)} cells but the header names {len(header)} columns."
                yield RawRow(start, {}, (RowError(start, "", message),))
            else:
                yield RawRow(start, {k: v for k, v in zip(header, cells, strict=False) if v})
    except UnicodeDecodeError:
        yield RawRow(line, {}, (RowError(line, "", "The file is not UTF-8 text."),))
    except csv.Error as exc:
        yield RawRow(line, {}, (RowError(line, "", f"Not valid CSV: {exc}."),))


def npz_check(stream: IO[bytes], *, max_rows: int) -> None:
    """Refuse an NPZ from its entries' headers, before any array is loaded (or decompressed).

    Every entry must be a ``.npy`` array of numbers or text (no Python objects) with at most
    ``max_rows`` rows, and all together may hold at most ``settings.UPLOAD_MAX_MODEL_RUN_BYTES``
    once loaded (shape x item size). Raises :class:`UploadError` naming each entry refused,
    with its shape and dtype; leaves ``stream`` at its start.
    """
    limit = settings.UPLOAD_MAX_MODEL_RUN_BYTES
    problems: list[RowError] = []
    total = 0
    try:
        with zipfile.ZipFile(stream) as archive:
            entries = archive.infolist()
            if len(entries) > MAX_NPZ_ENTRIES:
                message = (
                    f"{len(entries):,} arrays; a model-run NPZ holds at most {MAX_NPZ_ENTRIES}."
                )
                raise UploadError([RowError(1, "", message)])
            for info in entries:
                name = info.filename.removesuffix(".npy")
                if name == info.filename:
                    problems.append(RowError(1, name, "Not a .npy array: an NPZ holds arrays."))
                    continue
                with archive.open(info) as entry:
                    shape, dtype = npy_header(entry)
                what = f"Array {name!r} holds {shape} {dtype}"
                size = math.prod(shape) * dtype.itemsize
                total += size
                if dtype.hasobject:
                    problems.append(RowError(1, name, f"{what}: Python objects are not read."))
                elif shape and shape[0] > max_rows:
                    message = f"{what}: more rows than items x annotators ({max_rows})."
                    problems.append(RowError(1, name, message))
                elif size > limit:
                    message = (
                        f"{what}: {filesizeformat(size)} once loaded; a model-run file may hold "
                        f"{filesizeformat(limit)}."
                    )
                    problems.append(RowError(1, name, message))
    except _NPZ_ERRORS as exc:
        raise _unreadable_npz(exc) from None
    finally:
        stream.seek(0)
    if not problems and total > limit:
        message = (
            f"The arrays hold {filesizeformat(total)} once loaded; a model-run file may hold "
            f"{filesizeformat(limit)}."
        )
        problems.append(RowError(1, "", message))
    if problems:
        raise UploadError(problems)


_NPZ_ERRORS = (OSError, ValueError, zipfile.BadZipFile, EOFError)


def _unreadable_npz(exc: Exception) -> UploadError:
    return UploadError([RowError(1, "", f"Not a readable .npz file of arrays: {exc}.")])


def _npz_rows(stream: IO[bytes] | IO[str], required: tuple[str, ...]) -> Iterator[RawRow]:
    """Rows of an NPZ archive's equally long arrays (no pickled objects are loaded)."""
    try:
        archive = np.load(stream, allow_pickle=False)  # type: ignore[arg-type]
        arrays = {name: archive[name] for name in archive.files}
    except _NPZ_ERRORS as exc:
        raise _unreadable_npz(exc) from None
    problems = [
        RowError(1, name, "The archive needs this array.")
        for name in required
        if name not in arrays
    ]
    lengths = {name: (arr.shape[0] if arr.ndim else -1) for name, arr in arrays.items()}
    if len(set(lengths.values())) > 1:
        sizes = ", ".join(f"{name} {n}" for name, n in sorted(lengths.items()))
        problems.append(RowError(1, "", f"The arrays differ in length: {sizes}."))
    if problems:
        raise UploadError(problems)
    n = next(iter(lengths.values()), 0)
    for i in range(max(n, 0)):
        yield RawRow(i + 1, {name: _npz_value(arr[i]) for name, arr in arrays.items()})


def _npz_value(value: Any) -> Any:
    """One NPZ cell as a plain Python value (a row of a 2-D array stays an array)."""
    if isinstance(value, np.ndarray):
        return value
    return value.item() if isinstance(value, np.generic) else value
