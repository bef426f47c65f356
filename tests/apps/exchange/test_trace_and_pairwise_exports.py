"""Trace samples (a list column), pairwise judgements and scores as Parquet: the CSV's values."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.urls import reverse

from apps.exchange.identity import annotator_names
from apps.preferences.models import Judgement
from tests.apps.continuous.conftest import make_trace_study
from tests.apps.continuous.test_api import client_for, record_through_api
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study

pytestmark = pytest.mark.django_db


def body(response) -> bytes:
    assert response.status_code == 200, response
    return b"".join(response.streaming_content)


def test_trace_export_as_parquet_has_one_row_per_trace_with_its_samples():
    ts = make_trace_study()
    recordings = [record_through_api(ts, annotator) for annotator in ts.annotators]
    manager = client_for(ts.study.created_by)
    url = f"/api/studies/{ts.study.pk}/traces/export/"
    data = body(manager.get(url, {"question": "arousal", "format": "parquet"}))
    schema = pq.read_schema(io.BytesIO(data))
    assert schema.field("values").type == pa.list_(pa.float32())
    frame = pd.read_parquet(io.BytesIO(data))
    assert sorted(frame["recording"]) == sorted(recordings)
    assert frame["n"].tolist() == [21, 21]
    assert frame["rate_hz"].tolist() == [1.0, 1.0]
    assert frame["values"][0].tolist() == [0.25] * 21
    text = body(manager.get(url, {"question": "arousal", "format": "csv"})).decode()
    samples = list(csv.DictReader(io.StringIO(text)))
    assert len(samples) == 42  # the CSV spreads the same traces into one row per sample
    assert samples[20]["time"] == "20"
    assert {row["value"] for row in samples} == {"0.25"}
    named = body(
        manager.get(url, {"question": "arousal", "format": "jsonl", "annotators": "pseudonyms"})
    )
    name = annotator_names(study_id=ts.study.pk, identity="pseudonyms")
    assert {json.loads(line)["annotator"] for line in named.decode().splitlines()} == {
        name(annotator.username) for annotator in ts.annotators
    }


@pytest.fixture
def judged():
    setup = make_pairwise_study(settings={"calibration_triplets": 0, "audit_rate": 0.0})
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    for annotator in setup.annotators:
        answer_all(setup.question, annotator, by_level(levels))
    return setup


def test_judgements_as_parquet_are_typed_and_match_the_csv(judged, client):
    client.force_login(judged.manager)
    args = [judged.study.pk, judged.question.key]
    data = body(client.get(reverse("preferences:judgements_file", args=[*args, "parquet"])))
    frame = pd.read_parquet(io.BytesIO(data))
    assert len(frame) == Judgement.objects.count()
    assert frame["outcome"].dtype == "int32"
    assert frame["contradicts"].dtype == bool
    assert isinstance(frame["created_at"].dtype, pd.DatetimeTZDtype)
    text = body(client.get(reverse("preferences:judgements_csv", args=args))).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(row["outcome"]) for row in rows] == frame["outcome"].tolist()
    assert {row["contradicts"] for row in rows} <= {"0", "1"}
    assert [row["item_a"] for row in rows] == frame["item_a"].tolist()


def test_scores_as_parquet_with_pseudonymous_columns(judged, client):
    client.force_login(judged.manager)
    url = reverse("preferences:scores_file", args=[judged.study.pk, judged.question.key, "parquet"])
    frame = pd.read_parquet(io.BytesIO(body(client.get(url, {"annotators": "pseudonyms"}))))
    name = annotator_names(study_id=judged.study.pk, identity="pseudonyms")
    first = judged.annotators[0].username
    assert f"count_{name(first)}" in frame.columns
    assert f"count_{first}" not in frame.columns
    assert frame["rank"].tolist() == [1, 2, 3, 4, 5]
    assert frame["bt_log_strength"].is_monotonic_decreasing
