"""Hidden attention checks on gold traces: a trace item with a known signal marked as a check
is mixed into work packages, and a finished trace of it is a passed check when its kappa_SDA
with the truth reaches the study's ``trace_threshold``; counted in the gold-accuracy indicator
of the continuous kind with its Wilson interval and evidence."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.metrics.uncertainty import wilson_interval
from analytics.selectors import latest_snapshot
from apps.annotations.models import Assignment
from apps.continuous.kind import CONTINUOUS
from apps.continuous.selectors import calibration_report
from apps.items.models import Item
from apps.recruitment.indicators import GOLD_ACCURACY
from apps.recruitment.models import GoldAnswer
from apps.recruitment.selectors import gold_accuracy
from apps.recruitment.services import (
    gold_answer_set,
    participant_start_work,
    participant_training_finish,
    recruitment_update,
)
from apps.studies.models import Question
from tests.apps.continuous.conftest import make_trace_study
from tests.apps.recruitment.test_training_kinds import consented, study_of

pytestmark = pytest.mark.django_db


def follows(times: np.ndarray) -> np.ndarray:
    return 0.5 + 0.4 * np.sin(times / 3.0)


def inverted(times: np.ndarray) -> np.ndarray:
    return 1 - follows(times)


def test_a_gold_trace_marked_as_a_check_is_mixed_into_the_package():
    _, question, recruitment = study_of(
        Question.Kind.CONTINUOUS, items_per_participant=3, check_rate=0.5
    )
    green = Item.objects.get(external_id="green")
    gold = gold_answer_set(item=green, question=question, value={}, use="check")
    assert (gold.use, gold.value) == (GoldAnswer.Use.CHECK, {"signal": "wave"})
    participant = participant_training_finish(participant=consented(recruitment))
    participant = participant_start_work(participant=participant)
    items = set(
        Assignment.objects.filter(annotator=participant.user).values_list("item_id", flat=True)
    )
    assert green.pk in items
    assert len(items) == 4  # three regular items and the check


def traced_checks(threshold: float):
    ts = make_trace_study(n_annotators=2)
    recruitment_update(study=ts.study, trace_threshold=threshold)
    gold_answer_set(item=ts.gold_item, question=ts.question, value={}, use="check")
    careful, careless = ts.annotators
    ts.trace_gold(careful, follows)
    ts.trace_gold(careless, inverted)
    return ts, careful, careless


def test_a_trace_check_is_passed_when_its_kappa_sda_reaches_the_trace_threshold():
    ts, careful, careless = traced_checks(0.3)
    found = gold_accuracy(study=ts.study)
    assert (found[careful.pk].correct, found[careful.pk].checked) == (1, 1)
    assert (found[careless.pk].correct, found[careless.pk].checked) == (0, 1)
    assert found[careless.pk].interval == wilson_interval(0, 1)
    assert gold_accuracy(study=ts.study, question=ts.question).keys() == found.keys()


def half_followed(times: np.ndarray) -> np.ndarray:
    """The truth for the first half, then a slider left still: a low, positive kappa_SDA."""
    return follows(np.minimum(times, times[-1] / 2))


@pytest.mark.parametrize(("threshold", "passed"), [(0.0, 1), (0.5, 0)])
def test_the_studys_trace_threshold_decides_a_moderate_trace(threshold, passed):
    ts = make_trace_study(n_annotators=1)
    recruitment_update(study=ts.study, trace_threshold=threshold)
    gold_answer_set(item=ts.gold_item, question=ts.question, value={}, use="check")
    ts.trace_gold(ts.annotators[0], half_followed)
    kappa = calibration_report(question=ts.question)[0].kappa_sda
    assert 0.0 < kappa < 0.5
    assert gold_accuracy(study=ts.study)[ts.annotators[0].pk].correct == passed


def test_the_continuous_dashboard_shows_trace_check_accuracy_with_evidence(
    django_capture_on_commit_callbacks,
):
    ts, careful, careless = traced_checks(0.3)
    assert GOLD_ACCURACY.key in {spec.key for spec in CONTINUOUS.indicators_for(ts.question)}
    with django_capture_on_commit_callbacks(execute=True):
        CONTINUOUS.rebuild(question_id=ts.question.pk)
    stored = latest_snapshot(question=ts.question).indicators
    row = {a: k for k, a in enumerate(stored["annotators"])}
    values = stored["values"][GOLD_ACCURACY.key]
    assert (values[row[careful.pk]], values[row[careless.pk]]) == (1.0, 0.0)
    assert stored["evidence"]["gold_checks"][row[careless.pk]] == 1
    high = wilson_interval(0, 1).high
    assert stored["intervals"]["gold_accuracy"][row[careless.pk]] == [
        0.0,
        0.0,
        pytest.approx(high, abs=1e-6),
        1,
    ]
