"""Reads of the model arena: the votes, the prompts an annotator may judge, the next pair and
the pooled ranking.

Votes are the current revisions of a question's annotations (:mod:`apps.arena.models`), one
:class:`Vote` per judged pair: ``(prompt item id, model_a, model_b, outcome, annotator id)``,
the shape :mod:`analytics.metrics.arena` takes.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError

from analytics.metrics.arena import ArenaRanking, arena_ranking, next_model_pair
from analytics.plotting import interval_plot
from apps.annotations.models import Annotation
from apps.arena.models import VOTES, ArenaSettings, clean_arena_settings, item_responses
from apps.items.models import Item
from apps.preferences.selectors import study_reliability_weights
from apps.studies.models import Question, Study
from apps.studies.selectors import question_item_filter
from core.types import Account

KIND = Question.Kind.ARENA.value  # the arena kind's key (apps.arena.kind.ARENA)
#: Bootstrap replicates of the results page's intervals, and their seed (the page shows the
#: same figures on every visit with the same votes).
N_BOOT = 1000
SEED = 0
#: The weight of an annotator whose reliability was never measured (no pairwise question of
#: the study judged): counted in full.
UNMEASURED = 1.0
#: Votes per pair of models from which the bootstrap intervals can be read (docs/arena.md).
ENOUGH_PAIR_VOTES = 10

Pair = tuple[str, str]  # two model names, sorted


class Vote(NamedTuple):
    """One judged pair: ``outcome`` 1 prefers ``model_a`` (shown as A), -1 ``model_b``, 0 a tie."""

    prompt: int
    model_a: str
    model_b: str
    outcome: int
    annotator: int


def arena_questions(*, study: Study) -> Any:
    """The study's arena questions (a queryset)."""
    return study.questions.filter(kind=KIND)


def votes_of(value: Any) -> list[dict[str, Any]]:
    """The votes of one stored answer value (``[]`` for a retraction or another shape)."""
    votes = value.get(VOTES) if isinstance(value, dict) else None
    return votes if isinstance(votes, list) else []


def question_votes(
    *, question: Question, left_out: Collection[int] = (), annotator: Account | None = None
) -> list[Vote]:
    """Every current vote of ``question`` (the annotators ``left_out`` excluded; one
    ``annotator``'s only if given), in answer order: one query."""
    rows = Annotation.objects.filter(question=question, current_revision__value__isnull=False)
    if left_out:
        rows = rows.exclude(annotator_id__in=list(left_out))
    if annotator is not None:
        rows = rows.filter(annotator=annotator)
    return [
        Vote(item_id, vote["model_a"], vote["model_b"], vote["outcome"], annotator_id)
        for item_id, annotator_id, value in rows.order_by("id").values_list(
            "item_id", "annotator_id", "current_revision__value"
        )
        for vote in votes_of(value)
    ]


def arena_prompts(*, question: Question, annotator: Account | None = None) -> dict[int, list[str]]:
    """Item id -> its models with a response (sorted), for the prompts ``question`` asks
    about that have two or more (those assigned to ``annotator`` in round 1, if given)."""
    items = Item.objects.filter(question_item_filter(question), study_id=question.study_id)
    if annotator is not None:
        items = items.filter(assignments__annotator=annotator, assignments__round=1)
    found = {}
    for pk, metadata in items.order_by("position", "id").values_list("pk", "metadata"):
        models = sorted(item_responses(metadata))
        if len(models) >= 2:
            found[pk] = models
    return found


def question_models(*, question: Question, votes: Iterable[Vote] = ()) -> list[str]:
    """The models of the arena: those with a response to a prompt in the question's scope,
    and those voted on, sorted."""
    models = {model for found in arena_prompts(question=question).values() for model in found}
    models.update(model for vote in votes for model in (vote.model_a, vote.model_b))
    return sorted(models)


def arena_weights(*, question: Question, annotator_ids: Iterable[int]) -> dict[Hashable, float]:
    """Annotator id -> the weight of their votes: their reliability measured on the study's
    pairwise questions (:func:`apps.preferences.selectors.study_reliability_weights`), or
    :data:`UNMEASURED` (1) for an annotator who judged none."""
    measured = study_reliability_weights(study=question.study)
    weights: dict[Hashable, float] = {}
    for annotator in annotator_ids:
        weights[annotator] = measured.get(annotator, UNMEASURED)
    return weights


