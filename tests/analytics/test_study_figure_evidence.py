"""A study figure below the minimum evidence of its unit reads "8 triplets: too few", as an
annotator's figure does, instead of a value with an interval as wide as the scale."""

import re

import pytest

from analytics.models import QualitySnapshot
from analytics.publishing import quality_publish
from apps.preferences.quality import quality_judgements_process
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


@pytest.fixture
def ranked(db, settings, pinned_pair_seed):
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = settings.QUALITY_MIN_TRIPLETS = 1
    ps = make_pairwise_study(n_items=6, n_annotators=2, settings={"audit_rate": 0.0})
    levels = {item.pk: k for k, item in enumerate(ps.items)}
    for user in ps.annotators:
        answer_all(ps.question, user, by_level(levels))
    quality_judgements_process(question_id=ps.question.pk)
    quality_publish(question_id=ps.question.pk)
    return ps


def _pooled_card(client, ps) -> str:
    client.force_login(ps.study.created_by)
    html = client.get(f"/studies/{ps.study.pk}/quality/?question={ps.question.pk}").content
    text = re.sub(r"<[^>]+>", " ", html.decode())
    return " ".join(text.split()).partition("Pooled transitivity kappa")[2][:80].strip()


def test_a_pooled_figure_below_its_minimum_evidence_says_too_few(ranked, client, settings):
    stored = QualitySnapshot.objects.filter(question=ranked.question).latest("updated_at")
    entry = stored.indicators["study"]["intervals"]["study"]["pooled_transitivity_kappa"]
    triplets = entry[3]
    assert triplets > 1
    assert _pooled_card(client, ranked).startswith(f"{entry[0]:.2f} [")  # enough evidence
    settings.QUALITY_MIN_TRIPLETS = triplets + 1
    card = _pooled_card(client, ranked)
    assert card.startswith(f"{triplets:,} triplets: too few")
    assert f"{entry[0]:.2f} [" not in card
