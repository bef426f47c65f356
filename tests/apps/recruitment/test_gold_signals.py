"""Uploading a gold trace's true signal for an item, in the browser and through the API:
CSV or NPY, typed and size-limited, all or nothing with field errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from apps.continuous.models import GoldSignal
from apps.continuous.selectors import gold_signal_for_item
from apps.items.models import Item
from apps.recruitment.signal_files import MAX_SIGNAL_BYTES
from tests.apps.recruitment.setup import recruiting_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def npy(values) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(values))
    return buffer.getvalue()


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def url(study) -> str:
    return f"/api/studies/{study.pk}/gold-signals/"


def test_a_manager_uploads_a_csv_signal_for_an_item_through_the_api():
    study, _ = recruiting_study()
    client = api_for(study.created_by)
    upload = SimpleUploadedFile("truth.csv", b"value\n0.1\n0.5\n0.9\n")
    response = client.post(
        url(study), {"item": "item-0", "rate_hz": 2, "file": upload}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    assert response.json() | {"key": "?"} == {
        "item": "item-0",
        "key": "?",
        "rate_hz": 2.0,
        "n_samples": 3,
        "duration": 1.0,
        "description": "",
    }
    item = Item.objects.get(external_id="item-0")
    signal = gold_signal_for_item(item)
    assert signal is not None
    np.testing.assert_allclose(signal.array(), [0.1, 0.5, 0.9], atol=1e-6)
    assert item.metadata["signal"] == signal.key
    listed = client.get(url(study)).json()  # paginated like every API list, as documented
    assert listed["count"] == 1
    assert [row["item"] for row in listed["results"]] == ["item-0"]


def test_an_npy_signal_replaces_the_previous_one():
    study, _ = recruiting_study()
    client = api_for(study.created_by)
    for values in ([0.2, 0.4], [0.0, 0.5, 1.0, 0.5]):
        upload = SimpleUploadedFile("truth.npy", npy(values))
        response = client.post(
            url(study), {"item": "item-1", "rate_hz": 1, "file": upload}, format="multipart"
        )
        assert response.status_code == 201, response.json()
    assert GoldSignal.objects.count() == 1
    assert GoldSignal.objects.get().n_samples == 4


@pytest.mark.parametrize(
    ("name", "content", "rate", "field", "message"),
    [
        ("t.csv", b"0.1\nabc\n0.3\n", 1, "file", "line 2"),
        ("t.csv", b"0.1\n1.5\n", 1, "file", "[0, 1]"),
        ("t.csv", b"0.1\n", 1, "file", "two samples"),
        ("t.txt", b"0.1\n0.2\n", 1, "file", ".csv or .npy"),
        ("t.npy", b"not numpy", 1, "file", ".npy"),
        ("t.npy", None, 1, "file", "one column"),
        ("t.csv", b"0.1\n0.2\n", 0, "rate_hz", ""),
        ("t.csv", b"0.1\n0.2\n", "fast", "rate_hz", ""),
    ],
)
def test_a_bad_upload_is_refused_with_a_field_error_and_stores_nothing(
    name, content, rate, field, message
):
    study, _ = recruiting_study()
    data = npy(np.full((2, 2), 0.5)) if content is None else content
    response = api_for(study.created_by).post(
        url(study),
        {"item": "item-0", "rate_hz": rate, "file": SimpleUploadedFile(name, data)},
        format="multipart",
    )
    assert response.status_code == 400
    assert field in response.json()
    assert message in " ".join(response.json()[field])
    assert not GoldSignal.objects.exists()
    assert "signal" not in Item.objects.get(external_id="item-0").metadata


def test_a_too_large_file_and_an_unknown_item_are_refused():
    study, _ = recruiting_study()
    client = api_for(study.created_by)
    big = SimpleUploadedFile("t.csv", b"0.5\n" * (MAX_SIGNAL_BYTES // 4 + 1))
    response = client.post(
        url(study), {"item": "item-0", "rate_hz": 1, "file": big}, format="multipart"
    )
    assert response.status_code == 400
    assert "at most" in " ".join(response.json()["file"])
    unknown = client.post(
        url(study),
        {"item": "nope", "rate_hz": 1, "file": SimpleUploadedFile("t.csv", b"0.1\n0.2\n")},
        format="multipart",
    )
    assert unknown.status_code == 400
    assert "item" in unknown.json()


def test_only_managers_upload():
    study, _ = recruiting_study()
    upload = SimpleUploadedFile("t.csv", b"0.1\n0.2\n")
    response = api_for(UserFactory()).post(
        url(study), {"item": "item-0", "rate_hz": 1, "file": upload}, format="multipart"
    )
    assert response.status_code == 404
    assert not GoldSignal.objects.exists()


def test_the_manager_page_uploads_a_signal_and_shows_errors(client):
    study, _ = recruiting_study()
    client.force_login(study.created_by)
    page = reverse("recruitment:gold_signal", args=[study.pk])
    bad = client.post(
        page, {"item": "item-0", "rate_hz": 1, "file": SimpleUploadedFile("t.csv", b"0.5\nabc\n")}
    )
    assert bad.status_code == 422
    assert b"line 2" in bad.content
    assert not GoldSignal.objects.exists()
    ok = client.post(
        page,
        {"item": "item-2", "rate_hz": 4, "file": SimpleUploadedFile("t.csv", b"0\n0.5\n1\n")},
    )
    assert ok.status_code == 302
    shown = client.get(reverse("recruitment:manage", args=[study.pk]))
    assert b"item-2" in shown.content
    assert gold_signal_for_item(Item.objects.get(external_id="item-2")).rate_hz == 4