def _pair(a: str, b: str) -> Pair:
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class ArenaTask:
    """One pair of responses to show: ``model_a`` as A (left), ``model_b`` as B (right).

    ``how``: ``active`` (the pair :func:`~analytics.metrics.arena.next_model_pair` chose),
    ``explored`` (its exploration floor chose it), ``fallback`` (the chosen pair has no prompt
    left for this annotator: their least voted open pair instead) or ``uniform``."""

    item: Item
    model_a: str
    model_b: str
    how: str


@dataclass(frozen=True)
class ArenaState:
    """An annotator's place in an arena question: the pair to judge (``None``: done), their
    votes and how many they will make in all (``progress``)."""

    settings: ArenaSettings
    task: ArenaTask | None
    done: int
    total: int
    n_prompts: int

    @property
    def progress(self) -> dict[str, int]:
        percent = round(100 * self.done / self.total) if self.total else 0
        return {"done": self.done, "total": self.total, "percent": percent}

    @property
    def remaining(self) -> int:
        return max(self.total - self.done, 0)


def _open_pairs(
    prompts: Mapping[int, Sequence[str]], mine: Iterable[Vote]
) -> dict[Pair, list[int]]:
    """Pair of models -> the prompts (item ids) where both answered and the annotator has not
    judged that pair yet."""
    judged = {(vote.prompt, _pair(vote.model_a, vote.model_b)) for vote in mine}
    available: dict[Pair, list[int]] = defaultdict(list)
    for item_id, models in prompts.items():
        for pair in combinations(models, 2):
            if (item_id, pair) not in judged:
                available[pair].append(item_id)
    return available


def _counts(available: Mapping[Pair, list[int]], budget: int, done: int) -> tuple[int, int]:
    """``(open, total)``: the open (prompt, pair)s, and the votes in all (capped by budget)."""
    n_open = sum(len(items) for items in available.values())
    total = done + n_open
    return n_open, min(total, budget) if budget else total


@dataclass(frozen=True)
class _Pooled:
    """What every annotator's next pair reads of all the question's votes: the pairs' and the
    (prompt, pair)s' vote counts and the pair active sampling chose (``None`` with uniform
    sampling)."""

    pairs: Counter[Pair]
    on_prompt: Counter[tuple[int, Pair]]
    choice: tuple[Pair, bool] | None


# question id -> (monotonic time, its pooled reads): kept ARENA_POOL_SECONDS per process
_POOLED: dict[int, tuple[float, _Pooled]] = {}


def _pooled(question: Question, settings: ArenaSettings) -> _Pooled:
    """The question's pooled reads, computed at most every ``ARENA_POOL_SECONDS`` seconds per
    process (0: on every call). They cost a read of every vote and prompt and a Bradley-Terry
    fit (0.2-0.5 s at 5,000 votes); an annotator's own votes are always read fresh, so a
    (prompt, pair) is never asked twice of one annotator."""
    ttl = float(django_settings.ARENA_POOL_SECONDS)
    now = time.monotonic()
    kept = _POOLED.get(question.pk)
    if ttl > 0 and kept is not None and now - kept[0] < ttl:
        return kept[1]
    votes = question_votes(question=question)
    choice = None
    if settings.sampling != "uniform":
        models = question_models(question=question, votes=votes)
        weights = arena_weights(question=question, annotator_ids={v.annotator for v in votes})
        chosen = next_model_pair(votes, models=models, weights=weights, top=settings.top or None)
        choice = (_pair(str(chosen.model_a), str(chosen.model_b)), bool(chosen.explored))
    pooled = _Pooled(
        pairs=Counter(_pair(vote.model_a, vote.model_b) for vote in votes),
        on_prompt=Counter((vote.prompt, _pair(vote.model_a, vote.model_b)) for vote in votes),
        choice=choice,
    )
    if ttl > 0:
        _POOLED[question.pk] = (now, pooled)
    return pooled


