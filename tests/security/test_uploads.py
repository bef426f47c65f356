"""Uploads and media (issue #10): stored XSS through stimuli, and uploads without limits.

The attacks as they were found: an ``.html`` or ``.svg`` "stimulus" with a script, uploaded
through the item import and served on the app's origin to anyone; a 60 MB media file; an NPZ
of a few MB that decompresses into a 2 GB array before the model-run upload fails.
"""

from __future__ import annotations

import io
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import Resolver404, resolve, reverse

from apps.demo.continuous import tone_sweep_wav
from apps.items.importing import ItemImportError
from apps.items.models import Item
from apps.items.services import items_import
from tests.apps.items.test_views import PNG
from tests.apps.models_registry.simulation import SimulatedStudy, simulated_study

pytestmark = pytest.mark.django_db

HTML = b"<!doctype html><script>fetch('/admin/')</script>"
SVG = (
    b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg">'
    b"<script>alert(document.cookie)</script></svg>"
)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def _import(client, study, *media: SimpleUploadedFile, kind: str = "image"):
    rows = "".join(
        f'{{"external_id": "m{n}", "kind": "{kind}", "media": "{upload.name}"}}\n'
        for n, upload in enumerate(media)
    )
    data = {"file": SimpleUploadedFile("items.jsonl", rows.encode()), "media": list(media)}
    return client.post(reverse("items:import", args=[study.pk]), data)


def _stored_files(root) -> list:
    return [path for path in root.rglob("*") if path.is_file()]


@pytest.mark.parametrize(
    ("name", "content", "content_type"),
    [
        ("page.html", HTML, "text/html"),
        ("logo.svg", SVG, "image/svg+xml"),
        ("cat.png", HTML, "image/png"),  # the name and the browser's word are not believed
    ],
)
def test_html_and_svg_stimuli_are_refused_at_upload(
    client, study_setup, media_root, name, content, content_type
):
    study, _ = study_setup
    client.force_login(study.created_by)
    before = study.items.count()
    response = _import(client, study, SimpleUploadedFile(name, content, content_type))
    html = response.content.decode()
    assert response.status_code == 422
    assert "not an accepted image, audio or video file" in html
    assert "SVG" in html
    assert study.items.count() == before
    assert _stored_files(media_root) == []


def test_the_service_refuses_them_too(study_setup, media_root):
    """Every path into the import (page, demo, scripts) goes through the same check."""
    study, _ = study_setup
    rows = io.StringIO('{"external_id": "svg", "kind": "image", "media": "logo.svg"}')
    with pytest.raises(ItemImportError) as caught:
        items_import(study=study, stream=rows, fmt="jsonl", files={"logo.svg": ContentFile(SVG)})
    assert caught.value.errors[0].field == "media"
    assert "SVG and HTML are refused" in caught.value.errors[0].message
    assert _stored_files(media_root) == []


def test_a_stimulus_must_match_its_item_kind(client, study_setup):
    study, _ = study_setup
    client.force_login(study.created_by)
    response = _import(client, study, SimpleUploadedFile("a.png", PNG), kind="audio")
    assert response.status_code == 422
    assert "an image (PNG); this item is audio" in response.content.decode()


def test_stimuli_are_stored_under_random_names_with_the_sniffed_extension(client, study_setup):
    study, _ = study_setup
    client.force_login(study.created_by)
    response = _import(client, study, SimpleUploadedFile("../../evil.html", PNG))
    assert response.status_code == 302
    item = study.items.get(external_id="m0")
    stored = item.media.name.rsplit("/", 1)[-1]
    assert stored.endswith(".png")
    assert len(stored) == len("0123456789abcdef0123456789abcdef.png")
    assert "evil" not in item.media.name


def _png_item(study) -> Item:
    item = study.items.first()
    item.kind = Item.Kind.IMAGE
    item.media.save("x.png", ContentFile(PNG))
    return item


def test_media_is_served_to_members_of_the_study_only(client, study_setup, outsider):
    study, (annotator, *_) = study_setup
    item = _png_item(study)
    url = item.media_src
    assert not url.startswith("/media/")
    assert client.get(url).status_code == 404
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    for member in (annotator, study.created_by):
        client.force_login(member)
        response = client.get(url)
        assert response.status_code == 200
        assert b"".join(response.streaming_content) == PNG
        assert response["Content-Type"] == "image/png"
        assert response["Content-Security-Policy"] == "sandbox"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Disposition"] == 'inline; filename="x.png"'


def test_the_static_media_route_is_gone():
    with pytest.raises(Resolver404):
        resolve("/media/items/2026/01/page.html")


