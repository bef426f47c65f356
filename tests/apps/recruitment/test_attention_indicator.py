"""Accuracy on attention checks as a dashboard indicator of the categorical kind: its value,
Wilson interval and evidence in the snapshot (dashboard, API, exports), and its flag below the
study's attention floor."""

from __future__ import annotations

import uuid

import pytest

from analytics.intervals import quality_record
from analytics.metrics.uncertainty import wilson_interval
from analytics.models import Flag
from analytics.selectors import latest_snapshot
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.categorical.kind import CATEGORICAL
from apps.recruitment.indicators import GOLD_ACCURACY
from apps.recruitment.models import GoldAnswer
from apps.recruitment.services import participant_start_work
from tests.apps.recruitment.setup import CHECK_ANSWER, recruiting_study
from tests.apps.recruitment.test_services import qualified

pytestmark = pytest.mark.django_db


def work(participant, *, check_answer: str) -> None:
    """Answer the package: ``check_answer`` on attention checks, "neutral" elsewhere."""
    checks = set(GoldAnswer.objects.filter(use="check").values_list("item_id", flat=True))
    question = participant.study.questions.get()
    while assignment := assignment_next(annotator=participant.user, study=participant.study):
        annotations_submit(
            annotator=participant.user,
            assignment=assignment,
            answers={question: check_answer if assignment.item_id in checks else "neutral"},
            idempotency_key=uuid.uuid4(),
        )


def published(floor: float, capture):
    study, recruitment = recruiting_study(
        n_regular=4, n_checks=2, items_per_participant=4, check_rate=0.5, attention_floor=floor
    )
    question = study.questions.get()
    careful = participant_start_work(participant=qualified(recruitment, "careful"))
    careless = participant_start_work(participant=qualified(recruitment, "careless"))
    work(careful, check_answer=CHECK_ANSWER)
    work(careless, check_answer="positive")
    with capture(execute=True):
        CATEGORICAL.rebuild(question_id=question.pk)
    return question, careful.user_id, careless.user_id


def test_the_snapshot_holds_gold_accuracy_with_its_wilson_interval_and_evidence(
    django_capture_on_commit_callbacks,
):
    question, careful, careless = published(0.7, django_capture_on_commit_callbacks)
    stored = latest_snapshot(question=question).indicators
    row = {a: k for k, a in enumerate(stored["annotators"])}
    values = stored["values"][GOLD_ACCURACY.key]
    assert (values[row[careful]], values[row[careless]]) == (1.0, 0.0)
    assert stored["evidence"]["gold_checks"][row[careless]] == 2
    expected = wilson_interval(0, 2)
    entry = stored["intervals"]["gold_accuracy"][row[careless]]
    assert entry == [0.0, 0.0, pytest.approx(expected.high, abs=1e-6), 2]
    record = quality_record(latest_snapshot(question=question), CATEGORICAL)
    figures = {r["annotator"]: r["indicators"] for r in record["annotators"]}
    assert figures[careless]["gold_accuracy"]["unit"] == "gold_checks"
    assert figures[careless]["gold_accuracy"]["high"] == pytest.approx(expected.high, abs=1e-6)


def test_an_annotator_whose_interval_lies_below_the_attention_floor_is_flagged(
    django_capture_on_commit_callbacks,
):
    question, _, careless = published(0.7, django_capture_on_commit_callbacks)
    flagged = set(
        Flag.objects.filter(question=question, indicator="gold_accuracy").values_list(
            "annotator_id", flat=True
        )
    )
    assert flagged == {careless}


def test_the_floor_is_the_study_s_attention_floor(django_capture_on_commit_callbacks):
    question, _, _ = published(
        0.5, django_capture_on_commit_callbacks
    )  # 0 of 2 reaches 0.66: not confidently below 0.5
    assert not Flag.objects.filter(question=question, indicator="gold_accuracy").exists()


def test_a_question_without_attention_checks_has_no_such_column(
    django_capture_on_commit_callbacks,
):
    study, _ = recruiting_study(n_checks=0)
    question = study.questions.get()
    with django_capture_on_commit_callbacks(execute=True):
        CATEGORICAL.rebuild(question_id=question.pk)
    snapshot = latest_snapshot(question=question)
    assert snapshot is None or GOLD_ACCURACY.key not in snapshot.indicators["values"]