def arena_state(*, question: Question, annotator: Account) -> ArenaState:
    """The annotator's next pair of an arena question and their progress.

    The pair of models: with ``sampling="active"`` the one
    :func:`~analytics.metrics.arena.next_model_pair` picks from every vote so far (the
    annotators weighted by :func:`arena_weights`), over the models of the question's prompts,
    refitted at most every ``ARENA_POOL_SECONDS`` per process (:func:`_pooled`);
    if the annotator has judged that pair on every prompt of theirs, their open pair with the
    fewest votes in all. With ``sampling="uniform"`` one of their open pairs at random. The
    prompt: of the annotator's assigned prompts in scope offering both models and not yet
    judged on that pair by them, the one with the fewest votes on the pair (ties at random);
    the sides at random. A (prompt, pair) is never asked twice of one annotator. The draws
    are seeded by question, annotator and their votes so far: a reload shows the same pair.
    """
    settings = clean_arena_settings(question.settings)
    mine = question_votes(question=question, annotator=annotator)
    prompts = arena_prompts(question=question, annotator=annotator)
    available = _open_pairs(prompts, mine)
    done = len(mine)
    n_open, total = _counts(available, settings.budget, done)
    if n_open == 0 or (settings.budget and done >= settings.budget):
        return ArenaState(settings, None, done, total, len(prompts))
    rng = random.Random(f"arena-{question.pk}-{annotator.pk}-{done}")
    pooled = _pooled(question, settings)
    if pooled.choice is None:
        pair, how = rng.choice(sorted(available)), "uniform"
    else:
        pair, explored = pooled.choice
        how = "explored" if explored else "active"
        if pair not in available:
            fewest = min(pooled.pairs[p] for p in available)
            pair = rng.choice(sorted(p for p in available if pooled.pairs[p] == fewest))
            how = "fallback"
    on_pair = {item_id: pooled.on_prompt[(item_id, pair)] for item_id in available[pair]}
    least = min(on_pair.values())
    item_id = rng.choice([i for i in available[pair] if on_pair[i] == least])
    left, right = rng.sample(pair, 2)
    task = ArenaTask(Item.objects.get(pk=item_id), left, right, how)
    return ArenaState(settings, task, done, total, len(prompts))


def arena_progress(*, question: Question, annotator: Account) -> dict[str, int]:
    """The annotator's ``{"done", "total", "percent"}`` as the arena page counts them (no
    pair chosen: no fit)."""
    try:
        settings = clean_arena_settings(question.settings)
    except ValidationError:  # a mistyped setting: the page says so; the home card counts nothing
        return {"done": 0, "total": 0, "percent": 0}
    mine = question_votes(question=question, annotator=annotator)
    prompts = arena_prompts(question=question, annotator=annotator)
    _, total = _counts(_open_pairs(prompts, mine), settings.budget, len(mine))
    return ArenaState(settings, None, len(mine), total, len(prompts)).progress


# ----------------------------------------------------------------- results


@dataclass(frozen=True)
class ModelRow:
    """One model's line of the results table (figures of :class:`ArenaRanking`)."""

    model: str
    log_strength: float
    low: float
    high: float
    rank: int
    rank_low: int | None
    rank_high: int | None
    p_best: float
    votes: int
    wins: int
    ties: int
    losses: int
    prompts: int
    ahead_settled: bool | None  # its lead over the next model is settled (None: last)


@dataclass(frozen=True)
class AnnotatorWeight:
    """An annotator's votes and the weight they count with (``measured``: from the study's
    pairwise questions; else :data:`UNMEASURED`)."""

    username: str
    votes: int
    weight: float
    measured: bool


@dataclass(frozen=True)
class ArenaResults:
    """The arena's ranking and what it rests on."""

    ranking: ArenaRanking | None
    rows: list[ModelRow]
    unvoted: list[str]
    n_votes: int
    n_prompts: int
    n_prompts_total: int
    annotators: list[AnnotatorWeight]
    weighted_votes: float
    plot: dict[str, Any] | None = None
    pairs_judged: int = 0
    pairs_total: int = 0
    fewest_pair_votes: int = 0  # votes on the least compared pair of models that has any

    @property
    def few_votes(self) -> bool:
        """Some compared pair has fewer than :data:`ENOUGH_PAIR_VOTES` votes: its percentile
        intervals are unreliable (docs/arena.md)."""
        return self.n_votes > 0 and self.fewest_pair_votes < ENOUGH_PAIR_VOTES