@pytest.mark.parametrize("content", [HTML, SVG])
def test_an_old_upload_that_is_not_media_is_not_served(client, study_setup, content):
    """Files stored before the allow-list are sniffed again when served."""
    study, _ = study_setup
    item = study.items.first()
    item.kind = Item.Kind.IMAGE
    item.media.save("old.svg", ContentFile(content))
    client.force_login(study.created_by)
    assert client.get(item.media_src).status_code == 404


def test_ranges_let_players_seek(client, study_setup):
    study, (annotator, *_) = study_setup
    wav = tone_sweep_wav(seconds=0.5)
    item = study.items.first()
    item.kind = Item.Kind.AUDIO
    item.media.save("tone.wav", ContentFile(wav))
    client.force_login(annotator)
    url = item.media_src
    full = client.get(url)
    assert full["Accept-Ranges"] == "bytes"
    assert full["Content-Type"] == "audio/wav"
    part = client.get(url, HTTP_RANGE="bytes=100-199")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 100-199/{len(wav)}"
    assert part["Content-Length"] == "100"
    assert b"".join(part.streaming_content) == wav[100:200]
    tail = client.get(url, HTTP_RANGE="bytes=-10")
    assert b"".join(tail.streaming_content) == wav[-10:]
    assert tail["Content-Security-Policy"] == "sandbox"
    beyond = client.get(url, HTTP_RANGE=f"bytes={len(wav)}-")
    assert beyond.status_code == 416
    assert beyond["Content-Range"] == f"bytes */{len(wav)}"


def test_asgi_servers_stream_a_stimulus_in_parts(client, study_setup):
    """Django's FileResponse is read whole (``list``) before an ASGI server sends it."""
    study, (annotator, *_) = study_setup
    wav = tone_sweep_wav(seconds=10.0)  # 320 kB
    item = study.items.first()
    item.kind = Item.Kind.AUDIO
    item.media.save("tone.wav", ContentFile(wav))
    client.force_login(annotator)
    response = client.get(item.media_src)

    async def consume() -> list[bytes]:
        return [part async for part in response]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "StreamingHttpResponse must consume synchronous ..."
        parts = async_to_sync(consume)()
    response.close()
    assert b"".join(parts) == wav
    assert max(len(part) for part in parts) == 64 * 1024


def test_a_proxy_serves_the_bytes_when_asked(client, study_setup, settings):
    study, _ = study_setup
    item = _png_item(study)
    client.force_login(study.created_by)
    settings.MEDIA_ACCEL_REDIRECT = "/protected-media/"
    response = client.get(item.media_src)
    assert response["X-Accel-Redirect"] == f"/protected-media/{item.media.name}"
    assert response.content == b""
    assert response["Content-Security-Policy"] == "sandbox"
    settings.MEDIA_ACCEL_REDIRECT = ""
    settings.MEDIA_X_SENDFILE = True
    response = client.get(item.media_src)
    assert response["X-Sendfile"] == item.media.path
    assert response.content == b""


def test_media_over_the_limit_is_refused_while_it_streams(client, study_setup, settings):
    study, _ = study_setup
    settings.UPLOAD_MAX_MEDIA_BYTES = 1000
    client.force_login(study.created_by)
    big = SimpleUploadedFile("big.png", PNG + bytes(2000))
    response = _import(client, study, big)
    assert response.status_code == 413
    assert "big.png is larger than 1000\xa0bytes" in response.content.decode()
    assert not study.items.filter(external_id="m0").exists()


def test_a_60_mb_stimulus_is_refused_by_default(client, study_setup, media_root):
    study, _ = study_setup
    client.force_login(study.created_by)
    response = _import(client, study, SimpleUploadedFile("long.png", PNG + bytes(60 * 2**20)))
    assert response.status_code == 413
    assert "long.png is larger than 50.0\xa0MB" in response.content.decode()
    assert _stored_files(media_root) == []


def test_an_item_file_over_the_limit_is_refused(client, study_setup, settings):
    study, _ = study_setup
    settings.UPLOAD_MAX_IMPORT_BYTES = 100
    client.force_login(study.created_by)
    rows = b"external_id,text\n" + b"".join(b"x%d,hello\n" % n for n in range(50))
    response = client.post(
        reverse("items:import", args=[study.pk]), {"file": SimpleUploadedFile("items.csv", rows)}
    )
    assert response.status_code == 413
    html = response.content.decode()
    assert "items.csv is larger than 100\xa0bytes" in html
    assert "This field is required" not in html


