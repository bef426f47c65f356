"""Annotation exports as Parquet (web, API, command) and annotators named by pseudonyms."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from analytics.services import annotator_exclude
from apps.annotations.exporting import (
    EXPORT_COLUMNS,
    annotation_export_rows,
    export_bytes,
    provenance,
)
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.exchange.identity import PREFIX, annotator_names
from tests.factories import running_study

pytestmark = pytest.mark.django_db


def answer_all(study, annotators, labels=("positive", "neutral")) -> None:
    question = study.questions.get()
    for annotator in annotators:
        for label in labels:
            annotations_submit(
                annotator=annotator,
                assignment=assignment_next(annotator=annotator, study=study),
                answers={question: label},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=700,
            )


@pytest.fixture
def answered(study_setup):
    study, annotators = study_setup
    answer_all(study, annotators)
    return study, annotators


def frame_of(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


def test_parquet_export_holds_the_rows_typed(answered):
    study, _ = answered
    data = b"".join(export_bytes(study=study, fmt="parquet", include_history=True))
    schema = pq.read_schema(io.BytesIO(data))
    assert schema.names == list(EXPORT_COLUMNS)
    assert schema.field("round").type == pa.int32()
    assert schema.field("time_spent_ms").type == pa.int64()
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    frame = frame_of(data)
    rows = list(annotation_export_rows(study=study, include_history=True))
    assert len(frame) == len(rows) == 6
    assert frame["annotator"].tolist() == [row["annotator"] for row in rows]
    assert frame["label"].tolist() == [row["label"] for row in rows]
    assert [json.loads(v) for v in frame["value"]] == [row["value"] for row in rows]
    assert frame["created_at"].tolist() == [pd.Timestamp(row["created_at"]) for row in rows]
    assert frame["time_spent_ms"].tolist() == [700] * 6


def test_parquet_provenance_hashes_the_downloaded_bytes(answered, client):
    study, _ = answered
    client.force_login(study.created_by)
    response = client.get(reverse("annotations:export_curated", args=[study.pk, "parquet"]))
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    data = b"".join(response.streaming_content)
    record = provenance(study=study, curated=True, include_history=False, fmt="parquet")
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["file"]["name"].endswith("-curated.parquet")


def test_api_export_with_a_token_as_parquet_and_pseudonyms(answered):
    study, annotators = answered
    client = APIClient()
    client.force_authenticate(study.created_by)
    response = client.get(
        f"/api/studies/{study.pk}/export/?format=parquet&curated=1&annotators=pseudonyms"
    )
    assert response.status_code == 200
    assert response["Content-Disposition"].endswith('-curated-pseudonyms.parquet"')
    data = b"".join(response.streaming_content)
    frame = frame_of(data)
    name = annotator_names(study_id=study.pk, identity="pseudonyms")
    assert set(frame["annotator"]) == {name(a.username) for a in annotators}
    for annotator in annotators:
        assert annotator.username.encode() not in data
    record = client.get(
        f"/api/studies/{study.pk}/export/provenance/?format=parquet&curated=1&annotators=pseudonyms"
    ).json()
    assert record["options"]["annotators"] == "pseudonyms"


def test_pseudonyms_are_stable_within_a_study_and_differ_between_studies(answered):
    study, annotators = answered
    other, _ = running_study()
    username = annotators[0].username
    here = annotator_names(study_id=study.pk, identity="pseudonyms")
    assert here(username) == annotator_names(study_id=study.pk, identity="pseudonyms")(username)
    assert here(username).startswith(PREFIX)
    assert len(here(username)) == len(PREFIX) + 16
    assert here(username) != annotator_names(study_id=other.pk, identity="pseudonyms")(username)
    assert len({here(a.username) for a in annotators}) == len(annotators)
    with pytest.raises(ValueError, match="Unknown annotator identity"):
        annotator_names(study_id=study.pk, identity="emails")


def test_pseudonymised_provenance_names_excluded_annotators_by_pseudonym(answered):
    study, annotators = answered
    annotator_exclude(
        study=study, annotator=annotators[2], by=study.created_by, reason="random answers"
    )
    record = provenance(
        study=study, curated=True, include_history=False, fmt="csv", identity="pseudonyms"
    )
    name = annotator_names(study_id=study.pk, identity="pseudonyms")
    assert [e["annotator"] for e in record["exclusions"]] == [name(annotators[2].username)]
    assert record["counts"]["annotators_kept"] == 2
    assert annotators[2].username not in json.dumps(record)


def test_command_writes_parquet_with_pseudonyms(answered, tmp_path: Path):
    study, annotators = answered
    output = tmp_path / "answers.parquet"
    call_command(
        "export_annotations",
        str(study.pk),
        "--format",
        "parquet",
        "--annotators",
        "pseudonyms",
        "--output",
        str(output),
        stdout=io.StringIO(),
    )
    frame = pd.read_parquet(output)
    assert len(frame) == 6
    assert not set(frame["annotator"]) & {a.username for a in annotators}
    sidecar = json.loads((tmp_path / "answers.parquet.provenance.json").read_text())
    assert sidecar["options"] == {
        "format": "parquet",
        "curated": False,
        "include_history": False,
        "annotators": "pseudonyms",
    }
