"""The trace API and pages: who may do what, and what comes back."""

from __future__ import annotations

import csv
import io
import uuid

import numpy as np
import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from apps.continuous.models import TraceChunk
from tests.apps.continuous.conftest import AUDIO_SECONDS
from tests.factories import PASSWORD, UserFactory


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        _, token = AuthToken.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def chunk_body(ts, annotator, recording, sequence, times, values, events=()):
    return {
        "assignment": ts.assignment(annotator, ts.audio_item).pk,
        "question": ts.question.key,
        "recording": str(recording),
        "sequence": sequence,
        "times": list(map(float, times)),
        "values": list(map(float, values)),
        "events": list(events),
    }


def record_through_api(ts, annotator) -> str:
    client, rec = client_for(annotator), uuid.uuid4()
    times = np.round(np.arange(0, AUDIO_SECONDS + 0.05, 0.1), 6)
    base = f"/api/studies/{ts.study.pk}/traces/"
    for sequence, start in enumerate(range(0, times.size, 50)):
        part = times[start : start + 50]
        body = chunk_body(ts, annotator, rec, sequence, part, np.full(part.size, 0.25))
        assert client.post(f"{base}chunks/", body, format="json").status_code == 201
    response = client.post(f"{base}finish/", {"recording": str(rec)}, format="json")
    assert response.status_code == 201, response.data
    again = client.post(f"{base}finish/", {"recording": str(rec)}, format="json")
    assert again.status_code == 200
    assert again.data == response.data
    return str(rec)


def test_upload_resume_finish_list_and_export(trace_study):
    ts = trace_study
    annotator = ts.annotators[0]
    client = client_for(annotator)
    base = f"/api/studies/{ts.study.pk}/traces/"
    rec = uuid.uuid4()
    body = chunk_body(ts, annotator, rec, 0, [0, 0.1, 0.2], [0.5, 0.6, 0.7])
    first = client.post(f"{base}chunks/", body, format="json")
    assert first.status_code == 201
    replay = client.post(f"{base}chunks/", body, format="json")
    assert replay.status_code == 200
    assert replay.data == first.data
    assert TraceChunk.objects.count() == 1

    bad = client.post(
        f"{base}chunks/",
        {**body, "sequence": 1, "times": [0.3, 0.3], "values": [0.5, 0.5]},
        format="json",
    )
    assert bad.status_code == 400
    assert "increase strictly" in bad.data["chunk"][0]
    stale = client.post(
        f"{base}chunks/", {**body, "sequence": 1, "times": [0.1], "values": [0.5]}, format="json"
    )
    assert stale.status_code == 200  # already covered by what is stored: nothing new
    assert stale.data == {**first.data, "sequence": 1, "n_samples": 0}

    query = {"assignment": body["assignment"], "question": "arousal"}
    state = client.get(f"{base}resume/", query).data
    assert state["recording"] == str(rec)
    assert state["next_sequence"] == 1
    assert state["last_time"] == pytest.approx(0.2)
    assert state["last_value"] == pytest.approx(0.7)
    assert state["duration"] == AUDIO_SECONDS
    assert state["times"] == pytest.approx([0, 0.1, 0.2])
    assert state["values"] == pytest.approx([0.5, 0.6, 0.7])

    finished = record_through_api(ts, annotator)
    mine = client.get(base, {"question": "arousal"}).data["results"]
    assert [t["recording"] for t in mine] == [finished]
    assert mine[0]["n"] == 21
    assert mine[0]["values"] == [0.25] * 21

    manager = client_for(ts.study.created_by)
    exported = manager.get(f"{base}export/", {"question": "arousal", "format": "csv"})
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert len(rows) == 21
    assert rows[-1]["time"] == "20"
    assert rows[-1]["value"] == "0.25"
    as_json = manager.get(f"{base}export/", {"question": "arousal", "format": "json"})
    assert as_json.status_code == 200
    assert as_json.json()[0]["recording"] == finished


