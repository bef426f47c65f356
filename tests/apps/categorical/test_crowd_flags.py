"""Flags that work in a sparse crowd (#23): a random annotator and a copier pair are flagged
through the dashboard's own path (import a finished study, publish with intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.models import Flag
from analytics.publishing import quality_publish
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.categorical.quality import quality_rebuild
from benchmarks.crowd_flags import crowd_study
from tests.factories import running_study

LABELS = ("negative", "neutral", "positive")


def _crowd(*, copier: bool, seed: int) -> tuple[object, list, np.ndarray]:
    """A finished sparse crowd study (30 annotators, 3 answers per item, 20-40 items each,
    3 labels, accuracy 0.75-0.95, annotator 0 random), published with its intervals."""
    rng = np.random.default_rng(seed)
    ratings, _ = crowd_study(
        rng, accuracy=(0.75, 0.95), prevalence=np.array([0.5, 0.3, 0.2]), copier=copier
    )
    study, annotators = running_study(n_items=ratings.shape[1], n_annotators=ratings.shape[0])
    question = study.questions.get()
    items = list(study.items.order_by("pk"))
    records = [
        FinishedAnnotation(
            item=items[i].external_id,
            annotator=annotators[k].username,
            question=question.key,
            value=LABELS[int(ratings[k, i])],
        )
        for k, i in zip(*np.nonzero(~np.isnan(ratings)), strict=True)
    ]
    annotations_import_finished(study=study, records=records)
    quality_rebuild(question_id=question.pk)
    quality_publish(question_id=question.pk, rebuild=True)
    return question, annotators, ratings


@pytest.mark.django_db
def test_random_annotator_in_a_sparse_crowd_is_flagged_with_what_was_compared(settings):
    settings.QUALITY_INTERVAL_SECONDS = 300
    question, annotators, _ = _crowd(copier=False, seed=4)
    flags = Flag.objects.filter(question=question, active=True)
    random = flags.get(annotator=annotators[0], indicator="mace_trust")
    assert random.reason.startswith("agrees with the other annotators' consensus on ")
    assert "(chance " in random.reason
    assert "random answering" in random.reason
    trusted_less = flags.filter(indicator="mace_trust").exclude(annotator=annotators[0])
    assert trusted_less.count() <= 1, [f.reason for f in trusted_less]


@pytest.mark.django_db
def test_copier_pair_is_flagged_on_both_with_the_other_named(settings):
    settings.QUALITY_INTERVAL_SECONDS = 300
    question, annotators, ratings = _crowd(copier=True, seed=5)
    first, second = annotators[1], annotators[2]
    shared = int((~np.isnan(ratings[1])).sum())
    for me, other in ((first, second), (second, first)):
        flag = Flag.objects.get(question=question, annotator=me, indicator="copying")
        assert flag.reason.startswith(
            f"gave the same answer as {other.username} on {shared} of {shared} shared items"
        )
        assert flag.figures["value"] == 1.0
        assert flag.figures["expected"] < 0.95
    others = Flag.objects.filter(question=question, indicator="copying").exclude(
        annotator__in=[first, second]
    )
    assert not others.exists()
