"""The arena kind: registration, settings, and the item format its imports check."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import ValidationError

from apps.arena.kind import ARENA
from apps.items.importing import ItemImportError
from apps.items.models import Item
from apps.items.services import items_import
from apps.studies.kinds import kind_choices, question_kind, queue_kinds
from apps.studies.models import Question
from apps.studies.services import question_create
from tests.apps.arena.conftest import make_arena_study
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db


def test_the_arena_kind_is_registered_and_answered_on_its_own_page():
    assert question_kind("arena") is ARENA
    assert ("arena", "Model arena") in kind_choices()
    assert "arena" not in queue_kinds()


def test_settings_take_defaults_and_refuse_bad_values_by_field():
    study = StudyFactory()
    question = question_create(study=study, key="arena", prompt="Better?", kind="arena")
    assert question.settings == {"sampling": "active", "top": 0, "budget": 0}
    with pytest.raises(ValidationError) as caught:
        question_create(
            study=study,
            key="arena2",
            prompt="Better?",
            kind="arena",
            settings={"sampling": "greedy", "top": -1, "budget": True, "typo": 1},
        )
    errors = caught.value.message_dict
    assert set(errors) == {"sampling", "top", "budget", "settings"}


def _jsonl(*rows: dict) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(row) for row in rows) + "\n")


def test_jsonl_import_names_the_lines_of_prompts_with_fewer_than_two_responses():
    arena = make_arena_study(n_prompts=0, n_annotators=1)
    stream = _jsonl(
        {"external_id": "p1", "text": "Hi?", "metadata": {"responses": {"a": "x", "b": "y"}}},
        {"external_id": "p2", "text": "Hi?", "metadata": {"responses": {"a": "x"}}},
        {"external_id": "p3", "text": "Hi?"},
        {"external_id": "p4", "text": "Hi?", "metadata": {"responses": {"a": "x", "b": " "}}},
        {"external_id": "p5", "text": "Hi?", "metadata": {"responses": ["x", "y"]}},
    )
    with pytest.raises(ItemImportError) as caught:
        items_import(study=arena.study, stream=stream, fmt="jsonl")
    errors = caught.value.errors
    assert [(e.line, e.field) for e in errors] == [
        (2, "metadata"),
        (3, "metadata"),
        (4, "metadata"),
        (5, "metadata"),
    ]
    assert "'helpful'" in errors[0].message
    assert "has 1" in errors[0].message
    assert "missing" in errors[1].message
    assert "has 1" in errors[2].message  # an empty response does not count
    assert "must be an object" in errors[3].message
    assert not Item.objects.filter(study=arena.study).exists()  # all or nothing


def test_csv_import_reads_responses_from_the_metadata_column():
    arena = make_arena_study(n_prompts=0, n_annotators=1)
    good = json.dumps({"responses": {"a": "one", "b": "two"}}).replace('"', '""')
    bad = json.dumps({"responses": {"a": "one"}}).replace('"', '""')
    text = f'external_id,text,metadata\np1,Hello?,"{good}"\np2,Hello?,"{bad}"\n'
    with pytest.raises(ItemImportError) as caught:
        items_import(study=arena.study, stream=io.StringIO(text), fmt="csv")
    assert [(e.line, e.field) for e in caught.value.errors] == [(3, "metadata")]
    text = f'external_id,text,metadata\np1,Hello?,"{good}"\n'
    items_import(study=arena.study, stream=io.StringIO(text), fmt="csv")
    assert Item.objects.get(study=arena.study).metadata["responses"] == {"a": "one", "b": "two"}


def test_items_outside_the_arena_questions_scope_need_no_responses():
    arena = make_arena_study(n_prompts=0, n_annotators=1)
    arena.question.scope = {"metadata": {"set": "arena"}}
    arena.question.save()
    stream = _jsonl(
        {"external_id": "s1", "text": "A sentence."},
        {"external_id": "p1", "text": "Hi?", "metadata": {"set": "arena"}},
    )
    with pytest.raises(ItemImportError) as caught:
        items_import(study=arena.study, stream=stream, fmt="jsonl")
    assert [(e.line, e.field) for e in caught.value.errors] == [(2, "metadata")]


def test_the_scope_problem_counts_prompts_without_two_responses():
    arena = make_arena_study(n_prompts=3, n_annotators=1)
    assert ARENA.scope_problem(arena.question) == ""
    ItemFactory(study=arena.study, metadata={"responses": {"a": "only one"}})
    assert ARENA.scope_problem(arena.question).startswith("1 of its 4 prompts")


def test_a_question_of_another_kind_checks_nothing_on_import():
    study = StudyFactory()
    question_create(study=study, key="pair", prompt="Better?", kind=Question.Kind.PAIRWISE)
    items_import(study=study, stream=_jsonl({"external_id": "x", "text": "Hi"}), fmt="jsonl")
    assert Item.objects.filter(study=study).count() == 1
