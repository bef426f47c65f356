"""Every consumer follows a question's scope (issue 24): in the mixed study of the issue
(a Likert question on sentences, a trace question on clips and green calibration screens, a
pairwise question on sentences) the label queue, the comparisons, the traces, completion,
progress, recruited packages and the exports each keep to their question's items.

Before scoping every question applied to every item: 64 of 152 judgements compared a clip or
a calibration screen with a sentence, calibration screens came up in the Likert queue as the
text "Calibration: follow the green", one set of instructions showed on every page, and a
recruited participant of a mixed study only got the label queue."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.annotations.exporting import annotation_export_rows
from apps.annotations.models import Assignment
from apps.annotations.selectors import annotator_progress, assignment_next
from apps.annotations.services import annotations_submit
from apps.continuous.selectors import next_trace_assignment, overlay_items, trace_progress
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.preferences.models import Judgement
from apps.preferences.services import judgement_record, pair_next
from apps.recruitment.models import Participant
from apps.recruitment.selectors import packages_left, participant_page, round_robin_shares
from apps.recruitment.services import (
    StudyFullError,
    participant_consent,
    participant_enter,
    participant_finish,
    participant_start_work,
    participant_training_finish,
    recruitment_update,
)
from apps.recruitment.sessions import SESSION_KEY
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add, study_set_status
from tests.apps.studies.mixed import CLIP_SECONDS, mixed_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def opened(mixed, n_annotators: int = 1):
    annotators = [UserFactory() for _ in range(n_annotators)]
    for user in annotators:
        membership_add(study=mixed.study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=mixed.study, status=Study.Status.RUNNING)
    return annotators


def label_all(mixed, user) -> list[str]:
    """Answer the label queue to its end; the items it served, in order."""
    served = []
    while (assignment := assignment_next(annotator=user, study=mixed.study)) is not None:
        served.append(assignment.item.external_id)
        annotations_submit(
            annotator=user,
            assignment=assignment,
            answers={mixed.likert: "neutral"},
            idempotency_key=uuid.uuid4(),
        )
    return served


def trace(user, question, assignment) -> None:
    recording = uuid.uuid4()
    times = np.arange(0, CLIP_SECONDS + 0.05, 0.1)
    trace_chunk_store(
        annotator=user, assignment=assignment, question=question, recording_uuid=recording,
        sequence=0, times=list(times), values=list(np.linspace(0, 1, times.size)),
    )  # fmt: skip
    trace_finish(annotator=user, recording_uuid=recording)


def trace_all(mixed, user) -> list[str]:
    traced = []
    while (assignment := next_trace_assignment(annotator=user, question=mixed.trace)) is not None:
        traced.append(assignment.item.external_id)
        trace(user, mixed.trace, assignment)
    return traced


def judge_all(mixed, user) -> list[tuple[str, str]]:
    names = {item.pk: item.external_id for item in mixed.study.items.all()}
    pairs = []
    for _ in range(200):
        state = pair_next(question=mixed.pairwise, annotator=user)
        if state.pending is None:
            return pairs
        a, b = state.pending
        pairs.append((names[a], names[b]))
        judgement_record(
            question=mixed.pairwise, annotator=user, item_a=a, item_b=b,
            outcome=1 if a < b else -1, idempotency_key=uuid.uuid4(),
        )  # fmt: skip
    raise AssertionError("the ranking never finished")


SENTENCES = {"s0", "s1", "s2", "s3"}
TRACED = {"clip0", "clip1", "clip2", "cal0", "cal1"}


# ----------------------------------------------------------------- the label queue


def test_the_label_queue_serves_only_the_likert_questions_items():
    mixed = mixed_study()
    (user,) = opened(mixed)
    assert annotator_progress(annotator=user, study=mixed.study)["total"] == 4
    assert label_all(mixed, user) == ["s0", "s1", "s2", "s3"]  # no clip, no calibration screen
    assert annotator_progress(annotator=user, study=mixed.study)["done"] == 4


def test_without_scopes_the_calibration_screen_is_in_the_label_queue_as_before():
    """The old behaviour, kept for studies whose questions have no scope."""
    mixed = mixed_study(scoped=False)
    (user,) = opened(mixed)
    assert "cal0" in label_all(mixed, user)


def test_a_label_for_an_item_outside_the_scope_is_refused():
    mixed = mixed_study()
    (user,) = opened(mixed)
    clip = Assignment.objects.get(annotator=user, item=mixed.clips[0])
    with pytest.raises(ValidationError, match="not asked about item 'clip0'"):
        annotations_submit(
            annotator=user, assignment=clip, answers={mixed.likert: "neutral"},
            idempotency_key=uuid.uuid4(),
        )  # fmt: skip


def test_the_queue_page_asks_the_covering_questions_with_their_instructions(client):
    mixed = mixed_study()
    (user,) = opened(mixed)
    client.force_login(user)
    page = client.get(reverse("annotations:queue", args=[mixed.study.pk])).content.decode()
    assert "Sentence 0 is fine." in page
    assert "Pick the <strong>sentiment</strong> with a key." in page
    assert mixed.study.instructions not in page


# ----------------------------------------------------------------- traces


def test_traces_go_through_the_clips_and_calibration_screens_only():
    mixed = mixed_study()
    (user,) = opened(mixed)
    assert trace_progress(annotator=user, question=mixed.trace) == {"done": 0, "total": 5}
    assert [i.external_id for i in overlay_items(question=mixed.trace)] == [
        "clip0", "clip1", "clip2", "cal0", "cal1",
    ]  # fmt: skip
    assert trace_all(mixed, user) == ["clip0", "clip1", "clip2", "cal0", "cal1"]
    # a clip no queue question applies to is complete once traced
    assert not Assignment.objects.filter(
        annotator=user, item__in=mixed.clips, completed_at__isnull=True
    ).exists()


def test_a_trace_of_an_item_outside_the_scope_is_refused():
    mixed = mixed_study()
    (user,) = opened(mixed)
    Assignment.objects.filter(annotator=user)
    sentence = Assignment.objects.get(annotator=user, item=mixed.sentences[0])
    with pytest.raises(ValidationError, match="not asked about this item"):
        trace(user, mixed.trace, sentence)


def test_the_trace_page_shows_the_trace_questions_instructions(client):
    mixed = mixed_study()
    (user,) = opened(mixed)
    client.force_login(user)
    url = reverse("continuous:record_next", args=[mixed.study.pk, mixed.trace.key])
    page = client.get(url, follow=True).content.decode()
    assert "Move the slider while the clip plays." in page
    assert "Pick the <strong>sentiment</strong>" not in page


# ----------------------------------------------------------------- comparisons


def test_pairs_are_only_ever_between_sentences():
    mixed = mixed_study()
    (user,) = opened(mixed)
    pairs = judge_all(mixed, user)
    assert pairs
    assert all({a, b} <= SENTENCES for a, b in pairs)
    names = set(Judgement.objects.values_list("item_a__external_id", flat=True))
    names |= set(Judgement.objects.values_list("item_b__external_id", flat=True))
    assert names <= SENTENCES


def test_without_scopes_clips_and_sentences_are_compared_as_before():
    mixed = mixed_study(scoped=False)
    (user,) = opened(mixed)
    assert any(not {a, b} <= SENTENCES for a, b in judge_all(mixed, user))


def test_the_compare_page_shows_the_pairwise_questions_instructions(client):
    mixed = mixed_study()
    (user,) = opened(mixed)
    client.force_login(user)
    page = client.get(
        reverse("preferences:compare", args=[mixed.study.pk, mixed.pairwise.key])
    ).content.decode()
    assert "Choose the <strong>more positive</strong> sentence." in page
    assert "Move the slider" not in page


# ----------------------------------------------------------------- exports


def test_exports_hold_each_questions_answers_on_its_items_only():
    mixed = mixed_study()
    (user,) = opened(mixed)
    label_all(mixed, user)
    trace_all(mixed, user)
    rows = list(annotation_export_rows(study=mixed.study))
    by_question: dict[str, set[str]] = {}
    for row in rows:
        by_question.setdefault(row["question"], set()).add(row["item"])
    assert by_question == {"likert": SENTENCES, "arousal": TRACED}


# ----------------------------------------------------------------- recruited packages


def recruiting(mixed, **options):
    study_set_status(study=mixed.study, status=Study.Status.RUNNING)
    settings = {"is_open": True, "items_per_participant": 6, "check_rate": 0.0, **options}
    return recruitment_update(study=mixed.study, **settings)


def working(recruitment, pid: str) -> Participant:
    participant = participant_enter(recruitment=recruitment, platform_id=pid).participant
    participant_consent(participant=participant, agree=True)
    participant_training_finish(participant=participant)
    return participant_start_work(participant=participant)


def test_a_mixed_package_holds_every_kind_of_work_and_walks_through_it():
    mixed = mixed_study()
    recruitment = recruiting(mixed)
    participant = working(recruitment, "P1")
    user = participant.user
    given = list(
        Assignment.objects.filter(annotator=user)
        .order_by("position")
        .values_list("item__external_id", flat=True)
    )
    assert len(given) == 6
    assert len(set(given) & SENTENCES) == 3
    assert len(set(given) & TRACED) == 3
    study = mixed.study
    assert participant_page(participant=participant) == reverse(
        "annotations:queue", args=[study.pk]
    )
    assert set(label_all(mixed, user)) == set(given) & SENTENCES
    with pytest.raises(ValidationError):
        participant_finish(participant=participant)  # traces and comparisons are left
    assert participant_page(participant=participant) == reverse(
        "continuous:record_next", args=[study.pk, mixed.trace.key]
    )
    assert set(trace_all(mixed, user)) == set(given) & TRACED
    assert participant_page(participant=participant) == reverse(
        "preferences:compare", args=[study.pk, mixed.pairwise.key]
    )
    assert all({a, b} <= set(given) & SENTENCES for a, b in judge_all(mixed, user))
    assert participant_page(participant=participant) == reverse("recruitment:end", args=[study.pk])
    assert participant_finish(participant=participant).status == Participant.Status.DONE


def test_an_unscoped_package_is_drawn_as_before():
    """One pool of every item: least taken first, in queue order."""
    mixed = mixed_study(scoped=False)
    recruitment = recruiting(mixed, items_per_participant=4)
    user = working(recruitment, "P1").user
    given = Assignment.objects.filter(annotator=user).order_by("position")
    assert list(given.values_list("item__external_id", flat=True)) == ["s0", "s1", "s2", "s3"]


def test_packages_left_counts_the_packages_the_groups_give():
    mixed = mixed_study()
    mixed.study.overlap = 1
    mixed.study.save()
    recruitment = recruiting(mixed, items_per_participant=4, max_participants=10)
    predicted = packages_left(recruitment=recruitment, limit=10)
    made = 0
    for n in range(10):
        try:
            if working(recruitment, f"P{n}").status != Participant.Status.WORKING:
                break
        except StudyFullError:  # the link admits nobody once no package is left
            break
        made += 1
    # 4 sentences and 5 traced items, 2 + 2 a package: 2 packages, then the 5th traced item
    assert predicted == made == 3


def test_round_robin_shares():
    assert round_robin_shares([10], 4) == [4]
    assert round_robin_shares([3, 5], 6) == [3, 3]
    assert round_robin_shares([0, 5], 6) == [0, 5]
    assert round_robin_shares([], 3) == []


def test_the_participant_is_sent_through_the_pages(client):
    mixed = mixed_study()
    recruitment = recruiting(mixed)
    participant = working(recruitment, "P1")
    client.force_login(participant.user)
    session = client.session
    session[SESSION_KEY] = participant.pk
    session.save()
    # the trace page sends a participant with labels left back to the queue
    url = reverse("continuous:record_next", args=[mixed.study.pk, mixed.trace.key])
    assert client.get(url)["Location"] == reverse("annotations:queue", args=[mixed.study.pk])


def test_the_recruitment_page_says_what_a_mixed_package_holds(client):
    mixed = mixed_study()
    recruiting(mixed)
    client.force_login(mixed.study.created_by)
    page = client.get(reverse("recruitment:manage", args=[mixed.study.pk])).content.decode()
    assert "3 of 4 items for <code>likert</code> (labelled), <code>better</code> (compared)" in page
    assert "3 of 5 items for <code>arousal</code> (traced)" in page


# ----------------------------------------------------------------- imports and gold answers


def test_imported_answers_and_gold_outside_a_scope_are_refused():
    from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
    from apps.recruitment.services import gold_answer_set

    mixed = mixed_study()
    (user,) = opened(mixed)
    outside = FinishedAnnotation(item="clip0", annotator=user.username, question="likert",
                                 value="neutral")  # fmt: skip
    with pytest.raises(ValidationError, match="not asked about item 'clip0'"):
        annotations_import_finished(study=mixed.study, records=[outside])
    inside = outside._replace(item="s0")
    assert annotations_import_finished(study=mixed.study, records=[inside]) == 1
    assert Assignment.objects.get(annotator=user, item=mixed.sentences[0]).completed_at
    with pytest.raises(ValidationError, match="not asked about this item"):
        gold_answer_set(item=mixed.clips[0], question=mixed.likert, value={"label": "neutral"})


def test_the_apis_next_item_names_the_questions_to_answer(client):
    from rest_framework.test import APIClient

    mixed = mixed_study()
    (user,) = opened(mixed)
    api = APIClient()
    api.force_authenticate(user)
    entry = api.get(f"/api/studies/{mixed.study.pk}/next/").data
    assert entry["item"]["text"] == "Sentence 0 is fine."
    assert entry["questions"] == ["likert"]
    assert entry["progress"]["total"] == 4


def test_an_unscoped_mixed_package_goes_on_to_the_traces_and_comparisons():
    """Issue 24: a participant of a mixed study got the label queue alone, and the completion
    code after it (no trace, no comparison): every kind of work is in the package now, even
    without scopes."""
    mixed = mixed_study(scoped=False)
    recruitment = recruiting(mixed)
    participant = working(recruitment, "P1")
    label_all(mixed, participant.user)
    assert participant_page(participant=participant) == reverse(
        "continuous:record_next", args=[mixed.study.pk, mixed.trace.key]
    )
    with pytest.raises(ValidationError):
        participant_finish(participant=participant)


def test_an_item_is_done_when_every_question_covering_it_is_answered(client):
    """Two label questions with different scopes: each item is asked the ones that cover it
    (one, or both), and is done when those are answered."""
    from apps.studies.services import question_create
    from tests.factories import SENTIMENT_LABELS

    mixed = mixed_study()
    clarity = question_create(
        study=mixed.study, key="clarity", prompt="Is it clear?", labels=SENTIMENT_LABELS,
        scope={"items": ["s0", "cal0"]},
    )  # fmt: skip
    (user,) = opened(mixed)
    assert annotator_progress(annotator=user, study=mixed.study)["total"] == 5  # 4 s + cal0
    client.force_login(user)
    page = client.get(reverse("annotations:queue", args=[mixed.study.pk])).content.decode()
    assert "How positive is the sentence?" in page
    assert "Is it clear?" in page
    s0 = Assignment.objects.get(annotator=user, item=mixed.sentences[0])
    annotations_submit(
        annotator=user, assignment=s0, answers={mixed.likert: "neutral"},
        idempotency_key=uuid.uuid4(),
    )  # fmt: skip
    s0.refresh_from_db()
    assert s0.completed_at is None  # clarity still unanswered
    annotations_submit(
        annotator=user, assignment=s0, answers={clarity: "positive"},
        idempotency_key=uuid.uuid4(),
    )  # fmt: skip
    s0.refresh_from_db()
    assert s0.completed_at is not None
    page = client.get(reverse("annotations:queue", args=[mixed.study.pk])).content.decode()
    assert "How positive is the sentence?" in page
    assert "Is it clear?" not in page
    cal0 = Assignment.objects.get(annotator=user, item=mixed.calibration[0])
    annotations_submit(
        annotator=user, assignment=cal0, answers={clarity: "neutral"},
        idempotency_key=uuid.uuid4(),
    )  # fmt: skip
    cal0.refresh_from_db()
    assert cal0.completed_at is not None  # the Likert question does not ask about it


def test_the_queue_form_takes_the_answers_of_the_covering_questions_only(client):
    from apps.studies.services import question_create
    from tests.factories import SENTIMENT_LABELS

    mixed = mixed_study()
    clarity = question_create(
        study=mixed.study, key="clarity", prompt="Is it clear?", labels=SENTIMENT_LABELS,
        scope={"items": ["cal0"]},
    )  # fmt: skip
    (user,) = opened(mixed)
    client.force_login(user)
    url = reverse("annotations:queue", args=[mixed.study.pk])

    def shown() -> dict[str, str]:
        initial = client.get(url).context["form"].initial
        return {"idempotency_key": str(initial["idempotency_key"]), "ticket": initial["ticket"]}

    # s0 is asked the Likert question alone: its answer completes it, "clarity" is not asked
    response = client.post(url, {**shown(), f"q{mixed.likert.pk}": "neutral"})
    assert response.status_code == 302
    assert Assignment.objects.get(annotator=user, item=mixed.sentences[0]).completed_at
    # an answer to a question that does not cover the item is not taken
    client.post(url, {**shown(), f"q{mixed.likert.pk}": "neutral", f"q{clarity.pk}": "neutral"})
    assert not clarity.annotations.exists()


def test_the_export_provenance_states_each_questions_scope():
    from apps.annotations.exporting import provenance

    mixed = mixed_study()
    opened(mixed)
    record = provenance(study=mixed.study, curated=False, include_history=False, fmt="csv")
    assert record["questions"] == [
        {"key": "likert", "kind": "categorical", "scope": {"metadata": {"group": ["sentence"]}},
         "items": 4},
        {"key": "arousal", "kind": "continuous",
         "scope": {"metadata": {"group": ["clip", "calibration"]}}, "items": 5},
        {"key": "better", "kind": "pairwise", "scope": {"metadata": {"group": ["sentence"]}},
         "items": 4},
    ]  # fmt: skip


def test_an_htmx_answer_brings_the_next_items_instructions(client):
    """Two label questions with their own instructions on different items: the queue swaps
    only the item area, so the instructions at the top stayed those of the first item."""
    from apps.studies.services import question_create, question_update
    from tests.factories import SENTIMENT_LABELS

    mixed = mixed_study()
    question_update(question=mixed.likert, instructions="Rate the sentence's tone.")
    question_create(
        study=mixed.study, key="clarity", prompt="Is it clear?", labels=SENTIMENT_LABELS,
        scope={"items": ["cal0"]}, instructions="Say whether the screen is clear.",
    )  # fmt: skip
    (user,) = opened(mixed)
    client.force_login(user)
    url = reverse("annotations:queue", args=[mixed.study.pk])
    assert "Rate the sentence" in client.get(url).content.decode()
    for _ in range(len(mixed.sentences)):
        initial = client.get(url).context["form"].initial
        answer = {
            "idempotency_key": str(initial["idempotency_key"]),
            "ticket": initial["ticket"],
            f"q{mixed.likert.pk}": "neutral",
        }
        html = client.post(url, answer, HTTP_HX_REQUEST="true").content.decode()
    # the sentences are done: the next item is the calibration screen, asked "clarity" alone
    assert 'id="queue-instructions" hx-swap-oob="innerHTML"' in html
    swapped = html[html.index('id="queue-instructions"') :]
    assert "Say whether the screen is clear." in swapped[: swapped.index("</div>")]
