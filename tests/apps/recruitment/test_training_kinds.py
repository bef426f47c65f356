"""Training and qualification on gold traces (kappa_SDA with the true signal against the
study's threshold) and on calibration pairs with a known order."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.continuous.services import gold_signal_save
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.recruitment.models import GoldAnswer, Participant
from apps.recruitment.services import (
    gold_answer_set,
    participant_consent,
    participant_enter,
    participant_training_answer,
    participant_training_finish,
    recruitment_update,
)
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db
Status = Participant.Status
SECONDS = 30


def truth() -> np.ndarray:
    t = np.arange(SECONDS + 1, dtype=float)
    return 0.5 + 0.4 * np.sin(t / 3.0)


def study_of(kind: str, **settings):
    study = StudyFactory()
    extra = {"allow_seek": True} if kind == Question.Kind.CONTINUOUS else {}
    question = question_create(study=study, kind=kind, key="q", prompt="?", settings=extra)
    gold_signal_save(key="wave", rate_hz=1.0, values=truth())
    rows = [
        {
            "external_id": "green",
            "text": "Follow the green.",
            "metadata": {"stimulus": "green", "signal": "wave"},
        },
        *({"external_id": f"s-{n}", "text": f"Sentence {n}."} for n in range(3)),
    ]
    items_bulk_create(study=study, rows=rows)
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment = recruitment_update(study=study, is_open=True, **settings)
    return study, question, recruitment


def consented(recruitment, pid: str = "P1") -> Participant:
    participant = participant_enter(recruitment=recruitment, platform_id=pid).participant
    return participant_consent(participant=participant, agree=True)


def samples(values: np.ndarray) -> dict:
    """Slider samples every 0.1 s holding ``values`` (one per second)."""
    times = np.round(np.arange(0, SECONDS + 0.05, 0.1), 6)
    return {
        "times": times.tolist(),
        "values": np.interp(times, np.arange(values.size), values).tolist(),
    }


def test_a_trace_close_to_the_truth_qualifies_and_an_inverted_one_screens_out():
    _, question, recruitment = study_of(
        Question.Kind.CONTINUOUS, trace_threshold=0.3, qualification_threshold=1.0
    )
    item = Item.objects.get(external_id="green")
    gold = gold_answer_set(
        item=item, question=question, value={}, reason="the green got brighter", use="training"
    )
    assert gold.value == {"signal": "wave"}  # read from the item
    good, bad = consented(recruitment, "good"), consented(recruitment, "bad")
    right = participant_training_answer(participant=good, gold=gold, value=samples(truth()))
    wrong = participant_training_answer(participant=bad, gold=gold, value=samples(1 - truth()))
    assert (right.correct, wrong.correct) == (True, False)
    assert right.score > 0.9 > 0.3 > wrong.score
    assert participant_training_finish(participant=good).status == Status.QUALIFIED
    assert participant_training_finish(participant=bad).status == Status.SCREENED_OUT


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"times": [0, 1], "values": [0.5]}, "as many"),
        ({"times": [0, 1, 1], "values": [0.1, 0.2, 0.3]}, "increasing"),
        ({"times": [0, 1], "values": [0.1, 1.5]}, r"\[0, 1\]"),
        ({"times": list(range(100_001)), "values": [0.5] * 100_001}, "at most"),
        ("nope", "times"),
    ],
)
def test_a_bad_training_trace_is_refused_with_a_field_error(value, message):
    _, question, recruitment = study_of(Question.Kind.CONTINUOUS)
    gold = gold_answer_set(
        item=Item.objects.get(external_id="green"), question=question, value={}, use="training"
    )
    participant = consented(recruitment)
    with pytest.raises(ValidationError, match=message) as caught:
        participant_training_answer(participant=participant, gold=gold, value=value)
    assert "value" in caught.value.message_dict
    assert not participant.training_answers.exists()


def test_a_trace_gold_needs_an_item_with_a_known_signal():
    _, question, _ = study_of(Question.Kind.CONTINUOUS)
    with pytest.raises(ValidationError, match="signal"):
        gold_answer_set(item=Item.objects.get(external_id="s-0"), question=question, value={})


def test_pairwise_training_scores_the_order_of_a_calibration_pair():
    _, question, recruitment = study_of(Question.Kind.PAIRWISE, qualification_threshold=0.5)
    first, second = Item.objects.get(external_id="s-0"), Item.objects.get(external_id="s-1")
    golds = [
        gold_answer_set(
            item=first,
            question=question,
            value={"versus": "s-1", "outcome": 1},
            reason="it has no typo",
            use="training",
        ),
        gold_answer_set(
            item=second,
            question=question,
            value={"versus": "s-2", "outcome": -1},
            use="training",
        ),
    ]
    assert golds[0].value == {"versus": "s-1", "outcome": 1}
    participant = consented(recruitment)
    assert participant_training_answer(participant=participant, gold=golds[0], value=1).correct
    answer = participant_training_answer(
        participant=participant, gold=golds[1], value={"outcome": 1}
    )
    assert not answer.correct
    finished = participant_training_finish(participant=participant)
    assert (finished.status, finished.training_score) == (Status.QUALIFIED, 0.5)


@pytest.mark.parametrize(
    ("value", "field_message"),
    [
        ({"versus": "nope", "outcome": 1}, "not an item"),
        ({"versus": "s-0", "outcome": 1}, "another item"),
        ({"versus": "s-1", "outcome": 2}, "or -1"),
    ],
)
def test_a_bad_calibration_pair_is_refused(value, field_message):
    _, question, _ = study_of(Question.Kind.PAIRWISE)
    with pytest.raises(ValidationError, match=field_message):
        gold_answer_set(item=Item.objects.get(external_id="s-0"), question=question, value=value)
    assert not GoldAnswer.objects.exists()


def test_a_gold_pair_may_be_a_hidden_attention_check():
    _, question, _ = study_of(Question.Kind.PAIRWISE)
    value = {"versus": "s-1", "outcome": 1}
    item = Item.objects.get(external_id="s-0")
    gold = gold_answer_set(item=item, question=question, value=value, use="check")
    assert (gold.use, gold.value) == (GoldAnswer.Use.CHECK, value)
