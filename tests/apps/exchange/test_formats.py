"""The three writers over the same rows: CSV, JSON Lines and a streamed, typed Parquet file."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError

from apps.exchange.formats import Column, encode, parquet_bytes, read_parquet

COLUMNS = (
    Column("n", "int"),
    Column("name", "str"),
    Column("score", "float"),
    Column("at", "timestamp"),
    Column("value", "json"),
    Column("samples", "floats"),
    Column("ok", "bool"),
)
AT = datetime(2026, 3, 1, 12, 30, 15, 250_000, tzinfo=UTC)


def rows(n: int = 3) -> list[dict]:
    return [
        {
            "n": k,
            "name": f"=item {k}" if k == 0 else f"item {k}",
            "score": float("nan") if k == 1 else k / 3,
            "at": AT,
            "value": {"label": "joy"} if k else None,
            "samples": [0.5, -0.25, float(k)],
            "ok": k % 2 == 0,
        }
        for k in range(n)
    ]


def parquet_of(data: list[dict], **options) -> bytes:
    return b"".join(encode(data, columns=COLUMNS, fmt="parquet", **options))


def test_parquet_columns_are_typed_and_round_trip_through_pandas():
    data = rows()
    table = pq.read_table(io.BytesIO(parquet_of(data)))
    assert table.schema.field("n").type == pa.int64()
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("samples").type == pa.list_(pa.float32())
    frame = pd.read_parquet(io.BytesIO(parquet_of(data)))
    assert frame["n"].tolist() == [0, 1, 2]
    assert frame["name"].tolist() == ["=item 0", "item 1", "item 2"]  # no CSV quoting here
    assert frame["score"].isna().tolist() == [False, True, False]
    assert frame["score"][2] == pytest.approx(2 / 3)
    assert frame["at"][0] == pd.Timestamp(AT)
    assert [None if pd.isna(v) else json.loads(v) for v in frame["value"]] == [
        None,
        {"label": "joy"},
        {"label": "joy"},
    ]
    assert frame["samples"][2].tolist() == [0.5, -0.25, 2.0]
    assert frame["ok"].tolist() == [True, False, True]


def test_csv_and_jsonl_write_the_same_rows_as_text():
    data = rows()
    text = b"".join(encode(data, columns=COLUMNS, fmt="csv")).decode()
    records = list(csv.DictReader(io.StringIO(text)))
    assert records[0]["name"] == "'=item 0"  # formula injection neutralised
    assert records[1]["score"] == ""  # NaN
    assert records[2]["score"] == "0.666667"
    assert records[0]["at"] == "2026-03-01T12:30:15.250000+00:00"
    assert json.loads(records[1]["value"]) == {"label": "joy"}
    assert json.loads(records[2]["samples"]) == [0.5, -0.25, 2.0]
    lines = b"".join(encode(data, columns=COLUMNS, fmt="jsonl")).decode().splitlines()
    first = json.loads(lines[0])
    assert first["at"] == "2026-03-01T12:30:15.250000+00:00"
    assert first["value"] is None


def test_parquet_is_written_one_row_group_at_a_time():
    data = rows(25)
    chunks = list(parquet_bytes(data, columns=COLUMNS, rows_per_group=10))
    assert len(chunks) == 4  # three groups (10, 10, 5), then the footer
    assert all(chunks)
    parquet = pq.ParquetFile(io.BytesIO(b"".join(chunks)))
    assert [parquet.metadata.row_group(k).num_rows for k in range(3)] == [10, 10, 5]


def test_parquet_rows_are_pulled_lazily_one_group_at_a_time():
    pulled = []

    def counted():
        for row in rows(25):
            pulled.append(row["n"])
            yield row

    chunks = parquet_bytes(counted(), columns=COLUMNS, rows_per_group=10)
    next(chunks)
    assert len(pulled) == 10


def test_same_rows_give_the_same_bytes_and_metadata_is_kept():
    assert parquet_of(rows()) == parquet_of(rows())
    table = pq.read_table(io.BytesIO(parquet_of(rows(), metadata={"origin": "studio"})))
    assert table.schema.metadata[b"origin"] == b"studio"


def test_an_empty_export_still_has_the_schema():
    table = pq.read_table(io.BytesIO(parquet_of([])))
    assert table.num_rows == 0
    assert table.schema.names == [column.name for column in COLUMNS]


def test_read_parquet_gives_python_values_back():
    back = list(read_parquet(io.BytesIO(parquet_of(rows(3))), batch_size=2))
    assert [row["n"] for row in back] == [0, 1, 2]
    assert back[0]["at"] == AT
    assert back[2]["samples"] == [0.5, -0.25, 2.0]


def test_unknown_format_is_refused():
    with pytest.raises(ValidationError, match="Unknown export format"):
        encode(rows(), columns=COLUMNS, fmt="xlsx")
