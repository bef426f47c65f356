"""Every count, size and depth a user controls is checked against a stated limit before the
work (issue 25): just over each limit answers 400 naming it, quickly, and stores nothing.

Before: a 300-byte Label Studio file with ``maxRating="10000"`` took 194 s and 10 GB, a
question of 6,000 labels 3.1 GB for one answer; ``annotations: [1]``, a ``lead_time`` of 1e308
and a deeply nested file answered 500.
"""

from __future__ import annotations

import io
import json
import time
import zipfile

import numpy as np
import pytest
from rest_framework.test import APIClient

from apps.studies.models import Question, Study
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


def _task(result: dict | None = None, **annotation: object) -> dict:
    answer = result or {
        "type": "choices",
        "from_name": "sentiment",
        "to_name": "text",
        "value": {"choices": ["Positive"]},
    }
    return {
        "id": 1,
        "data": {"text": "A sentence."},
        "annotations": [{"id": 1, "completed_by": 7, "result": [answer], **annotation}],
    }


def _import(client: APIClient, content: bytes, label_config: str = "") -> tuple[int, str, float]:
    upload = io.BytesIO(content)
    upload.name = "export.json"
    started = time.perf_counter()
    response = client.post(
        "/api/studies/import/label-studio/",
        {"file": upload, "name": "LS", "label_config": label_config},
        format="multipart",
    )
    return response.status_code, json.dumps(response.json()), time.perf_counter() - started


@pytest.fixture
def manager_client() -> APIClient:
    client = APIClient()
    client.force_authenticate(UserFactory(manager=True))
    return client


RATING = {"type": "rating", "from_name": "stars", "to_name": "text", "value": {"rating": 3}}


@pytest.mark.parametrize(
    ("content", "config", "says"),
    [
        (json.dumps([_task(RATING)]), '<View><Rating name="stars" maxRating="101"/></View>', "101"),
        (
            json.dumps([_task(RATING)]),
            '<View><Rating name="stars" maxRating="99999999999999999999"/></View>',
            "QUESTION_MAX_LABELS",
        ),
        (json.dumps([_task({**RATING, "value": {"rating": 10_000}})]), "", "QUESTION_MAX_LABELS"),
        (json.dumps([{"id": 1, "data": {"text": "x"}, "annotations": [1]}]), "", "not an object"),
        (json.dumps([{"id": 1, "data": {"text": "x"}, "annotations": "a"}]), "", "not a list"),
        ("[" * 100_000 + "]" * 100_000, "", "nested too deeply"),
    ],
    ids=["max-rating", "max-rating-huge", "rating", "annotation-int", "annotations-str", "deep"],
)
def test_label_studio_files_over_a_limit_are_a_400(manager_client, content, config, says):
    status, body, seconds = _import(manager_client, content.encode(), config)
    assert status == 400, body
    assert says in body
    assert seconds < 1
    assert not Study.objects.exists()


def test_a_label_studio_lead_time_beyond_a_day_stores_no_time(manager_client):
    status, body, _ = _import(manager_client, json.dumps([_task(lead_time=1e308)]).encode())
    assert status == 400, body  # a single choice makes no scale without the configuration
    config = '<View><Choices name="sentiment"><Choice value="Positive"/><Choice value="No"/>'
    status, body, _ = _import(
        manager_client, json.dumps([_task(lead_time=1e308)]).encode(), config + "</Choices></View>"
    )
    assert status == 201, body


def test_a_question_over_the_label_limit_is_a_400(settings):
    settings.QUESTION_MAX_LABELS = 5
    study = StudyFactory()
    client = APIClient()
    client.force_authenticate(study.created_by)
    labels = [{"key": f"l{n}", "name": f"L{n}"} for n in range(6)]
    response = client.post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "q", "prompt": "?", "kind": "categorical", "labels": labels},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "QUESTION_MAX_LABELS" in json.dumps(response.json())
    assert not Question.objects.exists()
    response = client.post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "q", "prompt": "?", "kind": "categorical", "labels": labels[:5]},
        format="json",
    )
    assert response.status_code == 201, response.content


# Files: decompressed sizes, lines, vectors, arrays -------------------------------------------


