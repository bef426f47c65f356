"""Gold answers: the import's gold columns, accuracy on attention checks, Wilson's interval."""

from __future__ import annotations

import io
import math
import uuid

import pytest
from statsmodels.stats.proportion import proportion_confint

from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.items.importing import ItemImportError
from apps.items.models import Item
from apps.items.services import items_import
from apps.recruitment.models import GoldAnswer
from apps.recruitment.selectors import gold_accuracy, participants_overview, payment_rows
from apps.recruitment.services import participant_start_work
from apps.studies.services import question_create
from tests.apps.recruitment.setup import CHECK_ANSWER, recruiting_study
from tests.apps.recruitment.test_services import qualified
from tests.factories import StudyFactory, categorical_question


def csv_stream(*lines: str) -> io.BytesIO:
    return io.BytesIO(("\n".join(lines) + "\n").encode())


@pytest.mark.django_db
def test_gold_columns_store_known_answers_not_metadata():
    study = StudyFactory()
    question = categorical_question(study)
    stream = csv_stream(
        "external_id,text,gold,gold_reason,gold_use,speaker",
        "a,Lovely.,positive,it praises,training,Ann",
        "b,Awful.,negative,,,Bob",
        "c,Plain.,,,,Cy",
    )
    items_import(study=study, stream=stream, fmt="csv")
    gold = {g.item.external_id: g for g in GoldAnswer.objects.select_related("item")}
    assert set(gold) == {"a", "b"}
    assert (gold["a"].value, gold["a"].reason, gold["a"].use) == (
        {"label": "positive"},
        "it praises",
        "training",
    )
    assert (gold["b"].value, gold["b"].use, gold["b"].question) == (
        {"label": "negative"},
        "check",
        question,
    )
    assert Item.objects.get(external_id="a").metadata == {"speaker": "Ann"}
    # re-importing with another answer replaces it; a row without gold leaves it
    items_import(
        study=study,
        stream=csv_stream("external_id,text,gold", "a,Lovely.,neutral", "b,Awful.,"),
        fmt="csv",
    )
    assert GoldAnswer.objects.get(item__external_id="a").value == {"label": "neutral"}
    assert GoldAnswer.objects.get(item__external_id="b").value == {"label": "negative"}


@pytest.mark.django_db
def test_gold_problems_name_their_line_and_store_nothing():
    study = StudyFactory()
    categorical_question(study)
    stream = csv_stream(
        "external_id,text,gold,gold_use",
        "a,One.,joy,",
        "b,Two.,positive,sometimes",
        'c,Three.,"{""nope"": ""x""}",',
    )
    with pytest.raises(ItemImportError) as caught:
        items_import(study=study, stream=stream, fmt="csv")
    errors = [(e.line, e.field) for e in caught.value.errors]
    assert errors == [(2, "gold"), (3, "gold"), (4, "gold")]
    assert "'joy' is not a label" in caught.value.errors[0].message
    assert not Item.objects.exists()
    assert not GoldAnswer.objects.exists()


@pytest.mark.django_db
def test_several_questions_take_gold_as_an_object():
    study = StudyFactory()
    categorical_question(study)
    question_create(
        study=study,
        key="topic",
        prompt="Topic?",
        labels=[{"key": "sport", "name": "Sport"}, {"key": "art", "name": "Art"}],
    )
    with pytest.raises(ItemImportError, match="several"):
        items_import(
            study=study, stream=csv_stream("external_id,text,gold", "a,A.,positive"), fmt="csv"
        )
    rows = [
        '{"external_id": "a", "text": "A.", "gold": {"sentiment": "positive", "topic": "sport"}}'
    ]
    items_import(study=study, stream=io.StringIO("\n".join(rows)), fmt="jsonl")
    assert sorted(GoldAnswer.objects.values_list("question__key", flat=True)) == [
        "sentiment",
        "topic",
    ]


@pytest.mark.django_db
def test_gold_accuracy_counts_live_answers_to_checks_with_their_interval():
    study, recruitment = recruiting_study(
        n_regular=4, n_checks=2, items_per_participant=4, check_rate=0.5, attention_floor=0.75
    )
    question = study.questions.get()
    participants = [participant_start_work(participant=qualified(recruitment, p)) for p in "ab"]
    for participant, right in zip(participants, (True, False), strict=True):
        while assignment := assignment_next(annotator=participant.user, study=study):
            is_check = assignment.item.external_id.startswith("check-")
            label = CHECK_ANSWER if (is_check and right) else "neutral"
            annotations_submit(
                annotator=participant.user,
                assignment=assignment,
                answers={question: label},
                idempotency_key=uuid.uuid4(),
            )
    accuracy = gold_accuracy(study=study)
    a, b = (accuracy[p.user_id] for p in participants)
    assert (a.correct, a.checked, b.correct, b.checked) == (2, 2, 0, 2)
    assert a.interval.estimate == 1.0
    assert math.isclose(a.interval.low, proportion_confint(2, 2, method="wilson")[0])
    rows = {row.participant.platform_id: row for row in participants_overview(study=study)}
    assert (rows["a"].flagged, rows["b"].flagged) == (False, True)
    lines = list(payment_rows(study=study))
    assert lines[1][-4:] == [2, 2, 1.0, "no"]  # not done yet: no bonus
    assert lines[2][-4:] == [0, 2, 0.0, "no"]
