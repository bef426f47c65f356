"""Participants through their phases: entry, consent, training, packages, time limit, codes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.annotations.models import Assignment
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.recruitment.models import GoldAnswer, Participant
from apps.recruitment.services import (
    StudyFullError,
    participant_consent,
    participant_enter,
    participant_finish,
    participant_start_work,
    participant_training_answer,
    participant_training_finish,
    participants_release_expired,
    recruitment_update,
)
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add, study_set_status
from tests.apps.recruitment.setup import CHECK_ANSWER, TRAINING_ANSWER, recruiting_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
Status = Participant.Status


def answer_all(participant: Participant, label: str = "neutral") -> list[int]:
    """Answer the participant's whole package in queue order; return the item ids seen."""
    seen = []
    question = participant.study.questions.get()
    while assignment := assignment_next(annotator=participant.user, study=participant.study):
        seen.append(assignment.item_id)
        annotations_submit(
            annotator=participant.user,
            assignment=assignment,
            answers={question: label},
            idempotency_key=__import__("uuid").uuid4(),
        )
    return seen


def qualified(recruitment, platform_id: str = "PID1") -> Participant:
    participant = participant_enter(recruitment=recruitment, platform_id=platform_id).participant
    participant_consent(participant=participant, agree=True)
    for gold in GoldAnswer.objects.filter(use="training", item__study=recruitment.study):
        participant_training_answer(participant=participant, gold=gold, value=TRAINING_ANSWER)
    return participant_training_finish(participant=participant)


def test_entry_makes_one_pseudonymous_participant_per_platform_id():
    study, recruitment = recruiting_study()
    first = participant_enter(
        recruitment=recruitment, platform_id="5f1a", session_id="S1"
    ).participant
    again = participant_enter(
        recruitment=recruitment, platform_id="5f1a", session_id="S1"
    ).participant
    other = participant_enter(recruitment=recruitment, platform_id="6b2c").participant
    assert first.pk == again.pk != other.pk
    assert Participant.objects.filter(study=study).count() == 2
    user = first.user
    assert not user.has_usable_password()
    assert "5f1a" not in user.username  # pseudonymous
    assert Membership.objects.get(study=study, user=user).role == Membership.Role.ANNOTATOR
    assert first.platform_session_id == "S1"  # the first arrival's session is kept


def test_the_link_admits_at_most_max_participants_but_returning_ones_continue():
    _, recruitment = recruiting_study(max_participants=2)
    a = participant_enter(recruitment=recruitment, platform_id="a").participant
    participant_enter(recruitment=recruitment, platform_id="b")
    with pytest.raises(StudyFullError):  # the platform's "study full" screen-out
        participant_enter(recruitment=recruitment, platform_id="c")
    entry = participant_enter(recruitment=recruitment, platform_id="a", same_browser=True)
    assert entry.participant.pk == a.pk
    assert Participant.objects.count() == 2


def test_a_closed_link_or_a_stopped_study_takes_no_one_new():
    study, recruitment = recruiting_study()
    known = participant_enter(recruitment=recruitment, platform_id="known").participant
    recruitment = recruitment_update(study=study, is_open=False)
    with pytest.raises(ValidationError, match="not taking"):
        participant_enter(recruitment=recruitment, platform_id="new")
    returning = participant_enter(recruitment=recruitment, platform_id="known", same_browser=True)
    assert returning.participant.pk == known.pk
    recruitment = recruitment_update(study=study, is_open=True)
    study_set_status(study=study, status=Study.Status.CLOSED)
    with pytest.raises(ValidationError, match="not taking"):
        participant_enter(recruitment=recruitment, platform_id="new")


def test_a_bad_platform_id_is_refused():
    _, recruitment = recruiting_study()
    with pytest.raises(ValidationError):
        participant_enter(recruitment=recruitment, platform_id="=cmd|x")


def test_declining_consent_ends_the_visit_and_agreeing_keeps_the_answers():
    _, recruitment = recruiting_study()
    no = participant_consent(
        participant=participant_enter(recruitment=recruitment, platform_id="no").participant,
        agree=False,
    )
    assert no.status == Status.DECLINED
    assert no.ended_at is not None
    assert no.has_ended
    yes = participant_consent(
        participant=participant_enter(recruitment=recruitment, platform_id="yes").participant,
        agree=True,
        answers={"age": 30},
    )
    assert (yes.status, yes.answers) == (Status.CONSENTED, {"age": 30})
    # consenting twice (a second tab) changes nothing
    again = participant_consent(participant=yes, agree=False)
    assert again.status == Status.CONSENTED


def test_training_at_the_threshold_qualifies_below_it_screens_out():
    _, recruitment = recruiting_study(qualification_threshold=0.5)
    golds = list(GoldAnswer.objects.filter(use="training").order_by("item__position"))
    half = participant_enter(recruitment=recruitment, platform_id="half").participant
    participant_consent(participant=half, agree=True)
    right = participant_training_answer(participant=half, gold=golds[0], value=TRAINING_ANSWER)
    wrong = participant_training_answer(participant=half, gold=golds[1], value="neutral")
    assert (right.correct, wrong.correct) == (True, False)
    assert Participant.objects.get(pk=half.pk).status == Status.TRAINING
    # the first answer counts: answering again does not change it
    again = participant_training_answer(participant=half, gold=golds[1], value=TRAINING_ANSWER)
    assert again.pk == wrong.pk
    assert not again.correct
    half = participant_training_finish(participant=half)
    assert (half.status, half.training_score, half.code_issued) == (Status.QUALIFIED, 0.5, "")

    none = participant_enter(recruitment=recruitment, platform_id="none").participant
    participant_consent(participant=none, agree=True)
    with pytest.raises(ValidationError, match="every training item"):
        participant_training_finish(participant=none)
    for gold in golds:
        participant_training_answer(participant=none, gold=gold, value="neutral")
    none = participant_training_finish(participant=none)
    assert (none.status, none.training_score) == (Status.SCREENED_OUT, 0.0)
    assert none.code_issued == "SCREEN0UT"
    assert none.ended_at is not None
    with pytest.raises(ValidationError, match="Training is over"):
        participant_training_answer(participant=none, gold=golds[0], value=TRAINING_ANSWER)


