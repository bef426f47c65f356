"""Questions scoped to items (issue 24): the one selector, its validation, the service's
guard on answered items, the API and the question editor's counts and warnings."""

from __future__ import annotations

import uuid

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.scope import clean_scope, scope_matches
from apps.studies.selectors import (
    covering_questions,
    items_of_any,
    question_coverage,
    question_items,
)
from apps.studies.services import membership_add, question_update, study_set_status
from tests.apps.studies.mixed import mixed_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_for():
    def make(user) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client

    return make


def ids(items) -> list[str]:
    return [item.external_id for item in items]


def test_the_selector_keeps_each_questions_items():
    mixed = mixed_study()
    assert ids(question_items(mixed.likert)) == ["s0", "s1", "s2", "s3"]
    assert ids(question_items(mixed.trace)) == ["clip0", "clip1", "clip2", "cal0", "cal1"]
    assert ids(question_items(mixed.pairwise)) == ids(question_items(mixed.likert))


def test_an_empty_scope_is_every_item():
    mixed = mixed_study(scoped=False)
    assert question_items(mixed.likert).count() == 9
    assert not items_of_any([mixed.likert, mixed.trace])  # Q(): no condition at all


def test_kinds_tags_and_ids_combine_with_and():
    mixed = mixed_study()
    both = Question(
        study=mixed.study, scope={"kinds": ["text"], "metadata": {"group": "calibration"}}
    )
    assert ids(question_items(both)) == ["cal0", "cal1"]
    listed = Question(study=mixed.study, scope={"kinds": ["audio"], "items": ["clip1", "s0"]})
    assert ids(question_items(listed)) == ["clip1"]
    # a metadata column named like a lookup is a column, not a lookup
    Item.objects.filter(external_id="s0").update(metadata={"in": "x"})
    assert ids(question_items(Question(study=mixed.study, scope={"metadata": {"in": "x"}}))) == [
        "s0"
    ]


def test_the_python_test_agrees_with_the_database():
    mixed = mixed_study()
    items = list(mixed.study.items.order_by("position"))
    for question in (mixed.likert, mixed.trace, mixed.pairwise):
        in_db = set(question_items(question).values_list("pk", flat=True))
        assert {i.pk for i in items if covering_questions([question], i)} == in_db


@settings(max_examples=60, deadline=None)
@given(
    value=st.one_of(st.text(max_size=3), st.integers(-2, 2), st.booleans()),
    wanted=st.one_of(st.text(max_size=3), st.integers(-2, 2), st.booleans()),
)
def test_metadata_values_compare_as_json(value, wanted):
    """``scope_matches`` is JSON equality: "1" is not 1, true is not 1 (as the database)."""
    matched = scope_matches({"metadata": {"k": [wanted]}}, kind="text", metadata={"k": value},
                            external_id="x")  # fmt: skip
    assert matched == (type(value) is type(wanted) and value == wanted)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "A scope is an object"),
        ({"kind": ["audio"]}, "Unknown scope keys: kind"),
        ({"kinds": ["sound"]}, "'sound': use text, image, audio, video"),
        ({"kinds": "audio"}, "kinds: give a list"),
        ({"metadata": {"a b": "x"}}, "is not a column name"),
        ({"metadata": {"group": {"x": 1}}}, "needs a value"),
        ({"metadata": {"group": []}}, "needs a value"),
        ({"items": "s1"}, "items: give a list"),
        ({"items": [""]}, "items: give a list"),
    ],
)
def test_bad_scopes_are_refused_with_a_message(raw, message):
    with pytest.raises(ValidationError) as caught:
        clean_scope(raw)
    assert message in " ".join(caught.value.message_dict["scope"])


def test_clean_scope_normalises():
    assert clean_scope(None) == {} == clean_scope({"kinds": [], "metadata": {}, "items": []})
    assert clean_scope(
        {"kinds": ["video", "audio"], "metadata": {"g": "a"}, "items": ["x", "x"]}
    ) == {
        "kinds": ["audio", "video"],
        "metadata": {"g": ["a"]},
        "items": ["x"],
    }


def test_coverage_counts_kinds_and_calibration_screens_apart():
    mixed = mixed_study(scoped=False)
    assert question_coverage(mixed.likert) == {"total": 9, "text": 4, "audio": 3, "calibration": 2}
    mixed = mixed_study()
    assert question_coverage(mixed.trace) == {"total": 5, "audio": 3, "calibration": 2}


def opened(mixed) -> tuple[Study, list]:
    annotators = [UserFactory() for _ in range(2)]
    for user in annotators:
        membership_add(study=mixed.study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=mixed.study, status=Study.Status.RUNNING)
    return mixed.study, annotators


