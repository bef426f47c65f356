"""Submitting, replaying, editing, skipping and undoing annotations; who sees which; export."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest

from apps.annotations.models import Annotation, Assignment, Revision
from apps.studies.models import Study
from apps.studies.services import membership_add, study_set_status
from tests.api.helpers import next_assignment_id, submit
from tests.factories import StudyFactory, running_study


@pytest.fixture
def annotator(study_setup):
    return study_setup[1][0]


@pytest.fixture
def study(study_setup):
    return study_setup[0]


def test_submit_records_one_revision_per_answer(study, annotator, client_for) -> None:
    assignment_id = next_assignment_id(study, annotator)
    key = uuid.uuid4()
    response = submit(client_for(annotator), assignment_id, {"label": "negative"}, key=key)
    assert response.status_code == 201
    (revision,) = response.data["revisions"]
    assert revision["question"] == "sentiment"
    assert revision["number"] == 1
    assert revision["value"] == {"label": "negative"}
    assert revision["label"] == "negative"
    assert revision["idempotency_key"] == str(key)
    assert revision["source"] == "api"
    assert revision["time_spent_ms"] == 900
    assert Assignment.objects.get(pk=assignment_id).completed_at is not None


def test_same_key_again_is_a_replay_with_the_same_revision(study, annotator, client_for) -> None:
    client = client_for(annotator)
    assignment_id = next_assignment_id(study, annotator)
    key = uuid.uuid4()
    first = submit(client, assignment_id, "neutral", key=key)
    again = submit(client, assignment_id, "neutral", key=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.data == first.data
    assert Revision.objects.count() == 1


def test_same_key_with_a_different_answer_is_refused(study, annotator, client_for) -> None:
    client = client_for(annotator)
    assignment_id = next_assignment_id(study, annotator)
    key = uuid.uuid4()
    submit(client, assignment_id, "neutral", key=key)
    response = submit(client, assignment_id, "positive", key=key)
    assert response.status_code == 400
    assert response.data == {
        "idempotency_key": ["This key was already used for a different answer."]
    }
    assert list(Revision.objects.values_list("value", flat=True)) == [{"label": "neutral"}]


def test_an_edit_appends_a_revision_and_the_latest_counts(study, annotator, client_for) -> None:
    client = client_for(annotator)
    assignment_id = next_assignment_id(study, annotator)
    submit(client, assignment_id, "neutral")
    response = submit(client, assignment_id, "positive")
    assert response.status_code == 201
    assert response.data["revisions"][0]["number"] == 2
    (annotation,) = client.get("/api/annotations/").data["results"]
    assert annotation["revision"] == 2
    assert annotation["label"] == "positive"
    history = client.get(f"/api/annotations/{annotation['id']}/revisions/").data
    assert [(r["number"], r["label"]) for r in history] == [(1, "neutral"), (2, "positive")]


def test_a_bad_label_is_a_400_on_answers_and_stores_nothing(study, annotator, client_for) -> None:
    response = submit(client_for(annotator), next_assignment_id(study, annotator), "ecstatic")
    assert response.status_code == 400
    assert response.data == {
        "answers": [
            "'ecstatic' is not a label of 'sentiment'; choose from negative, neutral, positive."
        ]
    }
    assert not Annotation.objects.exists()
    assert not Revision.objects.exists()


def test_an_unknown_question_is_a_400_on_answers(study, annotator, client_for) -> None:
    response = submit(
        client_for(annotator), next_assignment_id(study, annotator), "x", question="mood"
    )
    assert response.status_code == 400
    assert response.data == {"answers": ["'mood' is not a question of this study."]}


def test_someone_elses_assignment_reads_as_missing(study_setup, client_for) -> None:
    study, (annotator, other, _) = study_setup
    response = submit(client_for(annotator), next_assignment_id(study, other))
    assert response.status_code == 400
    assert list(response.data) == ["assignment"]
    assert "does not exist" in response.data["assignment"][0]
    assert not Revision.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"idempotency_key": None}, "idempotency_key"),
        ({"idempotency_key": "not-a-uuid"}, "idempotency_key"),
        ({"answers": {}}, "answers"),
        ({"answers": "positive"}, "answers"),
        ({"time_spent_ms": -5}, "time_spent_ms"),
    ],
)
def test_malformed_submissions(study, annotator, client_for, change, field) -> None:
    body = {
        "assignment": next_assignment_id(study, annotator),
        "answers": {"sentiment": "positive"},
        "idempotency_key": str(uuid.uuid4()),
        **change,
    }
    response = client_for(annotator).post("/api/annotations/", body, format="json")
    assert response.status_code == 400
    assert field in response.data
    assert not Revision.objects.exists()


def test_closed_study_takes_no_answers(study, annotator, client_for) -> None:
    assignment_id = next_assignment_id(study, annotator)
    study_set_status(study=study, status=Study.Status.CLOSED)
    response = submit(client_for(annotator), assignment_id)
    assert response.status_code == 400
    assert "study" in response.data


def test_next_walks_the_queue_then_answers_204(db, client_for) -> None:
    study, (annotator,) = running_study(n_items=2, n_annotators=1)
    client = client_for(annotator)
    for done in range(2):
        response = client.get(f"/api/studies/{study.pk}/next/")
        assert response.status_code == 200
        assert response.data["progress"] == {"done": done, "total": 2, "percent": 50 * done}
        assert response.data["item"]["text"]
        submit(client, response.data["assignment"])
    response = client.get(f"/api/studies/{study.pk}/next/")
    assert response.status_code == 204
    assert response.content == b""


def test_skip_moves_the_item_behind_the_others(study, annotator, client_for) -> None:
    client = client_for(annotator)
    first = client.get(f"/api/studies/{study.pk}/next/").data
    response = client.post(
        f"/api/studies/{study.pk}/skip/", {"assignment": first["assignment"]}, format="json"
    )
    assert response.status_code == 200
    assert response.data["assignment"] != first["assignment"]
    assert Assignment.objects.get(pk=first["assignment"]).skip_count == 1


def test_skip_in_another_study_is_refused(study, annotator, client_for) -> None:
    other = StudyFactory()
    response = client_for(annotator).post(
        f"/api/studies/{other.pk}/skip/",
        {"assignment": next_assignment_id(study, annotator)},
        format="json",
    )
    assert response.status_code == 404  # not a member of the other study
    membership_add(study=other, user=annotator, role="annotator")
    response = client_for(annotator).post(
        f"/api/studies/{other.pk}/skip/",
        {"assignment": next_assignment_id(study, annotator)},
        format="json",
    )
    assert response.status_code == 400
    assert "assignment" in response.data


def test_undo_retracts_the_last_answer_and_reopens_it(study, annotator, client_for) -> None:
    client = client_for(annotator)
    url = f"/api/studies/{study.pk}/undo/"
    assert client.post(url, {"idempotency_key": str(uuid.uuid4())}).status_code == 204
    assignment_id = next_assignment_id(study, annotator)
    submit(client, assignment_id, "negative")
    key = str(uuid.uuid4())
    response = client.post(url, {"idempotency_key": key}, format="json")
    assert response.status_code == 200
    assert response.data["assignment"] == assignment_id
    assert response.data["progress"]["done"] == 0
    again = client.post(url, {"idempotency_key": key}, format="json")
    assert again.data["assignment"] == assignment_id
    (annotation,) = client.get("/api/annotations/").data["results"]
    assert annotation["value"] is None
    assert annotation["revision"] == 2
    history = client.get(f"/api/annotations/{annotation['id']}/revisions/").data
    assert [r["value"] for r in history] == [{"label": "negative"}, None]


def _answer_everything(study_setup, client_for) -> None:
    study, annotators = study_setup
    for annotator in annotators:
        client = client_for(annotator)
        for _ in range(2):
            submit(client, next_assignment_id(study, annotator), "neutral")


def test_annotators_see_only_their_own_annotations(study_setup, client_for) -> None:
    _answer_everything(study_setup, client_for)
    _, (annotator, other, _) = study_setup
    listed = client_for(annotator).get("/api/annotations/").data
    assert listed["count"] == 2
    assert {a["annotator"] for a in listed["results"]} == {annotator.pk}
    # Asking for someone else's by filter or by id reveals nothing.
    listed = client_for(annotator).get(f"/api/annotations/?annotator={other.pk}").data
    assert listed["count"] == 0
    theirs = Annotation.objects.filter(annotator=other).first()
    assert client_for(annotator).get(f"/api/annotations/{theirs.pk}/").status_code == 404
    response = client_for(annotator).get(f"/api/annotations/{theirs.pk}/revisions/")
    assert response.status_code == 404


def test_managers_see_all_of_their_studies_with_filters(study_setup, client_for) -> None:
    _answer_everything(study_setup, client_for)
    study, (annotator, *_) = study_setup
    client = client_for(study.created_by)
    assert client.get("/api/annotations/").data["count"] == 6
    question = study.questions.get()
    query = f"?study={study.pk}&question={question.pk}&annotator={annotator.pk}"
    listed = client.get(f"/api/annotations/{query}").data
    assert listed["count"] == 2
    assert {a["annotator_username"] for a in listed["results"]} == {annotator.username}
    assert client.get("/api/annotations/?study=0").data["count"] == 0
    assert client.get("/api/annotations/?study=x").status_code == 400


def test_outsiders_see_no_annotations(study_setup, outsider, client_for) -> None:
    _answer_everything(study_setup, client_for)
    study, _ = study_setup
    listed = client_for(outsider).get(f"/api/annotations/?study={study.pk}").data
    assert listed["count"] == 0
    annotation = Annotation.objects.first()
    assert client_for(outsider).get(f"/api/annotations/{annotation.pk}/").status_code == 404


def test_export_csv_by_default(study, annotator, client_for) -> None:
    submit(client_for(annotator), next_assignment_id(study, annotator), "positive")
    response = client_for(study.created_by).get(f"/api/studies/{study.pk}/export/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["annotator"], r["label"]) for r in rows] == [(annotator.username, "positive")]


def test_export_format_and_history_params(study, annotator, client_for) -> None:
    client = client_for(annotator)
    assignment_id = next_assignment_id(study, annotator)
    submit(client, assignment_id, "positive")
    submit(client, assignment_id, "negative")
    manager = client_for(study.created_by)
    # ?format= chooses the file, not a DRF renderer; Accept is ignored.
    response = manager.get(
        f"/api/studies/{study.pk}/export/?format=jsonl&history=1", HTTP_ACCEPT="text/csv"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line)["label"] for line in lines] == ["positive", "negative"]
    response = manager.get(f"/api/studies/{study.pk}/export/?format=jsonl&history=0")
    assert len(b"".join(response.streaming_content).splitlines()) == 1


def test_export_rejects_an_unknown_format_as_json(study, client_for) -> None:
    response = client_for(study.created_by).get(f"/api/studies/{study.pk}/export/?format=xml")
    assert response.status_code == 400
    assert response.json() == {"format": ['"xml" is not a valid choice.']}
