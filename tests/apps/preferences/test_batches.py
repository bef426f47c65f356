"""Batches: annotators of a large pairwise question each rank an overlapping batch of items."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.preferences.models import PairSession, clean_pairwise_settings
from apps.preferences.scheduling import batch_draw
from apps.preferences.selectors import judgement_progress
from apps.preferences.services import pair_next
from benchmarks.pair_budget import adaptive_batches, crowd_errors
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


def draw_rounds(n: int, size: int, annotators: int, seed: int = 0) -> list[list[int]]:
    """Batches drawn one annotator after another, each seeing the coverage so far."""
    rng = np.random.default_rng(seed)
    coverage: Counter[int] = Counter()
    batches = []
    for _ in range(annotators):
        batch = batch_draw(range(n), size=size, coverage=coverage, comparisons={}, rng=rng)
        coverage.update(batch)
        batches.append(batch)
        assert max(coverage[i] for i in range(n)) - min(coverage[i] for i in range(n)) <= 1
    return batches


def test_batches_cover_every_item_evenly():
    batches = draw_rounds(60, 20, 12)
    assert all(len(set(batch)) == 20 for batch in batches)
    assert set(Counter(item for batch in batches for item in batch).values()) == {4}


def test_later_batches_straddle_the_earlier_ones():
    batches = draw_rounds(60, 20, 6, seed=3)
    first_round = batches[:3]
    assert sorted(item for batch in first_round for item in batch) == list(range(60))
    for batch in batches[3:]:  # each joins items of every first-round batch
        assert all(set(batch) & set(earlier) for earlier in first_round)


def test_equally_covered_items_go_least_compared_first():
    comparisons = {item: 10 - item for item in range(10)}  # item 9 compared least
    coverage = dict.fromkeys(range(10), 1) | {0: 0}
    chosen = batch_draw(
        range(10),
        size=4,
        coverage=coverage,
        comparisons=comparisons,
        rng=np.random.default_rng(0),
    )
    assert chosen == [0, 7, 8, 9]  # the uncovered item, then the least compared, queue order


def test_the_pooled_ranking_over_batches_recovers_the_true_order():
    # 12 annotators (0-15 % of answers flipped, one answering every pair reversed) rank
    # batches of 20 of 60 items; the weighted pooled Bradley-Terry ranking merges them
    rng = np.random.default_rng(5)
    truth = rng.permutation(60).astype(float)
    curve, _ = adaptive_batches(truth, batch=20, errors=crowd_errors(12, rng), rng=rng)
    assert curve[-1][1] >= 0.85
    assert curve[-1][1] > curve[2][1]  # more batches, better ranking


def test_batch_size_setting_is_checked():
    assert clean_pairwise_settings({}).batch_size == 0
    assert clean_pairwise_settings({"batch_size": 50}).batch_size == 50
    for bad in (1, -3, 2.5, True, "20"):
        with pytest.raises(ValidationError) as caught:
            clean_pairwise_settings({"batch_size": bad})
        assert "batch_size" in caught.value.message_dict


def test_each_annotator_ranks_a_batch_and_progress_counts_the_batch(db):
    setup = make_pairwise_study(
        n_items=12, n_annotators=4, settings={"batch_size": 6, "calibration_triplets": 2}
    )
    # the home card's estimate before the first visit is the batch's, as the page's after it
    expected = judgement_progress(question=setup.question, annotator=setup.annotators[0])
    whole = make_pairwise_study(n_items=12, n_annotators=1, settings={"calibration_triplets": 2})
    assert (
        expected["total"]
        < judgement_progress(question=whole.question, annotator=whole.annotators[0])["total"]
    )
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    for annotator in setup.annotators:
        state = pair_next(question=setup.question, annotator=annotator)
        assert len(state.scheduler.items) == 6
        assert state.progress["total"] == expected["total"]
        answer_all(setup.question, annotator, by_level(levels))
    sessions = PairSession.objects.filter(question=setup.question)
    coverage = Counter(item for session in sessions for item in session.items)
    assert set(coverage.values()) == {2}  # 4 batches of 6 over 12 items: each item twice
    assert set(coverage) == set(levels)
