"""Studies, questions, memberships and invitations through the API."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts.services import invitation_join, invitation_lookup, invitation_token_hash
from apps.studies.models import Membership, Question, Study
from tests.api.helpers import next_assignment_id, submit
from tests.factories import PASSWORD, SENTIMENT_LABELS, StudyFactory, UserFactory


def test_token_from_username_and_password_authenticates(study_setup) -> None:
    study, (annotator, *_) = study_setup
    client = APIClient()
    response = client.post(
        "/api/auth/token/", {"username": annotator.username, "password": PASSWORD}
    )
    assert response.status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.data['token']}")
    assert client.get(f"/api/studies/{study.pk}/").data["role"] == "annotator"


def test_wrong_password_gets_no_token(study_setup) -> None:
    _, (annotator, *_) = study_setup
    response = APIClient().post(
        "/api/auth/token/", {"username": annotator.username, "password": "wrong"}
    )
    assert response.status_code == 400


def test_session_login_works_too(study_setup) -> None:
    study, _ = study_setup
    client = APIClient()
    client.force_login(study.created_by)
    assert client.get("/api/studies/").data["results"][0]["role"] == "manager"


def test_list_shows_only_my_studies_with_my_role(study_setup, outsider, client_for) -> None:
    study, (annotator, *_) = study_setup
    other = StudyFactory(created_by=outsider)
    listed = client_for(annotator).get("/api/studies/").data
    assert listed["count"] == 1
    assert [(s["id"], s["role"]) for s in listed["results"]] == [(study.pk, "annotator")]
    listed = client_for(outsider).get("/api/studies/").data
    assert [(s["id"], s["role"]) for s in listed["results"]] == [(other.pk, "manager")]


def test_list_is_paginated(client_for) -> None:
    manager = UserFactory(manager=True)
    StudyFactory.create_batch(3, created_by=manager)
    page = client_for(manager).get("/api/studies/?limit=2").data
    assert page["count"] == 3
    assert len(page["results"]) == 2
    assert page["next"]


def test_create_makes_me_manager_of_a_draft(client_for) -> None:
    creator = UserFactory(manager=True)
    response = client_for(creator).post(
        "/api/studies/", {"name": "Emotions", "overlap": 2, "repeat_rate": 0.1}, format="json"
    )
    assert response.status_code == 201
    assert response.data["role"] == "manager"
    assert response.data["status"] == "draft"
    study = Study.objects.get(pk=response.data["id"])
    assert study.created_by == creator
    assert study.overlap == 2
    assert Membership.objects.get(study=study).user == creator


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "name"),
        ({"name": "x", "repeat_rate": 2}, "repeat_rate"),
        ({"name": "x", "overlap": 0}, "overlap"),
    ],
)
def test_create_rejects_bad_fields(client_for, data, field) -> None:
    response = client_for(UserFactory(manager=True)).post("/api/studies/", data, format="json")
    assert response.status_code == 400
    assert field in response.data
    assert not Study.objects.exists()


def test_manager_edits_the_study(study_setup, client_for) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).patch(
        f"/api/studies/{study.pk}/", {"instructions": "Read twice."}, format="json"
    )
    assert response.status_code == 200
    assert response.data["instructions"] == "Read twice."
    study.refresh_from_db()
    assert study.instructions == "Read twice."
    assert study.name == response.data["name"]


def test_status_change_goes_through_the_service(client_for) -> None:
    study = StudyFactory()
    client = client_for(study.created_by)
    response = client.post(f"/api/studies/{study.pk}/status/", {"status": "running"})
    # The service refuses to open a study without questions: a 400 naming the field.
    assert response.status_code == 400
    assert response.data == {"status": ["Add at least one question before opening."]}
    response = client.post(f"/api/studies/{study.pk}/status/", {"status": "closed"})
    assert response.status_code == 200
    assert response.data["status"] == "closed"
    response = client.post(f"/api/studies/{study.pk}/status/", {"status": "paused"})
    assert response.status_code == 400
    assert "status" in response.data


def test_questions_create_with_labels_and_members_read_them(study_setup, client_for) -> None:
    study, (annotator, *_) = study_setup
    labels = [
        {"key": "calm", "name": "Calm", "shortcut": "c", "valence": 0.5, "arousal": -0.5},
        {"key": "tense", "shortcut": "t", "valence": -0.5, "arousal": 0.5},
    ]
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "arousal", "prompt": "How tense?", "ordered": True, "labels": labels},
        format="json",
    )
    assert response.status_code == 201
    assert [label["key"] for label in response.data["labels"]] == ["calm", "tense"]
    assert response.data["labels"][1]["name"] == "tense"  # the name defaults to the key
    assert response.data["position"] == 1
    listed = client_for(annotator).get(f"/api/studies/{study.pk}/questions/").data
    assert [q["key"] for q in listed["results"]] == ["sentiment", "arousal"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"key": "x", "prompt": "?", "labels": [{"key": "only"}]}, "labels"),
        ({"key": "x", "prompt": "?", "labels": [{"key": "a"}, {"key": "a"}]}, "labels[1]"),
        (
            {"key": "x", "prompt": "?", "labels": [{"key": "a", "valence": 1}, {"key": "b"}]},
            "labels[0]",
        ),
        ({"key": "not a slug", "prompt": "?"}, "key"),
        ({"key": "sentiment", "prompt": "?", "labels": [{"key": "a"}, {"key": "b"}]}, None),
    ],
)
def test_question_errors_are_400_and_store_nothing(study_setup, client_for, data, field) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/questions/", data, format="json"
    )
    assert response.status_code == 400
    assert (field or "non_field_errors") in response.data
    assert study.questions.count() == 1


def test_repeated_shortcut_is_a_400(study_setup, client_for) -> None:
    study, _ = study_setup
    labels = [{"key": "a", "shortcut": "1"}, {"key": "b", "shortcut": "1"}]
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "x", "prompt": "?", "labels": labels},
        format="json",
    )
    assert response.status_code == 400
    assert response.data["labels[1]"] == [
        "The shortcut '1' is already label 1's; each label needs its own."
    ]


@pytest.mark.parametrize("shortcut", ["s", "u", "S", "U"])
def test_the_queues_own_keys_are_refused_as_shortcuts(study_setup, client_for, shortcut) -> None:
    """Skip (s) and undo (u) belong to the queue: the API refuses them as the page does."""
    study, _ = study_setup
    labels = [{"key": "a", "shortcut": shortcut}, {"key": "b", "shortcut": "2"}]
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "x", "prompt": "?", "labels": labels},
        format="json",
    )
    assert response.status_code == 400
    assert "is kept for skip (s) and undo (u)" in str(response.data["labels[0]"])
    assert study.questions.count() == 1


def test_question_update_keeps_labels_by_key(study_setup, client_for) -> None:
    study, _ = study_setup
    question = study.questions.get()
    ids = dict(question.labels.values_list("key", "id"))
    labels = [{**label, "name": label["name"].upper()} for label in SENTIMENT_LABELS]
    response = client_for(study.created_by).patch(
        f"/api/studies/{study.pk}/questions/{question.pk}/",
        {"prompt": "Sentiment?", "labels": labels},
        format="json",
    )
    assert response.status_code == 200
    assert response.data["prompt"] == "Sentiment?"
    assert [label["name"] for label in response.data["labels"]] == [
        "NEGATIVE",
        "NEUTRAL",
        "POSITIVE",
    ]
    assert dict(question.labels.values_list("key", "id")) == ids


def test_changing_an_answered_questions_kind_is_refused(study_setup, client_for) -> None:
    study, (annotator, *_) = study_setup
    submit(client_for(annotator), next_assignment_id(study, annotator))
    question = study.questions.get()
    response = client_for(study.created_by).patch(
        f"/api/studies/{study.pk}/questions/{question.pk}/", {"kind": "pairwise"}, format="json"
    )
    assert response.status_code == 400
    assert "kind" in response.data
    assert Question.objects.get(pk=question.pk).kind == "categorical"


def test_question_of_another_study_is_404(study_setup, outsider, client_for) -> None:
    study, _ = study_setup
    other = StudyFactory(created_by=outsider)
    question = study.questions.get()
    # Through the outsider's own study: the question is not in it.
    response = client_for(outsider).get(f"/api/studies/{other.pk}/questions/{question.pk}/")
    assert response.status_code == 404


def test_memberships_list_and_invite_an_existing_user(study_setup, client_for) -> None:
    study, annotators = study_setup
    client = client_for(study.created_by)
    listed = client.get(f"/api/studies/{study.pk}/memberships/").data
    assert sorted(m["username"] for m in listed["results"]) == sorted(
        [study.created_by.username, *(a.username for a in annotators)]
    )
    colleague = UserFactory()
    response = client.post(
        f"/api/studies/{study.pk}/memberships/",
        {"username": colleague.username, "role": "manager"},
        format="json",
    )
    assert response.status_code == 202
    assert response.data["role"] == "manager"
    assert "joins the study when it accepts" in response.data["detail"]
    assert not Membership.objects.filter(study=study, user=colleague).exists()
    invitation = study.invitations.get()
    invitation_join(invitation_id=invitation.pk, user=colleague)
    assert Membership.objects.get(study=study, user=colleague).role == "manager"


def test_inviting_an_unknown_user_answers_the_same(study_setup, client_for) -> None:
    study, _ = study_setup
    client = client_for(study.created_by)
    url = f"/api/studies/{study.pk}/memberships/"
    known = client.post(url, {"username": UserFactory().username}, format="json")
    unknown = client.post(url, {"username": "nobody"}, format="json")
    assert known.status_code == unknown.status_code == 202
    assert known.data.keys() == unknown.data.keys()
    for field in ("role", "detail"):
        assert known.data[field] == unknown.data[field]


def test_new_annotator_account_can_log_in_and_gets_work(study_setup, client_for) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/memberships/new-annotator/",
        {"username": "newbie", "password": PASSWORD},
        format="json",
    )
    assert response.status_code == 201
    assert response.data["username"] == "newbie"
    assert response.data["role"] == "annotator"
    token = APIClient().post("/api/auth/token/", {"username": "newbie", "password": PASSWORD})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.data['token']}")
    assert client.get(f"/api/studies/{study.pk}/next/").status_code == 200


@pytest.mark.parametrize(
    ("data", "field"),
    [({"username": "newbie", "password": "123"}, "password"), ({"username": "newbie"}, "password")],
)
def test_new_annotator_errors(study_setup, client_for, data, field) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/memberships/new-annotator/", data, format="json"
    )
    assert response.status_code == 400
    assert field in response.data


def test_taken_username_is_refused(study_setup, client_for) -> None:
    study, (annotator, *_) = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/memberships/new-annotator/",
        {"username": annotator.username.upper(), "password": PASSWORD},
        format="json",
    )
    assert response.status_code == 400
    assert response.data == {"username": ["That username is taken."]}


def test_invitation_link_is_shown_once_and_works(study_setup, client_for) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/invitations/", {"role": "manager", "valid_days": 3}, format="json"
    )
    assert response.status_code == 201
    url = response.data["url"]
    assert url.startswith("http://testserver/invite/")
    assert url.endswith("/")
    token = url.removeprefix("http://testserver/invite/").removesuffix("/")
    invitation = invitation_lookup(token_hash=invitation_token_hash(token))
    assert invitation.pk == response.data["id"]
    assert invitation.role == "manager"
    assert token not in invitation.token_hash


def test_invitation_validity_is_bounded(study_setup, client_for) -> None:
    study, _ = study_setup
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/invitations/", {"valid_days": 0}, format="json"
    )
    assert response.status_code == 400
    assert "valid_days" in response.data
