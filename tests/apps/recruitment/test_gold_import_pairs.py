"""Calibration pairs in the item import's ``gold`` column (issue #13): ``{"question":
{"versus": "<external id>", "outcome": 1}}`` stores a gold pair, checked by the service the
gold-answers API uses; the pair may name an item of a later line; a refused pair names its
line and field, and nothing of the import is written."""

from __future__ import annotations

import io
import json

import pytest

from apps.items.importing import ItemImportError
from apps.items.models import Item
from apps.items.services import items_bulk_create, items_import
from apps.recruitment.models import GoldAnswer
from apps.studies.services import question_create
from tests.factories import StudyFactory, categorical_question

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    """A study with a categorical question ``sentiment`` and a strict pairwise ``better``."""
    study = StudyFactory()
    categorical_question(study)
    question_create(
        study=study, kind="pairwise", key="better", prompt="Better?", settings={"strict": True}
    )
    return study


def csv_cell(value: object) -> str:
    return '"' + json.dumps(value).replace('"', '""') + '"'


def test_a_csv_gold_pair_naming_a_later_line_is_stored(study):
    lines = [
        "external_id,text,gold,gold_reason,gold_use",
        "a,Clear.,"
        + csv_cell({"better": {"versus": "b", "outcome": 1}})
        + ",a is clearer,training",
        "b,Muddled.,negative,,",  # a bare label: the one categorical question
        "c,Fine.,"
        + csv_cell({"sentiment": "positive", "better": {"versus": "a", "outcome": -1}})
        + ",,",
    ]
    items_import(study=study, stream=io.BytesIO("\n".join(lines).encode()), fmt="csv")
    gold = {
        (g.item.external_id, g.question.key): g
        for g in GoldAnswer.objects.select_related("item", "question")
    }
    assert set(gold) == {("a", "better"), ("b", "sentiment"), ("c", "sentiment"), ("c", "better")}
    pair = gold["a", "better"]
    assert (pair.value, pair.reason, pair.use) == (
        {"versus": "b", "outcome": 1},
        "a is clearer",
        "training",
    )
    assert gold["c", "better"].value == {"versus": "a", "outcome": -1}
    assert gold["c", "better"].use == "check"
    assert gold["b", "sentiment"].value == {"label": "negative"}


def test_jsonl_and_the_api_take_gold_pairs_too(study):
    rows = [
        {"external_id": "x", "text": "X.", "gold": {"better": {"versus": "y", "outcome": -1}}},
        {"external_id": "y", "text": "Y."},
    ]
    stream = io.StringIO("\n".join(json.dumps(row) for row in rows))
    items_import(study=study, stream=stream, fmt="jsonl")
    assert GoldAnswer.objects.get().value == {"versus": "y", "outcome": -1}
    items_bulk_create(
        study=study,
        rows=[
            {"external_id": "y", "text": "Y.", "gold": {"better": {"versus": "x", "outcome": 1}}}
        ],
    )
    assert GoldAnswer.objects.get(item__external_id="y").value == {"versus": "x", "outcome": 1}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ({"versus": "nope", "outcome": 1}, "better: 'nope' is not an item of this study."),
        ({"versus": "p1", "outcome": 1}, "better: Compare the item with another item."),
        ({"versus": "p2", "outcome": 0}, "better: This question is strict"),
        ({"versus": "p2", "outcome": 2}, "better: Give the outcome as 1"),
        ({"outcome": 1}, 'better: Give the pair as {"versus"'),
        ("p2", 'better: Give the pair as {"versus"'),
    ],
)
def test_a_refused_pair_names_its_line_and_nothing_is_written(study, pair, message):
    items_bulk_create(study=study, rows=[{"external_id": "p2", "text": "Before."}])
    rows = [
        {"external_id": "p0", "text": "Zero."},
        {"external_id": "p1", "text": "One.", "gold": {"better": pair}},
        {"external_id": "p2", "text": "Changed by the import."},
    ]
    with pytest.raises(ItemImportError) as caught:
        items_bulk_create(study=study, rows=rows)
    errors = caught.value.errors
    assert [(e.line, e.field) for e in errors] == [(2, "gold")]
    assert errors[0].message.startswith(message), errors[0].message
    assert str(errors[0]).startswith("line 2, field gold: better: ")
    assert list(Item.objects.values_list("external_id", "text")) == [("p2", "Before.")]
    assert not GoldAnswer.objects.exists()


def test_every_refused_pair_is_listed_with_its_line(study):
    rows = [
        {"external_id": "a", "text": "A.", "gold": {"better": {"versus": "zz", "outcome": 1}}},
        {"external_id": "b", "text": "B.", "gold": "positive"},
        {"external_id": "c", "text": "C.", "gold": {"better": {"versus": "c", "outcome": 1}}},
    ]
    with pytest.raises(ItemImportError) as caught:
        items_bulk_create(study=study, rows=rows)
    assert [e.line for e in caught.value.errors] == [1, 3]
    assert not Item.objects.exists()
    assert not GoldAnswer.objects.exists()


def test_an_unknown_question_names_both_kinds_that_take_gold(study):
    rows = [{"external_id": "a", "text": "A.", "gold": {"nope": {"versus": "b", "outcome": 1}}}]
    with pytest.raises(ItemImportError, match="not a categorical or pairwise question"):
        items_bulk_create(study=study, rows=rows)
