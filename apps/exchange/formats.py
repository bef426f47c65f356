"""The three writers of every export (CSV, JSON Lines, Parquet) over the same typed rows.

An export is a row generator (dicts with Python values: ``int``, ``float``, ``str``, ``bool``,
aware ``datetime``, ``dict``/``list`` for JSON, a list or array of floats for samples) plus a
description of its columns (:class:`Column`). :func:`encode` turns the rows into the bytes of a
file in constant memory, whatever the format:

- **CSV** (:func:`csv_text`): a header, then one line per row through the one CSV writer of the
  site (:mod:`core.csv_files`, formula injection neutralised); JSON values and lists as JSON,
  datetimes as ISO 8601, floats with six significant digits, ``None`` and NaN as empty cells.
- **JSON Lines** (:func:`jsonl_text`): one object per row; datetimes as ISO 8601, NaN as null.
- **Parquet** (:func:`parquet_bytes`): typed columns (:data:`ARROW_TYPES`), written one row
  group of :data:`ROWS_PER_GROUP` rows at a time through ``pyarrow.parquet.ParquetWriter``, each
  group's bytes handed on as soon as it is written, so a 500,000-row export never holds more than
  one group (``benchmarks/export_parquet.py`` measures it). The same rows give the same bytes.

:func:`download` wraps the chunks in a streamed HTTP response (asynchronous under ASGI), and
:func:`read_parquet` reads a Parquet file back one batch at a time (the item import's reader).
"""

from __future__ import annotations

import io
import itertools
import json
import math
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import IO, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from core.csv_files import csv_chunks

FORMATS = ("csv", "jsonl", "parquet")
CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
ENCODING = "utf-8"  # of the text formats
ROWS_PER_CHUNK = 500  # rows per chunk of CSV / JSON Lines text
ROWS_PER_GROUP = 10_000  # rows per Parquet row group (and per chunk of Parquet bytes)

#: Column type name -> its Arrow type. ``json`` is JSON text (answers of different shapes);
#: ``floats`` a list of 32-bit floats (trace samples at the analysis rate).
ARROW_TYPES: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "int32": pa.int32(),
    "float": pa.float64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "json": pa.string(),
    "floats": pa.list_(pa.float32()),
}


class Column(NamedTuple):
    """One column of an export: its name and type (a key of :data:`ARROW_TYPES`)."""

    name: str
    type: str


def check_format(fmt: str) -> None:
    """Raise ``ValidationError`` (field ``format``) unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise ValidationError(
            {"format": f"Unknown export format {fmt!r}; use {', '.join(FORMATS)}."}
        )


def encode(
    rows: Iterable[Mapping[str, Any]],
    *,
    columns: Sequence[Column],
    fmt: str,
    metadata: Mapping[str, str] | None = None,
) -> Iterator[bytes]:
    """The file of ``rows`` in format ``fmt``, as consecutive byte chunks.

    Parameters
    ----------
    rows : iterable of mappings
        The rows; keys not in ``columns`` are ignored by CSV and Parquet, missing ones are
        ``None``. JSON Lines writes each mapping whole.
    columns : sequence of Column
        Names (CSV header, Parquet schema) and types (Parquet).
    fmt : {"csv", "jsonl", "parquet"}
    metadata : mapping, optional
        Parquet only: key-value pairs of the schema metadata (e.g. ``huggingface``).
    """
    check_format(fmt)
    if fmt == "parquet":
        return parquet_bytes(rows, columns=columns, metadata=metadata)
    names = [column.name for column in columns]
    text = csv_text(rows, columns=names) if fmt == "csv" else jsonl_text(rows)
    return (chunk.encode(ENCODING) for chunk in text)


def csv_text(rows: Iterable[Mapping[str, Any]], *, columns: Sequence[str]) -> Iterator[str]:
    """CSV text in chunks of :data:`ROWS_PER_CHUNK` rows: the header ``columns``, then ``rows``."""
    lines = itertools.chain(
        [list(columns)], ([csv_cell(row.get(name)) for name in columns] for row in rows)
    )
    return csv_chunks(lines, rows_per_chunk=ROWS_PER_CHUNK)


def csv_cell(value: Any) -> Any:
    """One value as a CSV cell: 1/0 for booleans, JSON for dicts and lists, ISO 8601 for
    datetimes, ``.6g`` for floats, empty for ``None`` and NaN; anything else unchanged."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return value


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """JSON Lines text in chunks of :data:`ROWS_PER_CHUNK` rows, one object per row."""
    buffer = io.StringIO()
    for count, row in enumerate(rows, start=1):
        buffer.write(json.dumps(row, ensure_ascii=False, default=_json_default))
        buffer.write("\n")
        if count % ROWS_PER_CHUNK == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def arrow_schema(
    columns: Sequence[Column], *, metadata: Mapping[str, str] | None = None
) -> pa.Schema:
    """The Arrow schema of ``columns`` (every column nullable), with ``metadata``."""
    return pa.schema(
        [pa.field(column.name, ARROW_TYPES[column.type]) for column in columns],
        metadata=dict(metadata) if metadata else None,
    )


