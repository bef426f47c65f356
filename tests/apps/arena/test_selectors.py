"""The arena's next pair (active sampling, no repeats), progress and pooled ranking."""

from __future__ import annotations

import math
import uuid
from collections import Counter

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from analytics.metrics.arena import arena_ranking, next_model_pair
from apps.arena.selectors import (
    N_BOOT,
    SEED,
    arena_progress,
    arena_results,
    arena_state,
    question_votes,
)
from apps.arena.services import arena_vote_record
from tests.apps.arena.conftest import MODELS, make_arena_study, truthful, vote_all
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study

pytestmark = pytest.mark.django_db
N_PAIRS = math.comb(len(MODELS), 2)
GOLDEN = (math.sqrt(5) - 1) / 2  # 1 / golden ratio: the most even low-discrepancy step


def _pair(vote):
    return frozenset((vote.model_a, vote.model_b))


def test_an_annotator_is_asked_every_prompt_and_pair_once():
    arena = make_arena_study(n_prompts=3, n_annotators=2)
    user = arena.annotators[0]
    assert arena_progress(question=arena.question, annotator=user)["total"] == 3 * N_PAIRS
    assert vote_all(arena.question, user) == 3 * N_PAIRS
    mine = question_votes(question=arena.question, annotator=user)
    assert len({(vote.prompt, _pair(vote)) for vote in mine}) == 3 * N_PAIRS
    state = arena_state(question=arena.question, annotator=user)
    assert state.task is None
    assert state.progress == {"done": 18, "total": 18, "percent": 100}
    # the other annotator still has every pair to judge
    assert arena_state(question=arena.question, annotator=arena.annotators[1]).task is not None


def test_the_active_pair_is_the_one_next_model_pair_chooses_on_the_fewest_voted_prompt():
    arena = make_arena_study(n_prompts=6, n_annotators=2)
    first, second = arena.annotators
    for _ in range(14):  # the first annotator's votes set the ranking
        task = arena_state(question=arena.question, annotator=first).task
        arena_vote_record(
            question=arena.question,
            annotator=first,
            item_id=task.item.pk,
            model_a=task.model_a,
            model_b=task.model_b,
            outcome=truthful(task.model_a, task.model_b),
            idempotency_key=uuid.uuid4(),
        )
    votes = question_votes(question=arena.question)
    choice = next_model_pair(votes, models=sorted(MODELS), weights=dict.fromkeys([first.pk], 1.0))
    state = arena_state(question=arena.question, annotator=second)
    assert state.task.how in {"active", "explored"}
    assert {state.task.model_a, state.task.model_b} == {choice.model_a, choice.model_b}
    on_pair = Counter(v.prompt for v in votes if _pair(v) == {choice.model_a, choice.model_b})
    fewest = min(on_pair[item.pk] for item in arena.items)
    assert on_pair[state.task.item.pk] == fewest
    # the same page again shows the same pair and sides
    again = arena_state(question=arena.question, annotator=second).task
    assert (again.item, again.model_a, again.model_b) == (
        state.task.item,
        state.task.model_a,
        state.task.model_b,
    )


