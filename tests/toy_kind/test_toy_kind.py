"""The recipe of docs/adding-a-question-kind.md, proved: a kind that only exists in tests/
(tests/toy_kind/kind.py) and one line in QUESTION_KINDS goes through submit (API) -> quality
-> dashboard -> export, rebuilds to the same state and takes per-question quality settings."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import TestCase, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from analytics.models import Flag, QualityState
from analytics.pipeline import quality_rebuild
from analytics.selectors import latest_snapshot
from apps.annotations.selectors import assignment_next
from apps.studies.kinds import question_kind
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from core.types import Account
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.toy_kind.kind import RATING

pytestmark = pytest.mark.django_db
N_ITEMS = 24


@pytest.fixture(scope="module", autouse=True)
def rating_kind() -> Iterator[None]:
    """The registration line: the toy kind appended to the project's kinds."""
    with override_settings(QUESTION_KINDS=[*settings.QUESTION_KINDS, "tests.toy_kind.kind.RATING"]):
        yield


@pytest.fixture(scope="module")
def rated_data(module_db, rating_kind) -> tuple[Study, Question, list[Account]]:
    """:func:`rated`, made once for the module (made per test, the 120 answers through the
    API cost 20-57 s a test on PostgreSQL)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return _rated()


@pytest.fixture
def rated(db, rated_data) -> tuple[Study, Question, list[Account]]:
    """Five annotators rate 24 items through the API: four near each item's truth, one (the
    last) always 10; every answer is processed and published after its commit. What a test
    writes is rolled back after it (``module_db``)."""
    return rated_data


def _rated() -> tuple[Study, Question, list[Account]]:
    study = StudyFactory()
    question = question_create(study=study, key="score", prompt="How good?", kind="rating")
    items = ItemFactory.create_batch(N_ITEMS, study=study)
    truth = {item.pk: k % 4 for k, item in enumerate(items)}
    annotators = [UserFactory() for _ in range(5)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    for k, user in enumerate(annotators):
        client = APIClient()
        client.force_authenticate(user)
        while (assignment := assignment_next(annotator=user, study=study)) is not None:
            rating = 10 if k == 4 else truth[assignment.item_id] + (k % 2)
            response = client.post(
                "/api/annotations/",
                {
                    "assignment": assignment.pk,
                    "answers": {"score": {"rating": rating}},
                    "idempotency_key": str(uuid.uuid4()),
                },
                format="json",
            )
            assert response.status_code == 201, response.data
    return study, question, annotators


def test_the_kind_is_registered_by_its_settings_line():
    assert question_kind("rating") is RATING
    with pytest.raises(ValidationError):
        question_create(study=StudyFactory(), key="bad", prompt="?", kind="stars")


def test_answers_are_validated_by_the_kind(rated):
    study, _question, annotators = rated
    client = APIClient()
    client.force_authenticate(annotators[0])
    assignment = study.assignments.filter(annotator=annotators[0]).first()
    body = {
        "assignment": assignment.pk,
        "answers": {"score": 11},
        "idempotency_key": str(uuid.uuid4()),
    }
    response = client.post("/api/annotations/", body, format="json")
    assert response.status_code == 400
    assert "0 to 10" in str(response.data)


def test_quality_flags_the_outlier_and_live_equals_rebuild(rated):
    study, question, annotators = rated
    snapshot = latest_snapshot(question=question)
    values = snapshot.indicators["values"]
    row = snapshot.indicators["annotators"].index
    assert values["ratings_done"][row(annotators[0].pk)] == N_ITEMS
    assert (
        values["closeness"][row(annotators[4].pk)]
        < 0.5
        < values["closeness"][row(annotators[0].pk)]
    )
    (flag,) = Flag.objects.filter(question=question, active=True)
    assert (flag.annotator_id, flag.indicator) == (annotators[4].pk, "closeness")
    assert flag.reason.startswith("closeness to others ")
    live = bytes(QualityState.objects.get(question=question).stats)
    quality_rebuild(question_id=question.pk)
    assert bytes(QualityState.objects.get(question=question).stats) == live
    call_command("rebuild_quality", str(study.pk), stdout=io.StringIO())
    assert bytes(QualityState.objects.get(question=question).stats) == live


def test_dashboard_shows_the_kinds_columns_and_flag(rated, client):
    study, question, _annotators = rated
    client.force_login(study.created_by)
    page = client.get(reverse("analytics:dashboard", args=[study.pk]), {"question": question.pk})
    html = page.content.decode()
    assert page.status_code == 200
    for text in ("Ratings", "Mean rating", "Closeness to others", "closeness to others 0.2"):
        assert text in html
    assert 'id="quality-heatmap"' in html


def test_export_goes_through_the_kinds_export_function(rated):
    study, _question, annotators = rated
    rows = list(RATING.export_functions["answers"](study=study))
    assert len(rows) == 5 * N_ITEMS
    assert {
        row["value"]["rating"] for row in rows if row["annotator"] == annotators[4].username
    } == {10}


def test_per_question_quality_settings_are_validated_against_the_kinds_indicators(rated):
    study, _question, _ = rated
    override = {"quality": {"rules": {"closeness": {"floor": 0.1}}, "min_evidence": {"items": 5}}}
    other = question_create(
        study=study, key="lenient", prompt="?", kind="rating", settings=override
    )
    assert other.settings == {"quality": override["quality"]}
    for bad in (
        {"quality": {"rules": {"kappa": {"floor": 0.1}}}},  # not an indicator of this kind
        {"quality": {"rules": {"ratings_done": {"z": 2}}}},  # not flagged
        {"quality": {"rules": {"closeness": {"z": -2}}}},  # z is a distance
        {"quality": {"min_evidence": {"triplets": 5}}},  # not an evidence unit of the kind
        {"stars": 5},  # the kind takes no settings of its own
    ):
        with pytest.raises(ValidationError):
            question_create(study=study, key="bad", prompt="?", kind="rating", settings=bad)


def test_the_question_editor_serves_a_kind_without_a_settings_form(client):
    """No labels, no settings form, no preview template: the editor offers the fields every
    question has and the advanced box (its quality overrides), and says there is no preview."""
    study = StudyFactory()
    client.force_login(study.created_by)
    url = reverse("studies:question_create", args=[study.pk]) + "?kind=rating"
    html = client.get(url).content.decode()
    assert 'name="advanced"' in html
    assert "labels-TOTAL_FORMS" not in html
    assert 'name="settings-' not in html
    assert "No preview for this kind of question." in html
    override = '{"quality": {"min_evidence": {"items": 5}}}'
    data = {"kind": "rating", "key": "score", "prompt": "How good?", "advanced": override}
    assert client.post(url, data).status_code == 302
    assert study.questions.get().settings["quality"]["min_evidence"] == {"items": 5}
    response = client.post(url, {**data, "key": "other", "advanced": '{"stars": 5}'})
    assert response.status_code == 422
    assert "rating questions take no settings." in response.content.decode()
