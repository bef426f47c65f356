"""The quality configuration (one object from the settings), the per-question overrides and the
migration that gave the three "kappa" figures their own keys."""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest
from django.apps import apps as django_apps

from analytics.config import quality_config
from analytics.indicators import Derived, with_overrides
from analytics.models import Flag, QualitySnapshot
from analytics.services import flags_evaluate
from apps.categorical.indicators import ALPHA, INDICATORS
from apps.studies.services import question_create
from tests.factories import StudyFactory, running_study

rename = importlib.import_module("analytics.migrations.0003_distinct_kappa_keys").rename


def test_config_reads_every_setting_once(settings):
    settings.QUALITY_MIN_TRIPLETS = 7
    settings.QUALITY_MIN_EVIDENCE = 30
    config = quality_config()
    assert config.evidence_needed("triplets") == 7
    assert config.evidence_needed("pairs") == 30
    assert config.evidence_needed("a_new_kinds_unit") == 30
    assert (
        config.for_question({"quality": {"min_evidence": {"items": 50}}}).evidence_needed("items")
        == 50
    )
    settings.QUALITY_UPDATES = "sometimes"
    with pytest.raises(ValueError, match="QUALITY_UPDATES"):
        quality_config()


def _one_low_annotator(annotators: list[int]) -> Derived:
    kappas = [0.8] * (len(annotators) - 1) + [0.15]
    return Derived(
        annotators=annotators,
        indicators={"cohen_kappa": kappas},
        evidence={"items": [30] * len(annotators)},
        study={},
    )


@pytest.mark.django_db
def test_a_questions_own_floor_decides_its_flags():
    study, annotators = running_study(n_annotators=6)
    default = study.questions.get()
    lenient = question_create(
        study=study,
        key="lenient",
        prompt="?",
        labels=[{"key": "a", "name": "A"}, {"key": "b", "name": "B"}],
        settings={"quality": {"rules": {"cohen_kappa": {"floor": 0.1}}}},
    )
    config = replace(quality_config(), min_annotators=100)  # too few peers: floors only
    derived = _one_low_annotator([a.pk for a in annotators])
    for question, expected in ((default, 1), (lenient, 0)):
        hits = flags_evaluate(
            question=question,
            derived=derived,
            indicators=with_overrides(INDICATORS, question.settings),
            config=config,
        )
        assert len(hits) == expected


@pytest.mark.django_db
def test_categorical_quality_settings_are_refused_for_unknown_indicators():
    with pytest.raises(Exception, match="not a flagged indicator"):
        question_create(
            study=StudyFactory(),
            key="q",
            prompt="?",
            labels=[{"key": "a", "name": "A"}, {"key": "b", "name": "B"}],
            settings={"quality": {"rules": {"kappa": {"floor": 0.1}}}},
        )


@pytest.mark.django_db
def test_migration_renames_the_old_kappa_key_per_kind_and_back():
    study, annotators = running_study(n_annotators=2)
    question = study.questions.get()
    snapshot = QualitySnapshot.objects.create(
        question=question,
        indicators={"annotators": [annotators[0].pk], "values": {"kappa": [0.1], "aad": [0.2]}},
        flags=[{"annotator": annotators[0].pk, "indicator": "kappa", "reason": "low"}],
    )
    flag = Flag.objects.create(
        study=study, question=question, annotator=annotators[0], indicator="kappa", reason="low"
    )
    rename(django_apps, forward=True)
    snapshot.refresh_from_db()
    flag.refresh_from_db()
    assert snapshot.indicators["values"] == {"cohen_kappa": [0.1], "aad": [0.2]}
    assert snapshot.flags[0]["indicator"] == flag.indicator == "cohen_kappa"
    rename(django_apps, forward=False)
    snapshot.refresh_from_db()
    flag.refresh_from_db()
    assert snapshot.indicators["values"] == {"kappa": [0.1], "aad": [0.2]}
    assert flag.indicator == "kappa"


@pytest.mark.django_db
def test_a_study_figure_below_its_floor_flags_the_question():
    study, annotators = running_study(n_annotators=2)
    derived = Derived(
        annotators=[a.pk for a in annotators],
        indicators={},
        evidence={},
        study={"alpha": 0.4, "alpha_level": "ordinal", "n_ratings": 100},
    )
    (hit,) = flags_evaluate(
        question=study.questions.get(),
        derived=derived,
        indicators=INDICATORS,
        config=quality_config(),
        study_figures=(ALPHA,),
    )
    assert (hit["annotator"], hit["indicator"]) == (None, "alpha")
    assert hit["reason"] == "Krippendorff alpha (ordinal) 0.40; below 0.667; 100 ratings"


@pytest.mark.django_db
def test_a_study_flag_states_the_interval_and_needs_it_wholly_below_the_floor():
    study, annotators = running_study(n_annotators=2)

    def hits(low: float, high: float) -> list[dict]:
        entry = [0.52, low, high, 100]
        derived = Derived(
            annotators=[a.pk for a in annotators],
            indicators={},
            evidence={},
            study={
                "alpha": 0.52,
                "alpha_level": "ordinal",
                "n_ratings": 100,
                "intervals": {"computed_at": "", "n_answers": 100, "study": {"alpha": entry}},
            },
        )
        return flags_evaluate(
            question=study.questions.get(),
            derived=derived,
            indicators=INDICATORS,
            config=quality_config(),
            study_figures=(ALPHA,),
        )

    (hit,) = hits(0.44, 0.60)
    assert hit["reason"] == "Krippendorff alpha (ordinal) 0.52 [0.44, 0.60], below 0.667; 100 items"
    assert (hit["figures"]["low"], hit["figures"]["high"]) == (0.44, 0.60)
    assert hits(0.38, 0.70) == []  # the interval reaches the floor: no statement to make