def test_an_attention_check_is_no_training_item():
    _, recruitment = recruiting_study()
    participant = participant_enter(recruitment=recruitment, platform_id="p").participant
    participant_consent(participant=participant, agree=True)
    check = GoldAnswer.objects.filter(use="check").first()
    with pytest.raises(ValidationError, match="not a training item"):
        participant_training_answer(participant=participant, gold=check, value=CHECK_ANSWER)


def test_a_study_without_training_qualifies_everyone():
    _, recruitment = recruiting_study(n_training=0)
    participant = participant_enter(recruitment=recruitment, platform_id="p").participant
    participant_consent(participant=participant, agree=True)
    assert participant_training_finish(participant=participant).status == Status.QUALIFIED


def test_a_package_mixes_checks_among_regular_items_and_is_given_once():
    _study, recruitment = recruiting_study(n_regular=8, n_checks=3, items_per_participant=4)
    participant = participant_start_work(participant=qualified(recruitment))
    assert participant.status == Status.WORKING
    assert participant.started_at is not None
    package = list(Assignment.objects.filter(annotator=participant.user).order_by("position"))
    ids = [a.item.external_id for a in package]
    assert len(ids) == 6  # 4 regular + round(4 * 0.5) checks
    assert sum(i.startswith("check-") for i in ids) == 2
    assert not any(i.startswith("train-") for i in ids)  # training items never reach the queue
    assert [a.position for a in package] == list(range(6))
    participant_start_work(participant=participant)  # a second tab: nothing more
    assert Assignment.objects.filter(annotator=participant.user).count() == 6


def test_packages_spread_items_and_respect_the_overlap():
    study, recruitment = recruiting_study(n_regular=6, n_checks=0, items_per_participant=3)
    study.overlap = 1
    study.save()
    first = participant_start_work(participant=qualified(recruitment, "a"))
    second = participant_start_work(participant=qualified(recruitment, "b"))
    items = [
        set(Assignment.objects.filter(annotator=p.user).values_list("item_id", flat=True))
        for p in (first, second)
    ]
    assert len(items[0]) == len(items[1]) == 3
    assert not items[0] & items[1]
    with pytest.raises(StudyFullError):  # no work left: refused before consent
        qualified(recruitment, "c")
    assert not Participant.objects.filter(platform_id="c").exists()


def test_filling_queues_for_staff_leaves_participants_packages_alone():
    study, recruitment = recruiting_study(n_regular=6, items_per_participant=2, check_rate=0)
    participant = participant_start_work(participant=qualified(recruitment))
    staff = UserFactory()
    membership_add(study=study, user=staff, role=Membership.Role.ANNOTATOR)  # refills queues
    assert Assignment.objects.filter(annotator=participant.user).count() == 2
    assert Assignment.objects.filter(annotator=staff).count() == study.items.count()


def test_finishing_needs_every_item_and_issues_the_completion_code():
    _, recruitment = recruiting_study()
    participant = participant_start_work(participant=qualified(recruitment))
    with pytest.raises(ValidationError, match="still unanswered"):
        participant_finish(participant=participant)
    answer_all(participant)
    done = participant_finish(participant=participant)
    assert (done.status, done.code_issued) == (Status.DONE, "C0MPLETE")
    assert participant_finish(participant=done).ended_at == done.ended_at  # idempotent


def test_an_abandoned_package_is_released_after_the_time_limit():
    study, recruitment = recruiting_study(
        n_regular=4, n_checks=0, items_per_participant=4, time_limit_minutes=30
    )
    study.overlap = 1
    study.save()
    slow = participant_start_work(participant=qualified(recruitment, "slow"))
    first = assignment_next(annotator=slow.user, study=study)
    annotations_submit(
        annotator=slow.user,
        assignment=first,
        answers={study.questions.get(): "neutral"},
        idempotency_key=__import__("uuid").uuid4(),
    )
    assert participants_release_expired(study=study) == 0  # still within the limit
    later = timezone.now() + timedelta(minutes=31)
    assert participants_release_expired(study=study, now=later) == 1
    slow.refresh_from_db()
    assert (slow.status, slow.code_issued) == (Status.TIMED_OUT, "SCREEN0UT")
    kept = Assignment.objects.filter(annotator=slow.user)
    assert [a.item_id for a in kept] == [first.item_id]  # the answered item stays
    Participant.objects.filter(pk=slow.pk).update(started_at=timezone.now() - timedelta(hours=1))
    # the three released items go to the next participant
    nxt = participant_start_work(participant=qualified(recruitment, "next"))
    got = set(Assignment.objects.filter(annotator=nxt.user).values_list("item_id", flat=True))
    assert len(got) == 3
    assert first.item_id not in got