def test_active_sampling_aims_at_the_close_pair_and_uniform_ignores_the_ranking():
    """bison and camel are close (0.2 apart), the rest far (3 apart). After 48 votes, the order
    active sampling is settling is bison vs camel, it put that pair on far more than its
    uniform share of the votes, and every pair came from next_model_pair (or its fallback);
    the uniform option draws every pair at random.

    The outcomes follow Bradley-Terry by a low-discrepancy sequence per pair (the k-th vote on
    a pair goes to its first model when frac(k / golden ratio) is below that model's win
    probability), so each pair's wins stay within one vote of their expectation whichever
    pairs the sampler draws: its draws are seeded by the question's and annotator's ids, and a
    random outcome sequence made the end state depend on the ids (1 run in 40 targeted
    another pair)."""
    strength = {"alpaca": 3.0, "bison": 0.2, "camel": 0.0, "dingo": -3.0}
    close = frozenset(("bison", "camel"))
    for sampling in ("active", "uniform"):
        arena = make_arena_study(n_prompts=20, n_annotators=1, settings={"sampling": sampling})
        user = arena.annotators[0]
        hows, on_pair = Counter(), Counter()
        for _ in range(48):
            task = arena_state(question=arena.question, annotator=user).task
            hows[task.how] += 1
            pair = frozenset((task.model_a, task.model_b))
            on_pair[pair] += 1
            first, second = sorted(pair)
            p_first = 1 / (1 + math.exp(strength[second] - strength[first]))
            first_wins = (on_pair[pair] * GOLDEN) % 1 < p_first
            arena_vote_record(
                question=arena.question,
                annotator=user,
                item_id=task.item.pk,
                model_a=task.model_a,
                model_b=task.model_b,
                outcome=1 if first_wins == (task.model_a == first) else -1,
                idempotency_key=uuid.uuid4(),
            )
        if sampling == "uniform":
            assert set(hows) == {"uniform"}
            continue
        assert set(hows) <= {"active", "explored", "fallback"}
        assert hows["active"] > hows["explored"] + hows["fallback"]
        assert on_pair[close] > 2 * 48 / N_PAIRS
        votes = question_votes(question=arena.question)
        choice = next_model_pair(votes, models=sorted(MODELS), weights={user.pk: 1.0})
        assert set(choice.target) == close


def test_the_budget_caps_an_annotators_votes():
    arena = make_arena_study(n_prompts=3, n_annotators=1, settings={"budget": 5})
    user = arena.annotators[0]
    key = uuid.uuid4()
    task = arena_state(question=arena.question, annotator=user).task
    last = {"item_id": task.item.pk, "model_a": task.model_a, "model_b": task.model_b}
    arena_vote_record(
        question=arena.question, annotator=user, outcome=1, idempotency_key=key, **last
    )
    assert vote_all(arena.question, user) == 4
    # the first vote resent after the budget is spent is still a replay, not a refusal
    arena_vote_record(
        question=arena.question, annotator=user, outcome=1, idempotency_key=key, **last
    )
    with pytest.raises(ValidationError, match="5 votes asked"):  # not by the API either
        arena_vote_record(
            question=arena.question,
            annotator=user,
            item_id=arena.items[2].pk,
            model_a="camel",
            model_b="dingo",
            outcome=1,
            idempotency_key=uuid.uuid4(),
        )
    assert arena_progress(question=arena.question, annotator=user) == {
        "done": 5,
        "total": 5,
        "percent": 100,
    }


def test_prompts_with_fewer_than_two_responses_are_never_shown():
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    arena.items[1].metadata = {"responses": {"alpaca": "only one"}}
    arena.items[1].save()
    user = arena.annotators[0]
    assert vote_all(arena.question, user) == N_PAIRS
    assert {v.prompt for v in question_votes(question=arena.question)} == {arena.items[0].pk}


def test_the_results_are_arena_ranking_of_the_votes_with_the_annotators_weights():
    arena = make_arena_study(n_prompts=3, n_annotators=2)
    for user in arena.annotators:
        vote_all(arena.question, user)
    votes = [tuple(v) for v in question_votes(question=arena.question)]
    found = arena_results(question=arena.question)
    direct = arena_ranking(
        votes,
        models=sorted(MODELS),
        weights={user.pk: 1.0 for user in arena.annotators},
        n_boot=N_BOOT,
        seed=SEED,
    )
    by_model = {row.model: row for row in found.rows}
    for k, model in enumerate(direct.models):
        row = by_model[model]
        assert row.log_strength == pytest.approx(direct.log_strengths[k])
        assert (row.low, row.high) == (pytest.approx(direct.low[k]), pytest.approx(direct.high[k]))
        assert (row.rank_low, row.rank_high) == (direct.rank_low[k], direct.rank_high[k])
        assert row.rank == direct.rank[k]
        assert row.p_best == pytest.approx(direct.p_best[k])
        assert row.votes == sum(model in (v[1], v[2]) for v in votes)
    assert [row.model for row in found.rows] == ["alpaca", "bison", "camel", "dingo"]
    assert (found.n_votes, found.n_prompts, len(found.annotators)) == (36, 3, 2)
    assert found.plot is not None
    assert len(found.plot["rows"]) == 4