def test_a_scope_that_leaves_out_answered_items_is_refused():
    mixed = mixed_study(scoped=False)
    _study, (annotator, _) = opened(mixed)
    calibration = Assignment.objects.get(annotator=annotator, item=mixed.calibration[0])
    annotations_submit(
        annotator=annotator,
        assignment=calibration,
        answers={mixed.likert: "neutral"},
        idempotency_key=uuid.uuid4(),
    )
    with pytest.raises(ValidationError) as caught:
        question_update(question=mixed.likert, scope={"metadata": {"group": "sentence"}})
    assert "cal0" in caught.value.message_dict["scope"][0]
    question_update(question=mixed.likert, scope={"kinds": ["text"]})  # still covers cal0
    assert Question.objects.get(pk=mixed.likert.pk).scope == {"kinds": ["text"]}


def test_widening_a_scope_in_a_running_study_gives_the_new_items_out():
    mixed = mixed_study()
    question_update(question=mixed.trace, scope={"metadata": {"group": "clip"}})
    _study, (annotator, _) = opened(mixed)
    assert Assignment.objects.filter(annotator=annotator).count() == 7  # no calibration
    question_update(question=mixed.trace, scope={"kinds": ["audio", "text"]})
    assert Assignment.objects.filter(annotator=annotator).count() == 9


def test_an_item_no_question_applies_to_is_nobodys_work():
    mixed = mixed_study()
    question_update(question=mixed.trace, scope={"metadata": {"group": "clip"}})
    _study, (annotator, _) = opened(mixed)
    given = set(
        Assignment.objects.filter(annotator=annotator).values_list("item__external_id", flat=True)
    )
    assert given == {"s0", "s1", "s2", "s3", "clip0", "clip1", "clip2"}


# ----------------------------------------------------------------- API


def test_the_api_reads_and_writes_scope_and_instructions(client_for):
    mixed = mixed_study()
    client = client_for(mixed.study.created_by)
    url = f"/api/studies/{mixed.study.pk}/questions/"
    listed = {q["key"]: q for q in client.get(url).data["results"]}
    assert listed["likert"]["scope"] == {"metadata": {"group": ["sentence"]}}
    assert listed["likert"]["items_covered"] == 4
    assert listed["arousal"]["instructions"] == "Move the slider while the clip plays."
    response = client.post(
        url,
        {
            "key": "clarity",
            "prompt": "Is the clip clear?",
            "labels": [{"key": "yes"}, {"key": "no"}],
            "scope": {"kinds": ["audio"]},
            "instructions": "Listen once.",
        },
        format="json",
    )
    assert response.status_code == 201, response.data
    assert response.data["scope"] == {"kinds": ["audio"]}
    assert response.data["items_covered"] == 3
    patched = client.patch(
        f"{url}{response.data['id']}/", {"scope": {"items": ["clip0"]}}, format="json"
    )
    assert patched.data["items_covered"] == 1


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        ({"kinds": ["sound"]}, "kinds"),
        ({"metadata": {"a b": "x"}}, "scope"),
        ({"metadata": {"g": {"x": 1}}}, "scope"),
        ({"nonsense": 1}, "scope"),
        ("audio", "scope"),
    ],
)
def test_bad_scopes_are_400_with_field_messages(client_for, scope, field):
    mixed = mixed_study()
    client = client_for(mixed.study.created_by)
    response = client.patch(
        f"/api/studies/{mixed.study.pk}/questions/{mixed.likert.pk}/",
        {"scope": scope},
        format="json",
    )
    assert response.status_code == 400
    assert field in str(response.data)
    assert Question.objects.get(pk=mixed.likert.pk).scope == {"metadata": {"group": ["sentence"]}}


# ----------------------------------------------------------------- the question editor


def test_the_editor_shows_the_coverage_and_warns_on_mixed_kinds(client):
    mixed = mixed_study(scoped=False)
    client.force_login(mixed.study.created_by)
    url = reverse("studies:question_edit", args=[mixed.study.pk, mixed.likert.pk])
    page = client.get(url).content.decode()
    assert (
        "Applies to <strong>9 items</strong> (every item): 4 text, 3 audio, 2 calibration" in page
    )
    assert 'id="scope-mixed"' in page
    mixed = mixed_study()
    client.force_login(mixed.study.created_by)
    trace = client.get(reverse("studies:question_edit", args=[mixed.study.pk, mixed.trace.pk]))
    text = trace.content.decode()
    assert "Applies to <strong>5 items</strong>" in text
    assert 'id="scope-mixed"' not in text  # clips with their green calibration screens


