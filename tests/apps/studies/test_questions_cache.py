"""The per-process cache of a study's questions (what every answer reads): no query when
cached, and read again whenever a question, a label or an adaptive-overlap rule of the study is
written, by whatever path (services, a plain ORM save, a delete), and never served to a new
study that got a deleted one's id."""

from __future__ import annotations

import pytest

from apps.adjudication.models import OverlapRule
from apps.adjudication.services import overlap_rule_remove, overlap_rule_set
from apps.studies.models import Label, Question, Study
from apps.studies.selectors import study_questions_cached
from apps.studies.services import question_create, question_update, study_update
from tests.factories import SENTIMENT_LABELS, StudyFactory, categorical_question

pytestmark = pytest.mark.django_db


def fresh(study: Study) -> Study:
    """The study as a request reads it (its questions_version as stored now)."""
    return Study.objects.get(pk=study.pk)


def label_keys(study: Study) -> dict[str, list[str]]:
    return {
        q.key: [label.key for label in q.labels.all()]
        for q in study_questions_cached(study=fresh(study))
    }


def test_a_cached_read_runs_no_query(django_assert_num_queries) -> None:
    study = StudyFactory()
    categorical_question(study)
    loaded = fresh(study)
    with django_assert_num_queries(2):  # the questions with their rules, their labels
        first = study_questions_cached(study=loaded)
    with django_assert_num_queries(0):
        again = study_questions_cached(study=loaded)
        assert [label.key for label in again[0].labels.all()] == ["negative", "neutral", "positive"]
        assert getattr(again[0], "overlap_rule", None) is None  # read with it: no query
        assert again[0].study is loaded
    assert [q.pk for q in first] == [q.pk for q in again]


def test_labels_changed_by_the_service_are_read_again() -> None:
    study = StudyFactory()
    question = categorical_question(study)
    assert label_keys(study) == {"sentiment": ["negative", "neutral", "positive"]}
    question_update(
        question=question,
        labels=[*SENTIMENT_LABELS, {"key": "mixed", "name": "Mixed", "shortcut": "4"}],
    )
    assert label_keys(study) == {"sentiment": ["negative", "neutral", "positive", "mixed"]}
    question_update(question=question, labels=SENTIMENT_LABELS[:2])
    assert label_keys(study) == {"sentiment": ["negative", "neutral"]}


def test_a_label_renamed_by_a_plain_save_is_read_again() -> None:
    study = StudyFactory()
    categorical_question(study)
    study_questions_cached(study=fresh(study))
    label = Label.objects.get(question__study=study, key="neutral")
    label.name = "Neither"
    label.save()
    (question,) = study_questions_cached(study=fresh(study))
    assert [label.name for label in question.labels.all()][1] == "Neither"


def test_questions_added_edited_and_deleted_are_read_again() -> None:
    study = StudyFactory()
    question = categorical_question(study)
    study_questions_cached(study=fresh(study))
    question_create(study=study, key="topic", prompt="Topic?", labels=SENTIMENT_LABELS)
    assert list(label_keys(study)) == ["sentiment", "topic"]
    question_update(question=question, prompt="How does it sound?")
    assert study_questions_cached(study=fresh(study))[0].prompt == "How does it sound?"
    Question.objects.get(study=study, key="topic").delete()
    assert list(label_keys(study)) == ["sentiment"]


def test_an_overlap_rule_set_and_removed_is_read_again() -> None:
    study = StudyFactory()
    question = categorical_question(study)
    (cached,) = study_questions_cached(study=fresh(study))
    assert getattr(cached, "overlap_rule", None) is None
    overlap_rule_set(manager=study.created_by, question=question, base_k=2, k_max=4, threshold=0.5)
    (cached,) = study_questions_cached(study=fresh(study))
    assert cached.overlap_rule.k_max == 4
    assert cached.overlap_rule.question is cached  # the copy's own rule
    OverlapRule.objects.filter(question=question).update(k_max=5)  # a bulk update: ...
    assert study_questions_cached(study=fresh(study))[0].overlap_rule.k_max == 4  # ... unseen
    rule = OverlapRule.objects.get(question=question)
    rule.k_max = 6
    rule.save()  # a save is seen
    assert study_questions_cached(study=fresh(study))[0].overlap_rule.k_max == 6
    overlap_rule_remove(manager=study.created_by, question=question)
    (cached,) = study_questions_cached(study=fresh(study))
    assert getattr(cached, "overlap_rule", None) is None


def test_copies_are_the_callers_own() -> None:
    study = StudyFactory()
    categorical_question(study)
    one, other = fresh(study), fresh(study)
    (mine,) = study_questions_cached(study=one)
    mine.prompt = "changed by a caller"
    (theirs,) = study_questions_cached(study=other)
    assert theirs.prompt == "What is the sentiment?"
    assert theirs.study is other
    assert mine.study is one


def test_a_study_edit_from_a_stale_instance_keeps_the_version() -> None:
    """A full save of a study read before a question changed would write its old
    questions_version back, and a process holding that version would serve old questions."""
    study = StudyFactory()
    question = categorical_question(study)
    stale = fresh(study)
    question_update(question=question, labels=SENTIMENT_LABELS[:2])
    version = fresh(study).questions_version
    assert version > stale.questions_version
    study_update(study=stale, name="Renamed")
    assert fresh(study).questions_version == version
    assert fresh(study).name == "Renamed"


def test_a_new_study_given_a_deleted_ones_id_is_not_served_its_questions() -> None:
    study = StudyFactory()
    categorical_question(study, key="old")
    old = fresh(study)
    assert [q.key for q in study_questions_cached(study=old)] == ["old"]
    pk, version, creator = old.pk, old.questions_version, old.created_by
    old.delete()
    reborn = Study.objects.create(pk=pk, name="New", created_by=creator)
    Study.objects.filter(pk=pk).update(questions_version=version)  # the same version, even
    assert study_questions_cached(study=fresh(reborn)) == []