def parquet_bytes(
    rows: Iterable[Mapping[str, Any]],
    *,
    columns: Sequence[Column],
    metadata: Mapping[str, str] | None = None,
    rows_per_group: int = ROWS_PER_GROUP,
) -> Iterator[bytes]:
    """A Parquet file of ``rows``, written and handed on one row group at a time.

    The rows are read ``rows_per_group`` at a time into typed Arrow arrays, written as one row
    group, and the bytes written so far are yielded; the footer comes last. A file with no rows
    still has the schema. Peak memory is one group of rows and its arrays.
    """
    schema = arrow_schema(columns, metadata=metadata)
    sink = _Sink()
    writer = pq.ParquetWriter(sink, schema)
    try:
        for group in _column_groups(rows, columns, rows_per_group):
            arrays = [
                pa.array(values, type=field.type)
                for values, field in zip(group, schema, strict=True)
            ]
            writer.write_table(
                pa.Table.from_arrays(arrays, schema=schema), row_group_size=rows_per_group
            )
            yield sink.drain()
    finally:
        writer.close()
    yield sink.drain()


def _column_groups(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], size: int
) -> Iterator[list[list[Any]]]:
    """The rows ``size`` at a time as one list of values per column (the rows themselves are
    not kept: a column of values takes a fraction of the memory of as many dicts)."""
    group: list[list[Any]] = [[] for _ in columns]
    count = 0
    for count, row in enumerate(rows, start=1):
        for values, column in zip(group, columns, strict=True):
            values.append(_arrow_value(row.get(column.name), column.type))
        if count % size == 0:
            yield group
            group = [[] for _ in columns]
    if count % size:
        yield group


def _arrow_value(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "json":
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    if kind == "float" and isinstance(value, float) and math.isnan(value):
        return None
    return value


class _Sink:
    """A write-only file object that keeps what is written until :meth:`drain` takes it."""

    closed = False

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._position = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        """Nothing to flush: the bytes wait for :meth:`drain`."""

    def close(self) -> None:
        """Keep the bytes: the last :meth:`drain` takes the footer after the writer closes."""

    def drain(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


class TooLargeError(ValueError):
    """A file that holds more than its limit once decompressed (``size`` bytes at least)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes once decompressed")
        self.size = size


def read_parquet(
    stream: IO[bytes], *, max_bytes: int | None = None, batch_size: int = 1000
) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file as dicts of Python values, read one batch at a time.

    ``stream`` must be seekable (the schema is at the end of the file). Timestamps come back
    as aware ``datetime``, lists as lists, structs as dicts. Raises ``ValueError`` (from
    ``pyarrow.ArrowInvalid``) if the file is not Parquet, and :class:`TooLargeError` when the data
    holds more than ``max_bytes`` decompressed: a small compressed file can decompress to
    gigabytes (a 7 KB file of zstd held a 200 MB text). The footer's uncompressed column sizes
    are checked before any row is read, the batches' sizes as they are read.
    """
    parquet = pq.ParquetFile(stream)
    if max_bytes is not None:
        meta = parquet.metadata
        declared = sum(
            meta.row_group(g).column(c).total_uncompressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        if declared > max_bytes:
            raise TooLargeError(declared)
    read = 0
    for batch in parquet.iter_batches(batch_size=batch_size):
        read += batch.nbytes
        if max_bytes is not None and read > max_bytes:
            raise TooLargeError(read)
        yield from batch.to_pylist()


def download(
    chunks: Iterator[bytes], *, request: HttpRequest, fmt: str, filename: str
) -> StreamingHttpResponse:
    """Stream ``chunks`` as an attachment named ``filename`` of type ``CONTENT_TYPES[fmt]``.

    Under ASGI (uvicorn) the body is an asynchronous iterator that pulls each chunk from a worker
    thread (the rows read the database), under WSGI a plain one, so neither server buffers the
    whole file. ``request`` may be a Django or a DRF request.
    """
    django_request = getattr(request, "_request", request)  # DRF wraps the HttpRequest
    body = _async_chunks(chunks) if isinstance(django_request, ASGIRequest) else chunks
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


async def _async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Pull a synchronous (database-reading) iterator chunk by chunk from a worker thread."""
    pull = sync_to_async(next, thread_sensitive=True)
    while (chunk := await pull(chunks, None)) is not None:
        yield chunk


def npy_header(entry: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of a ``.npy`` stream, read from its header alone.

    Read before loading, they tell what loading would allocate (a 100-byte file may declare
    an array of 10^12 numbers). Raises ``ValueError`` for what is not a ``.npy`` header.
    """
    version = np.lib.format.read_magic(entry)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(entry)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(entry)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not read")
    return shape, dtype