def _parquet_bomb(text_bytes: int) -> bytes:
    """A small zstd Parquet item file whose one text decompresses to ``text_bytes`` bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"external_id": ["big"], "text": ["x" * text_bytes]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def test_a_parquet_item_file_is_limited_once_decompressed(client, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    settings.UPLOAD_MAX_IMPORT_BYTES = 1024 * 1024
    study = StudyFactory()
    client.force_login(study.created_by)
    content = _parquet_bomb(4 * 1024 * 1024)
    assert len(content) < 4096  # small on the wire
    started = time.perf_counter()
    response = client.post(
        reverse("items:import", args=[study.pk]),
        {"file": SimpleUploadedFile("items.parquet", content)},
    )
    assert time.perf_counter() - started < 1
    assert response.status_code == 422  # the page's form error
    assert "UPLOAD_MAX_IMPORT_BYTES" in response.content.decode()
    assert not study.items.exists()


def test_an_item_text_over_the_limit_is_refused(client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from core.limits import MAX_ITEM_TEXT

    study = StudyFactory()
    client.force_login(study.created_by)
    rows = json.dumps({"external_id": "a", "text": "x" * (MAX_ITEM_TEXT + 1)}).encode()
    response = client.post(
        reverse("items:import", args=[study.pk]),
        {"file": SimpleUploadedFile("items.jsonl", rows)},
    )
    assert response.status_code == 422  # the page's form error
    assert f"at most {MAX_ITEM_TEXT} characters" in response.content.decode()
    assert not study.items.exists()


@pytest.fixture
def sim(db):
    from tests.apps.models_registry.simulation import simulated_study

    return simulated_study(n_items=10)


def _model_run(sim, files: dict[tuple[str, str], bytes]) -> tuple[int, str, float]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = APIClient()
    client.force_authenticate(sim.study.created_by)
    data = {"question": "sentiment", "name": "limits", "version": "1"}
    data |= {field: SimpleUploadedFile(name, content) for (field, name), content in files.items()}
    started = time.perf_counter()
    response = client.post(f"/api/studies/{sim.study.pk}/model-runs/", data, format="multipart")
    return response.status_code, json.dumps(response.json()), time.perf_counter() - started


def _predictions(sim) -> bytes:
    from tests.apps.models_registry.simulation import jsonl, prediction_rows

    return jsonl(prediction_rows(sim, sim.ratings)).getvalue()


def test_model_run_files_over_a_limit_are_a_400(sim):
    from apps.models_registry.models import ModelRun
    from core.limits import MAX_LINE_CHARS, MAX_NPZ_ENTRIES, MAX_VECTOR_LENGTH

    predictions = _predictions(sim)
    annotator = sim.usernames[0]
    cases = {
        "long line": (
            json.dumps({"annotator": annotator, "vector": [0.5] * (MAX_LINE_CHARS // 4)}),
            "the limit is",
        ),
        "long vector": (
            json.dumps({"annotator": annotator, "vector": [1] * (MAX_VECTOR_LENGTH + 1)}),
            f"at most {MAX_VECTOR_LENGTH:,}",
        ),
        "deep": ('{"annotator": "' + annotator + '", "vector": ' + "[" * 50_000, "nested too"),
    }
    for name, (line, says) in cases.items():
        status, body, seconds = _model_run(
            sim, {("predictions", "p.jsonl"): predictions, ("features", "f.jsonl"): line.encode()}
        )
        assert status == 400, (name, body)
        assert says in body, (name, body)
        assert seconds < 1, name
    entries = io.BytesIO()
    with zipfile.ZipFile(entries, "w") as archive:
        for n in range(MAX_NPZ_ENTRIES + 1):
            archive.writestr(f"a{n}.npy", b"")
    status, body, seconds = _model_run(sim, {("predictions", "p.npz"): entries.getvalue()})
    assert status == 400, body
    assert f"at most {MAX_NPZ_ENTRIES}" in body or f"{MAX_NPZ_ENTRIES} at most" in body
    assert not ModelRun.objects.exists()


def test_a_gold_signal_over_the_limit_is_dropped_while_it_streams(client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from apps.recruitment.signal_files import MAX_SIGNAL_BYTES

    study = StudyFactory()
    client.force_login(study.created_by)
    upload = SimpleUploadedFile("truth.csv", b"0.5\n" * (MAX_SIGNAL_BYTES // 4 + 1))
    response = client.post(
        reverse("recruitment:gold_signal", args=[study.pk]),
        {"item": "x", "rate_hz": 1, "file": upload},
    )
    assert response.status_code == 413
    assert "truth.csv is larger than" in response.content.decode()


def test_an_npy_declaring_a_huge_array_is_a_400():
    from django.core.exceptions import ValidationError

    from apps.recruitment.signal_files import signal_read

    buffer = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**12,)}
    np.lib.format.write_array_header_1_0(buffer, header)
    buffer.write(bytes(64))
    with pytest.raises(ValidationError, match=r"not a readable \.npy"):
        signal_read(data=buffer.getvalue(), name="truth.npy")
