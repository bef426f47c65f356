"""The aggregated labels through the API: the same file as the page, curated, with provenance."""

from __future__ import annotations

import hashlib
import io
import json

import pyarrow.parquet as pq
import pytest
from rest_framework.test import APIClient

from analytics.services import annotator_exclude
from apps.adjudication.exporting import aggregated_bytes
from apps.adjudication.services import adjudication_record
from tests.factories import UserFactory


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def url(disputed, tail: str = "") -> str:
    return f"/api/studies/{disputed.study.pk}/aggregated-labels/{tail}"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_the_api_sends_the_same_file_as_the_page(disputed, fmt):
    adjudication_record(
        adjudicator=disputed.reviewer,
        question=disputed.question,
        item=disputed.items[3],
        label_key="negative",
    )
    response = api(disputed.manager).get(url(disputed), {"format": fmt}, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body == b"".join(aggregated_bytes(study=disputed.study, fmt=fmt))
    if fmt == "parquet":
        rows = pq.read_table(io.BytesIO(body)).to_pylist()
        assert {row["adjudicated_label"] for row in rows} == {None, "negative"}
        assert len(rows) == 5


def test_curated_file_and_its_provenance(disputed):
    left_out = disputed.annotators[2]
    annotator_exclude(study=disputed.study, annotator=left_out, by=disputed.manager, reason="spam")
    client = api(disputed.manager)
    query = {"format": "jsonl", "curated": "1"}
    body = b"".join(client.get(url(disputed), query).streaming_content)
    full = b"".join(client.get(url(disputed), {"format": "jsonl"}).streaming_content)
    counted = [json.loads(line)["n_answers"] for line in body.splitlines()]
    assert counted == [3] * 5  # every answered item lost the excluded annotator's answer
    assert body != full
    record = client.get(url(disputed, "provenance/"), query).json()
    assert record["schema"] == "annotation-studio/aggregated-provenance/1"
    assert record["options"]["curated"] is True
    assert record["exclusions"][0]["annotator"] == left_out.username
    assert record["file"]["sha256"] == hashlib.sha256(body).hexdigest()
    assert record["file"]["rows"] == 5
    assert record["answers_file"]["name"].endswith("-curated.jsonl")
    assert "AAD-RMSE" in record["aggregation"]["disagreement"]


def test_bad_query_is_a_400_with_the_field(disputed):
    response = api(disputed.manager).get(url(disputed), {"format": "xml"})
    assert response.status_code == 400
    assert response.json() == {"format": ['"xml" is not a valid choice.']}
    response = api(disputed.manager).get(url(disputed, "provenance/"), {"curated": "maybe"})
    assert response.status_code == 400
    assert "curated" in response.json()


@pytest.mark.parametrize("who", ["reviewer", "annotator"])
def test_only_managers_export(disputed, who):
    user = disputed.reviewer if who == "reviewer" else disputed.annotators[0]
    assert api(user).get(url(disputed)).status_code == 403
    assert api(user).get(url(disputed, "provenance/")).status_code == 403


def test_other_studies_are_not_found(disputed):
    assert api(UserFactory()).get(url(disputed)).status_code == 404