def _ordinal(value: float) -> int | None:
    """A rank as a whole number; ``None`` without a bootstrap (nan)."""
    return None if math.isnan(value) else round(float(value))


def arena_results(
    *, question: Question, left_out: Collection[int] = (), n_boot: int = N_BOOT
) -> ArenaResults:
    """The models ranked by :func:`~analytics.metrics.arena.arena_ranking` on every current
    vote (the annotators ``left_out`` excluded), annotators weighted by :func:`arena_weights`,
    intervals from ``n_boot`` replicates of a bootstrap over prompts (seed :data:`SEED`), with
    the votes, prompts and annotators it rests on and the plot of the strengths."""
    from django.contrib.auth import get_user_model

    votes = question_votes(question=question, left_out=left_out)
    models = question_models(question=question, votes=votes)
    per_annotator = Counter(vote.annotator for vote in votes)
    weights = arena_weights(question=question, annotator_ids=per_annotator)
    measured = study_reliability_weights(study=question.study)
    names = dict(
        get_user_model().objects.filter(pk__in=list(per_annotator)).values_list("pk", "username")
    )
    annotators = sorted(
        (
            AnnotatorWeight(names.get(a, f"#{a}"), n, weights[a], a in measured)
            for a, n in per_annotator.items()
        ),
        key=lambda row: row.username,
    )
    prompts_total = len(arena_prompts(question=question))
    pairs_total = math.comb(len(models), 2)
    judged_pairs = Counter(_pair(v.model_a, v.model_b) for v in votes)
    evidence = ArenaResults(
        ranking=None,
        rows=[],
        unvoted=models,
        n_votes=len(votes),
        n_prompts=len({vote.prompt for vote in votes}),
        n_prompts_total=prompts_total,
        annotators=annotators,
        weighted_votes=float(sum(weights[v.annotator] for v in votes)),
        pairs_judged=len(judged_pairs),
        pairs_total=pairs_total,
        fewest_pair_votes=min(judged_pairs.values(), default=0),
    )
    if not votes or len(models) < 2:
        return evidence
    ranking = arena_ranking(votes, models=models, weights=weights, n_boot=n_boot, seed=SEED)
    tally: dict[str, Counter[str]] = {model: Counter() for model in models}
    prompts_of: dict[str, set[int]] = defaultdict(set)
    for vote in votes:
        for model, sign in ((vote.model_a, 1), (vote.model_b, -1)):
            result = vote.outcome * sign
            tally[model]["wins" if result > 0 else "losses" if result < 0 else "ties"] += 1
            prompts_of[model].add(vote.prompt)
    index = {model: k for k, model in enumerate(ranking.models)}
    fitted = [m for m in models if not np.isnan(ranking.log_strengths[index[m]])]
    fitted.sort(key=lambda m: -ranking.log_strengths[index[m]])
    rows = []
    for position, model in enumerate(fitted):
        k = index[model]
        below = fitted[position + 1] if position + 1 < len(fitted) else None
        counts = tally[model]
        rows.append(
            ModelRow(
                model=model,
                log_strength=float(ranking.log_strengths[k]),
                low=float(ranking.low[k]),
                high=float(ranking.high[k]),
                rank=round(float(ranking.rank[k])),
                rank_low=_ordinal(ranking.rank_low[k]),
                rank_high=_ordinal(ranking.rank_high[k]),
                p_best=float(ranking.p_best[k]),
                votes=counts.total(),
                wins=counts["wins"],
                ties=counts["ties"],
                losses=counts["losses"],
                prompts=len(prompts_of[model]),
                ahead_settled=None if below is None else ranking.separated(model, below),
            )
        )
    plot = interval_plot(
        [
            [row.log_strength, row.low, row.high, row.votes]
            if math.isfinite(row.low) and math.isfinite(row.high)
            else None
            for row in rows
        ],
        [row.model for row in rows],
        floor=None,
        flagged=set(),
        fmt="{:+.2f}",
        unit="votes",
    )
    return replace(
        evidence,
        ranking=ranking,
        rows=rows,
        unvoted=[m for m in models if m not in fitted],
        plot=plot,
    )