def test_the_import_form_still_checks_csrf(study_setup):
    study, _ = study_setup
    client = Client(enforce_csrf_checks=True)
    client.force_login(study.created_by)
    upload = SimpleUploadedFile("items.csv", b"external_id,text\nz,Hi\n")
    url = reverse("items:import", args=[study.pk])
    assert client.post(url, {"file": upload}).status_code == 403
    assert not study.items.filter(external_id="z").exists()
    token = client.get(url).context["csrf_token"]
    upload.seek(0)
    assert client.post(url, {"file": upload, "csrfmiddlewaretoken": token}).status_code == 302
    assert study.items.filter(external_id="z").exists()


# Model-run uploads ---------------------------------------------------------------------------


@pytest.fixture
def sim(db) -> SimulatedStudy:
    return simulated_study(n_items=20)


@pytest.fixture(scope="session")
def npz_bomb() -> bytes:
    """An NPZ of 1000 x 250,000 float64 zeros (2 GB once loaded), written without allocating it."""
    shape = (1000, 250_000)
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("trace.npy", "w", force_zip64=True) as entry,
    ):
        header = {"descr": "<f8", "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(entry, header)
        chunk = bytes(1 << 20)
        total = shape[0] * shape[1] * 8
        for _ in range(total // len(chunk)):
            entry.write(chunk)
        entry.write(bytes(total % len(chunk)))
    return buffer.getvalue()


def _model_run(api_client, sim, upload: SimpleUploadedFile):
    api_client.force_authenticate(sim.study.created_by)
    data = {"question": "sentiment", "name": "bomb", "version": "1", "predictions": upload}
    return api_client.post(f"/api/studies/{sim.study.pk}/model-runs/", data, format="multipart")


def test_an_npz_bomb_is_refused_from_its_headers(api_client, sim, npz_bomb):
    upload = SimpleUploadedFile("predictions.npz", npz_bomb)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        response = _model_run(api_client, sim, upload)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 400
    message = " ".join(response.json()["predictions"])
    assert "trace" in message
    assert "(1000, 250000) float64" in message
    assert peak < 50 * 2**20, f"peak {peak / 2**20:.0f} MB"
    assert seconds < 2.0


def test_an_npz_array_too_large_once_loaded_is_refused(api_client, sim):
    """Its header alone decides: the data (4 GB of it) need not even be there."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, archive.open("vector.npy", "w") as entry:
        header = {"descr": "<f8", "fortran_order": False, "shape": (10, 50_000_000)}
        np.lib.format.write_array_header_2_0(entry, header)
    response = _model_run(api_client, sim, SimpleUploadedFile("p.npz", buffer.getvalue()))
    assert response.status_code == 400
    assert response.json()["predictions"] == [
        "line 1, field vector: Array 'vector' holds (10, 50000000) float64: 3.7\xa0GB once "
        "loaded; a model-run file may hold 100.0\xa0MB."
    ]


def test_npz_object_arrays_are_refused(api_client, sim):
    buffer = io.BytesIO()
    np.savez(buffer, item=np.array([{"x": 1}], dtype=object))
    response = _model_run(api_client, sim, SimpleUploadedFile("p.npz", buffer.getvalue()))
    assert response.status_code == 400
    assert "object" in " ".join(response.json()["predictions"])


def test_a_model_run_file_over_the_limit_is_refused_with_413(api_client, sim, settings):
    settings.UPLOAD_MAX_MODEL_RUN_BYTES = 1000
    upload = SimpleUploadedFile("predictions.jsonl", b"{}\n" * 1000)
    response = _model_run(api_client, sim, upload)
    assert response.status_code == 413
    assert response.json() == {
        "predictions": ["predictions.jsonl is larger than 1000\xa0bytes, the limit for this file."]
    }


def test_the_api_gives_the_served_address(api_client, study_setup):
    study, _ = study_setup
    item = _png_item(study)
    api_client.force_authenticate(study.created_by)
    body = api_client.get(f"/api/studies/{study.pk}/items/{item.pk}/").json()
    assert body["media"] == f"http://testserver{item.media_url}"


def test_json_bodies_of_the_api_are_capped(api_client, study_setup, settings):
    """Django caps the body (DATA_UPLOAD_MAX_MEMORY_SIZE); the API says so in JSON, with 413."""
    study, _ = study_setup
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    api_client.force_authenticate(study.created_by)
    rows = [{"external_id": f"bulk-{n}", "text": "x" * 20} for n in range(100)]
    response = api_client.post(f"/api/studies/{study.pk}/items/bulk/", rows, format="json")
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is larger than 1000\xa0bytes; send less at a time."
    }
    assert not study.items.filter(external_id="bulk-0").exists()
    response = api_client.post(f"/api/studies/{study.pk}/items/bulk/", rows[:5], format="json")
    assert response.status_code == 200
