"""Item import from Parquet: the same row validation as CSV and JSON Lines, typed columns."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from apps.items.importing import ItemImportError, format_for_name
from apps.items.services import items_import
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


def parquet(table: pa.Table) -> io.BytesIO:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    buffer.seek(0)
    return buffer


def items_table() -> pa.Table:
    return pa.table(
        {
            "external_id": pa.array([101, 102], pa.int64()),
            "text": ["A first sentence.", "A second one."],
            "metadata": pa.array(
                [{"source": "forum", "votes": 3}, None],
                pa.struct([("source", pa.string()), ("votes", pa.int32())]),
            ),
            "difficulty": [0.25, 0.75],
            "collected_at": pa.array(
                [datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)] * 2, pa.timestamp("us", tz="UTC")
            ),
        }
    )


def test_parquet_items_are_imported_with_typed_columns():
    study = StudyFactory()
    summary = items_import(study=study, stream=parquet(items_table()), fmt="parquet")
    assert summary.created == 2
    first, second = study.items.order_by("position")
    assert (first.external_id, first.text, first.kind) == ("101", "A first sentence.", "text")
    assert first.metadata == {
        "source": "forum",
        "votes": 3,
        "difficulty": 0.25,
        "collected_at": "2026-01-02T03:04:05+00:00",
    }
    assert second.metadata == {"difficulty": 0.75, "collected_at": "2026-01-02T03:04:05+00:00"}


def test_parquet_rows_are_validated_like_the_others_and_named_by_row_number():
    study = StudyFactory()
    table = pa.table({"external_id": ["a", "a", "b"], "kind": ["text", "text", "hologram"]})
    with pytest.raises(ItemImportError) as caught:
        items_import(study=study, stream=parquet(table), fmt="parquet")
    messages = caught.value.messages
    assert any(m.startswith("line 2, field external_id: Duplicate of line 1") for m in messages)
    assert any(m.startswith("line 3, field kind") for m in messages)
    assert not study.items.exists()


def test_a_file_that_is_not_parquet_or_lacks_external_id_is_refused():
    study = StudyFactory()
    with pytest.raises(ItemImportError, match="Not a Parquet file"):
        items_import(study=study, stream=io.BytesIO(b"external_id\nx\n"), fmt="parquet")
    with pytest.raises(ItemImportError, match="needs an external_id column"):
        items_import(study=study, stream=parquet(pa.table({"text": ["x"]})), fmt="parquet")


def test_the_command_reads_parquet_by_its_extension(tmp_path: Path):
    study = StudyFactory()
    path = tmp_path / "items.parquet"
    pq.write_table(items_table(), path)
    assert format_for_name(path.name) == "parquet"
    out = io.StringIO()
    call_command("import_items", str(study.pk), str(path), stdout=out)
    assert out.getvalue().strip() == "created 2, updated 0"


def test_the_import_page_takes_a_parquet_upload(client):
    study = StudyFactory()
    client.force_login(study.created_by)
    upload = SimpleUploadedFile("items.parquet", parquet(items_table()).getvalue())
    response = client.post(reverse("items:import", args=[study.pk]), {"file": upload}, follow=True)
    assert "2 new and 0 updated items" in response.content.decode()
    assert sorted(study.items.values_list("external_id", flat=True)) == ["101", "102"]
