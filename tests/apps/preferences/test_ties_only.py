"""An annotator who answers "equal" to every pair (issue 23): flagged on the dashboard, and
a pure pairwise package is not completed by ties alone."""

from __future__ import annotations

from analytics.models import Flag
from analytics.publishing import quality_publish
from apps.annotations.models import Assignment
from apps.preferences.quality import quality_judgements_rebuild
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


def test_ties_alone_do_not_complete_the_package_and_are_flagged(db, settings):
    settings.QUALITY_INTERVAL_SECONDS = 300
    setup = make_pairwise_study(n_items=40, n_annotators=2)
    tier, honest = setup.annotators
    asked = answer_all(setup.question, tier, lambda a, b: 0)
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    assert asked < answer_all(setup.question, honest, by_level(levels))  # ties end insertions
    assert Assignment.objects.filter(annotator=tier, completed_at=None).exists()
    assert not Assignment.objects.filter(annotator=honest, completed_at=None).exists()
    quality_judgements_rebuild(question_id=setup.question.pk)
    quality_publish(question_id=setup.question.pk, rebuild=True)
    flag = Flag.objects.get(question=setup.question, annotator=tier, indicator="tie_rate")
    assert flag.reason.startswith("share of pairs answered 'equal'")
    assert "1.00 [" in flag.reason
    assert "above the floor 0.90" in flag.reason
    assert not Flag.objects.filter(annotator=honest, indicator="tie_rate").exists()


def test_an_annotator_who_always_picks_the_left_side_is_flagged(db, settings, pinned_pair_seed):
    """The side of each pair is drawn at random, so always answering "A" orders the items at
    random; transitivity kappa (the only rule before) flagged them only by chance (its
    jackknife interval over the few counted triplets is wide): the side share flags them."""
    settings.QUALITY_INTERVAL_SECONDS = 300
    setup = make_pairwise_study(n_items=24, n_annotators=2)
    left, honest = setup.annotators
    answer_all(setup.question, left, lambda a, b: 1)  # at most every pair: 276
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    answer_all(setup.question, honest, by_level(levels))
    quality_judgements_rebuild(question_id=setup.question.pk)
    quality_publish(question_id=setup.question.pk, rebuild=True)
    flag = Flag.objects.get(question=setup.question, annotator=left, indicator="same_side")
    assert flag.reason.startswith("picked the left item on ")
    assert "above the floor 0.90" in flag.reason
    assert not Flag.objects.filter(annotator=honest, indicator="same_side").exists()
