"""Raw annotation exports: CSV and JSON Lines content, current vs history, streaming."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.test import AsyncRequestFactory, RequestFactory

from apps.annotations.exporting import (
    EXPORT_COLUMNS,
    ROWS_PER_CHUNK,
    annotation_export_rows,
    export_response,
    stream_csv,
    stream_jsonl,
)
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotation_undo_last, annotations_submit

pytestmark = pytest.mark.django_db


def answer(study, user, label: str, *, ms: int = 900):
    assignment = assignment_next(annotator=user, study=study)
    annotations_submit(
        annotator=user,
        assignment=assignment,
        answers={study.questions.get(): {"label": label}},
        idempotency_key=uuid.uuid4(),
        time_spent_ms=ms,
    )
    return assignment


@pytest.fixture
def answered(study_setup):
    """ann0 answers two items and changes the first; ann1 answers one and retracts it."""
    study, (ann0, ann1, _) = study_setup
    first = answer(study, ann0, "positive")
    answer(study, ann0, "neutral")
    annotations_submit(
        annotator=ann0,
        assignment=first,
        answers={study.questions.get(): "negative"},
        idempotency_key=uuid.uuid4(),
        time_spent_ms=300,
    )
    answer(study, ann1, "positive")
    annotation_undo_last(annotator=ann1, study=study, idempotency_key=uuid.uuid4())
    return study, ann0, ann1, first.item


def test_current_rows_hold_each_live_answer_once(answered):
    study, ann0, _, first_item = answered
    rows = list(annotation_export_rows(study=study))
    assert [(r["annotator"], r["label"], r["revision"]) for r in rows] == [
        (ann0.username, "negative", 2),
        (ann0.username, "neutral", 1),
    ]
    row = rows[0]
    assert set(row) == set(EXPORT_COLUMNS)
    assert row["study"] == study.pk
    assert (row["question"], row["item"], row["round"]) == ("sentiment", first_item.external_id, 1)
    assert row["value"] == {"label": "negative"}
    assert (row["time_spent_ms"], row["source"]) == (300, "ui")
    assert row["created_at"].tzinfo is not None


def test_history_has_every_revision_including_retractions(answered):
    study, ann0, ann1, _ = answered
    rows = list(annotation_export_rows(study=study, include_history=True))
    assert [(r["annotator"], r["revision"], r["label"], r["value"]) for r in rows] == [
        (ann0.username, 1, "positive", {"label": "positive"}),
        (ann0.username, 2, "negative", {"label": "negative"}),
        (ann0.username, 1, "neutral", {"label": "neutral"}),
        (ann1.username, 1, "positive", {"label": "positive"}),
        (ann1.username, 2, None, None),
    ]


def test_csv_has_a_header_json_values_and_empty_cells_for_none(answered):
    study, *_ = answered
    text = "".join(stream_csv(annotation_export_rows(study=study, include_history=True)))
    records = list(csv.DictReader(io.StringIO(text)))
    assert tuple(records[0]) == EXPORT_COLUMNS
    assert json.loads(records[0]["value"]) == {"label": "positive"}
    retraction = records[-1]
    assert (retraction["label"], retraction["value"], retraction["time_spent_ms"]) == ("", "", "")


def test_jsonl_has_one_object_per_line(answered):
    study, *_ = answered
    lines = "".join(stream_jsonl(annotation_export_rows(study=study))).splitlines()
    assert [json.loads(line)["label"] for line in lines] == ["negative", "neutral"]


def test_streams_come_in_chunks_of_bounded_size():
    rows = (
        {"study": 1, "item": f"i{n}", "value": {"label": "x"}}
        for n in range(2 * ROWS_PER_CHUNK + 3)
    )
    chunks = list(stream_csv(rows))
    assert len(chunks) == 3
    assert chunks[0].count("\n") == ROWS_PER_CHUNK  # the header is the first chunk's first line
    lines = list(stream_jsonl({"n": n} for n in range(ROWS_PER_CHUNK + 1)))
    assert [chunk.count("\n") for chunk in lines] == [ROWS_PER_CHUNK, 1]


def test_export_rows_are_read_lazily(answered, django_assert_num_queries):
    study, *_ = answered
    with django_assert_num_queries(0):
        rows = annotation_export_rows(study=study, include_history=True)
    with django_assert_num_queries(1):
        assert len(list(rows)) == 5


def test_export_response_streams_a_named_csv_download(answered):
    study, *_ = answered
    response = export_response(request=RequestFactory().get("/"), study=study, fmt="csv")
    assert response.streaming
    assert not response.is_async
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="study-{study.pk}-annotations.csv"'
    )
    body = b"".join(response.streaming_content).decode()
    assert body.splitlines()[0] == ",".join(EXPORT_COLUMNS)
    assert len(body.splitlines()) == 3


def test_export_response_is_asynchronous_under_asgi(answered):
    study, *_ = answered
    response = export_response(
        request=AsyncRequestFactory().get("/"), study=study, fmt="jsonl", include_history=True
    )
    assert response.is_async
    assert response["Content-Disposition"].endswith('-annotations-history.jsonl"')

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    lines = async_to_sync(collect)().decode().splitlines()
    assert len(lines) == 5


def test_export_response_refuses_unknown_formats(answered):
    study, *_ = answered
    with pytest.raises(ValidationError, match="Unknown export format"):
        export_response(request=RequestFactory().get("/"), study=study, fmt="xlsx")