def test_access_by_role(trace_study):
    ts = trace_study
    annotator, other = ts.annotators
    record_through_api(ts, other)
    base = f"/api/studies/{ts.study.pk}/traces/"
    body = chunk_body(ts, annotator, uuid.uuid4(), 0, [0.0], [0.5])
    query = {"question": "arousal"}

    assert client_for().get(base, query).status_code in (401, 403)
    assert client_for().post(f"{base}chunks/", body, format="json").status_code in (401, 403)
    outsider = client_for(UserFactory(manager=True))
    for url in (base, f"{base}calibration/", f"{base}export/"):
        assert outsider.get(url, query).status_code == 404
    assert outsider.post(f"{base}chunks/", body, format="json").status_code == 404

    mine = client_for(annotator)
    assert mine.get(base, query).data["results"] == []  # not the other annotator's trace
    assert mine.get(f"{base}export/", query).status_code == 403
    assert mine.get(f"{base}calibration/", query).status_code == 403
    foreign = {**body, "assignment": ts.assignment(other, ts.audio_item).pk}
    refused = mine.post(f"{base}chunks/", foreign, format="json")
    assert refused.status_code == 400
    assert "assignment" in refused.data

    manager = client_for(ts.study.created_by)
    assert len(manager.get(base, query).data["results"]) == 1
    assert manager.post(f"{base}chunks/", body, format="json").status_code == 403
    assert manager.get(f"{base}calibration/", query).status_code == 200
    assert manager.get(base, {"question": "nope"}).status_code == 404


def test_calibration_endpoint_reports_gold_items(trace_study):
    ts = trace_study
    annotator = ts.annotators[0]
    client = client_for(annotator)
    base = f"/api/studies/{ts.study.pk}/traces/"
    truth = 0.5 + 0.4 * np.sin(np.arange(31) / 3.0)
    late = np.concatenate([[truth[0]] * 2, truth[:-2]])  # two seconds late
    rec = uuid.uuid4()
    body = {
        **chunk_body(ts, annotator, rec, 0, np.arange(31.0), late),
        "assignment": ts.assignment(annotator, ts.gold_item).pk,
    }
    assert client.post(f"{base}chunks/", body, format="json").status_code == 201
    assert client.post(f"{base}finish/", {"recording": str(rec)}, format="json").status_code == 201
    report = client_for(ts.study.created_by).get(f"{base}calibration/", {"question": "arousal"})
    (row,) = report.data
    assert row["username"] == annotator.username
    assert row["lag_seconds"] == 2.0
    (item,) = row["items"]
    assert item["signal"] == "test-wave"
    assert item["sda"] > 0.8
    assert item["cubic_increasing"]


@pytest.mark.parametrize("page", ["traces", "record"])
def test_pages_by_role(client, trace_study, page):
    ts = trace_study
    annotator = ts.annotators[0]
    url = f"/studies/{ts.study.pk}/traces/arousal/"
    if page == "record":
        url += f"record/{ts.assignment(annotator, ts.audio_item).pk}/"
    allowed, refused = (
        (ts.study.created_by, annotator) if page == "traces" else (annotator, ts.study.created_by)
    )
    assert client.get(url).status_code == 302  # to the login page
    client.login(username=UserFactory(manager=True).username, password=PASSWORD)
    assert client.get(url).status_code == 404
    client.login(username=refused.username, password=PASSWORD)
    assert client.get(url).status_code == 403
    client.login(username=allowed.username, password=PASSWORD)
    response = client.get(url)
    assert response.status_code == 200
    if page == "record":
        assert b"data-trace-recorder" in response.content
        assert b"trace-recorder.js" in response.content


def test_manager_page_draws_the_traces_and_the_truth(client, trace_study):
    ts = trace_study
    record_through_api(ts, ts.annotators[0])
    client.login(username=ts.study.created_by.username, password=PASSWORD)
    url = f"/studies/{ts.study.pk}/traces/arousal/"
    page = client.get(url, {"item": ts.audio_item.pk}).content.decode()
    assert page.count('class="trace-overlay__line"') == 1
    assert "<svg" in page
    gold = client.get(url, {"item": ts.gold_item.pk}, headers={"HX-Request": "true"})
    text = gold.content.decode()
    assert text.lstrip().startswith('<div id="overlay" data-trace-overlay>')
    assert "trace-overlay__line--truth" in text


def test_record_next_sends_the_annotator_to_an_untraced_item(client, trace_study):
    ts = trace_study
    annotator = ts.annotators[0]
    record_through_api(ts, annotator)  # the audio item is done
    client.login(username=annotator.username, password=PASSWORD)
    response = client.get(f"/studies/{ts.study.pk}/traces/arousal/record/")
    gold = ts.assignment(annotator, ts.gold_item).pk
    assert response.status_code == 302
    assert response.url.endswith(f"/record/{gold}/")