def test_annotators_count_with_the_weight_measured_on_the_studys_pairwise_question():
    """The weights are the pairwise scores' own (question_scores), not a second estimate."""
    from apps.preferences.selectors import question_scores
    from apps.studies.services import question_create

    pairwise = make_pairwise_study(n_items=6, n_annotators=1)
    noisy = pairwise.annotators[0]
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    right = by_level(levels)
    flip = iter(np.random.default_rng(3).random(500) < 0.3)  # 30 % of the answers wrong
    answer_all(pairwise.question, noisy, lambda a, b: -right(a, b) if next(flip) else right(a, b))
    measured = dict(question_scores(question=pairwise.question).annotator_weights)
    question = question_create(study=pairwise.study, key="helpful", prompt="Better?", kind="arena")
    for k, item in enumerate(pairwise.items):
        item.metadata = {"responses": {"alpaca": f"a{k}", "bison": f"b{k}"}}
        item.save()
    vote_all(question, noisy)
    found = arena_results(question=question)
    (row,) = found.annotators
    assert row.measured
    assert row.weight == pytest.approx(measured[noisy.username])
    assert row.weight < 1.0


def test_an_exhausted_active_pair_falls_back_to_an_open_pair_of_the_annotator(monkeypatch):
    from analytics.metrics.arena import PairChoice
    from apps.arena import selectors

    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user, item = arena.annotators[0], arena.items[0]
    arena_vote_record(
        question=arena.question,
        annotator=user,
        item_id=item.pk,
        model_a="alpaca",
        model_b="bison",
        outcome=1,
        idempotency_key=uuid.uuid4(),
    )
    wanted = PairChoice("alpaca", "bison", ("alpaca", "bison"), 0.4, 1.0, 0.9, False)
    monkeypatch.setattr(selectors, "next_model_pair", lambda *args, **kwargs: wanted)
    task = arena_state(question=arena.question, annotator=user).task
    assert task.how == "fallback"
    assert {task.model_a, task.model_b} != {"alpaca", "bison"}  # never asked twice


def test_the_pooled_reads_are_made_once_per_window_and_an_annotators_own_votes_fresh(
    monkeypatch, settings
):
    """The next pair read every vote and prompt of the question and refitted the ranking on
    every request (0.2-0.5 s at 5,000 votes, growing with the votes). Within
    ``ARENA_POOL_SECONDS`` a process reuses them; an annotator's own votes are read each time,
    so no (prompt, pair) is asked twice."""
    from apps.arena import selectors

    settings.ARENA_POOL_SECONDS = 60
    selectors._POOLED.clear()
    fits = []
    original = selectors.next_model_pair
    monkeypatch.setattr(
        selectors, "next_model_pair", lambda *a, **k: fits.append(1) or original(*a, **k)
    )
    arena = make_arena_study(n_prompts=2, n_annotators=2)
    user = arena.annotators[0]
    seen = set()
    for _ in range(2 * N_PAIRS):
        task = arena_state(question=arena.question, annotator=user).task
        key = (task.item.pk, frozenset((task.model_a, task.model_b)))
        assert key not in seen  # the annotator's own votes are always current
        seen.add(key)
        arena_vote_record(
            question=arena.question,
            annotator=user,
            item_id=task.item.pk,
            model_a=task.model_a,
            model_b=task.model_b,
            outcome=truthful(task.model_a, task.model_b),
            idempotency_key=uuid.uuid4(),
        )
    assert arena_state(question=arena.question, annotator=user).task is None
    assert arena_state(question=arena.question, annotator=arena.annotators[1]).task is not None
    assert len(fits) == 1  # one fit for all those requests
    settings.ARENA_POOL_SECONDS = 0
    arena_state(question=arena.question, annotator=arena.annotators[1])
    assert len(fits) == 2