def editor_post(mixed, question, **fields):
    data = {
        "key": question.key,
        "prompt": question.prompt,
        "editor": "save",
        "labels-TOTAL_FORMS": 3,
        "labels-INITIAL_FORMS": 3,
        "ordered": "on",
    }
    for i, label in enumerate(question.labels.all()):
        data |= {f"labels-{i}-key": label.key, f"labels-{i}-name": label.name,
                 f"labels-{i}-shortcut": label.shortcut}  # fmt: skip
    return data | fields


def test_the_editor_saves_a_scope_typed_in_its_fields(client):
    mixed = mixed_study(scoped=False)
    client.force_login(mixed.study.created_by)
    url = reverse("studies:question_edit", args=[mixed.study.pk, mixed.likert.pk])
    data = editor_post(
        mixed,
        mixed.likert,
        scope_kinds=["text"],
        scope_tags="group = sentence, story",
        scope_items="s0, s1\ns2",
        instructions="Only *sentences*.",
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    question = Question.objects.get(pk=mixed.likert.pk)
    assert question.scope == {
        "kinds": ["text"],
        "metadata": {"group": ["sentence", "story"]},
        "items": ["s0", "s1", "s2"],
    }
    assert question.instructions == "Only *sentences*."
    again = client.get(url).content.decode()
    assert "group = sentence, story" in again
    assert "Applies to <strong>3 items</strong>" in again


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope_tags": "group sentence"}, "as column = value, value"),
        ({"scope_tags": "a b = x"}, "is not a column name"),
        ({"scope_kinds": ["sound"]}, "Select a valid choice"),
    ],
)
def test_the_editor_shows_scope_errors_at_their_field(client, fields, message):
    mixed = mixed_study(scoped=False)
    client.force_login(mixed.study.created_by)
    url = reverse("studies:question_edit", args=[mixed.study.pk, mixed.likert.pk])
    response = client.post(url, editor_post(mixed, mixed.likert, **fields))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert Question.objects.get(pk=mixed.likert.pk).scope == {}


def test_the_overview_lists_how_many_items_each_question_asks_about(client):
    mixed = mixed_study()
    client.force_login(mixed.study.created_by)
    page = client.get(reverse("studies:overview", args=[mixed.study.pk])).content.decode()
    assert "Asks about 4 items (items tagged group = sentence): 4 text." in page
    assert (
        "Asks about 5 items (items tagged group = clip or calibration): 3 audio, 2 calibration."
        in page
    )
    assert "data-scope-mixed" not in page
    unscoped = mixed_study(scoped=False)
    client.force_login(unscoped.study.created_by)
    page = client.get(reverse("studies:overview", args=[unscoped.study.pk])).content.decode()
    assert page.count("data-scope-mixed") == 3  # every question asks about every kind


def test_a_trace_question_covering_items_it_cannot_trace_is_pointed_out(client):
    """Unscoped, the trace question of a mixed study covers 4 sentences the recorder never
    offers: a recruited package holding one only traced would never complete."""
    mixed = mixed_study(scoped=False)
    client.force_login(mixed.study.created_by)
    url = reverse("studies:question_edit", args=[mixed.study.pk, mixed.trace.pk])
    assert "4 of its items cannot be traced" in client.get(url).content.decode()
    overview = client.get(reverse("studies:overview", args=[mixed.study.pk])).content.decode()
    assert overview.count("data-scope-problem") == 1
    scoped = mixed_study()
    client.force_login(scoped.study.created_by)
    url = reverse("studies:question_edit", args=[scoped.study.pk, scoped.trace.pk])
    assert 'id="scope-problem"' not in client.get(url).content.decode()


def test_a_pairwise_scope_that_leaves_out_judged_items_is_refused():
    from apps.preferences.services import judgement_record, pair_next

    mixed = mixed_study(scoped=False)
    _study, (annotator, _) = opened(mixed)
    a, b = pair_next(question=mixed.pairwise, annotator=annotator).pending
    judgement_record(question=mixed.pairwise, annotator=annotator, item_a=a, item_b=b,
                     outcome=1, idempotency_key=uuid.uuid4())  # fmt: skip
    judged = set(Item.objects.filter(pk__in=[a, b]).values_list("external_id", flat=True))
    leave_out = [i.external_id for i in mixed.study.items.exclude(external_id__in=judged)][:1]
    keep = [i for i in mixed.study.items.values_list("external_id", flat=True) if i not in judged]
    with pytest.raises(ValidationError) as caught:
        question_update(question=mixed.pairwise, scope={"items": keep})
    assert sorted(judged)[0] in caught.value.message_dict["scope"][0]
    question_update(question=mixed.pairwise, scope={"items": sorted(judged) + leave_out})
