"""Votes needed to separate the top two models of an arena: active sampling vs uniform pairs.

A simulated arena of ``--models`` models with true log strengths 0, -m, -m - 0.5, -m - 1.0,
... (the top two ``m`` apart, the rest 0.5 apart below them) collects votes one at a time until
the 95 % bootstrap interval of theta_1 - theta_2 from :func:`analytics.metrics.arena.
arena_ranking` excludes 0 and keeps excluding it, in the same order, at every look until the
votes have grown by ``--settle`` (x2): the votes needed are those at the first look of that
run. Looks come at votes growing by ``--growth`` (``--n-boot`` replicates over prompts; the
first at ``--min-votes``, since percentile intervals of a handful of votes are unreliable);
a simulation ends unseparated at ``--max-votes``. Without the settling rule (``--settle 1``)
the first look that excludes 0 stops, and early luck stops simulations: with 4 models, margin
0.1, a look every 10 % more votes and 15 simulations, the medians were 2952 (uniform), 1135
(active) and 2217 (top-1) votes against 7420, 5866 and 4578 settled (10 simulations, looks
every 25 %), and one separation of each active arm was in the wrong order. Each vote:

- belongs to a prompt (``--votes-per-prompt`` votes per prompt); every prompt shifts each
  model's strength by its own N(0, 0.3^2) effect (a prompt suits some models better);
- is cast by one of 10 annotators drawn uniformly: 7 with error rate 0.05 and 3 with 0.25 (a
  wrong answer is the reversed Bradley-Terry outcome); any annotator answers "tie" with
  probability 0.1; the fit weighs each by :func:`reliability_weight` of their error rate;
- compares the pair chosen by the arm: **uniform** (every pair equally likely), **active**
  (:func:`next_model_pair`, the whole ranking) or **active top-1** (``top=1``: which model is
  best); the active pair is recomputed after every ``max(10, votes // 50)`` votes, starting
  after one uniform round over all pairs (uniform, too, starts with that round), with forced
  exploration ``--explore`` (every pair keeps that share of its uniform allocation).

Annotator errors, ties and prompt effects shrink the difference the fit estimates to about 0.74
m (computed from the design), the same for every arm. Figures are medians over ``--sims``
seeded simulations per setting (the same seeds for every arm); a simulation that had not
separated at ``--max-votes`` counts as ``--max-votes`` (the median is then a lower bound,
marked ">="). "right order" counts the simulations whose settled separation put the truly
better model first.

A second table measures what the adaptive design costs the intervals: the coverage of the
95 % interval of theta_1 - theta_2 after a fixed budget of votes (no stopping), 4 models,
margin 0.1, in a clean world (flawless annotators, no ties, no prompt effects, so the fit's
target is exactly the true margin): uniform pairs, active with and without forced
exploration, and active top-1.

    nice -n 10 .venv/bin/python -m benchmarks.arena_sampling [--models 4,8]
        [--margins 0.1,0.2,0.4] [--sims 10] [--n-boot 200] [--max-votes 60000]
        [--growth 1.25] [--settle 2] [--explore 0.25] [--coverage-sims 80]
        [--coverage-budgets 400,1500]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import time
from collections.abc import Callable
from typing import NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see benchmarks/bt_scale.py

import numpy as np

from analytics.metrics.arena import ArenaRanking, arena_ranking, next_model_pair
from analytics.metrics.preferences import reliability_weight

ARMS = ("uniform", "active", "active top-1")


class World(NamedTuple):
    """The crowd and the prompts: annotators' error rates, tie rate, prompt effect sd."""

    errors: np.ndarray
    tie_rate: float
    prompt_sd: float

    @property
    def weights(self) -> dict[int, float]:
        return {k: reliability_weight(float(e)) for k, e in enumerate(self.errors)}


#: The separation table's crowd: 7 good annotators, 3 poor ones, 10 % ties, prompt effects.
CROWD = World(np.array([0.05] * 7 + [0.25] * 3), 0.1, 0.3)
#: The coverage table's: flawless annotators, no ties, no prompt effects, so that the fitted
#: Bradley-Terry difference is exactly the true margin and only the design can bias it.
CLEAN = World(np.zeros(10), 0.0, 0.0)


class Outcome(NamedTuple):
    votes: int
    separated: bool
    right_order: bool
    ranking: ArenaRanking


def true_strengths(n_models: int, margin: float) -> np.ndarray:
    below = -margin - 0.5 * np.arange(1, n_models - 1)
    return np.concatenate([[0.0, -margin], below])


def run(
    theta: np.ndarray,
    arm: str,
    seed: int,
    *,
    votes_per_prompt: int,
    n_boot: int,
    growth: float,
    max_votes: int,
    min_votes: int,
    world: World = CROWD,
    explore: float = 0.25,
    settle: float = 2.0,
) -> Outcome:
    """One simulated arena under one arm, until the top two separate or the budget ends."""
    k = theta.size
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    columns = {
        "prompt": np.arange(max_votes) // votes_per_prompt,
        "model_a": np.zeros(max_votes, dtype=np.intp),
        "model_b": np.zeros(max_votes, dtype=np.intp),
        "outcome": np.zeros(max_votes, dtype=np.int8),
        "annotator": rng.integers(0, world.errors.size, max_votes),
    }
    effects = rng.normal(0.0, world.prompt_sd, (max_votes // votes_per_prompt + 1, k))
    weights = world.weights
    first = rng.random((max_votes, 4))  # side, tie, outcome, error draws
    models = list(range(k))

    def head(n: int) -> dict[str, np.ndarray]:
        return {key: column[:n] for key, column in columns.items()}

    choose: Callable[[int], tuple[int, int]]
    if arm == "uniform":

        def choose(n: int) -> tuple[int, int]:
            return pairs[int(rng.integers(len(pairs)))]
    else:
        top = 1 if arm == "active top-1" else None
        cached: dict[str, object] = {"until": 0, "pair": (0, 1)}

        def choose(n: int) -> tuple[int, int]:
            if n >= int(cached["until"]):  # type: ignore[call-overload]
                pick = next_model_pair(
                    head(n), models=models, weights=weights, top=top, explore=explore
                )
                cached["pair"] = (int(pick.model_a), int(pick.model_b))  # type: ignore[call-overload]
                cached["until"] = n + max(10, n // 50)
            return cached["pair"]  # type: ignore[return-value]

    n = 0
    check = max(len(pairs), min_votes)
    since: int | None = None  # votes at the first look of the current run of separations
    since_sign, since_ranking = 0, None
    while True:
        while n < min(check, max_votes):
            a, b = pairs[n] if n < len(pairs) else choose(n)
            if first[n, 0] < 0.5:
                a, b = b, a
            prompt = columns["prompt"][n]
            d = theta[a] + effects[prompt, a] - theta[b] - effects[prompt, b]
            error = world.errors[columns["annotator"][n]]
            right = 1 if first[n, 2] < 1 / (1 + math.exp(-d)) else -1
            flip = first[n, 3] < error
            outcome = 0 if first[n, 1] < world.tie_rate else (-right if flip else right)
            columns["model_a"][n], columns["model_b"][n], columns["outcome"][n] = a, b, outcome
            n += 1
        result = arena_ranking(head(n), models=models, weights=weights, n_boot=n_boot, seed=seed)
        sign = 1 if result.diff_low[0, 1] > 0 else -1 if result.diff_high[0, 1] < 0 else 0
        if sign and since is None:
            since, since_sign, since_ranking = n, sign, result
        elif since is not None and sign != since_sign:
            since = None  # the separation did not hold: it was luck
        if since is not None and (n >= settle * since or n >= max_votes):
            return Outcome(since, True, since_sign == 1, since_ranking)
        if n >= max_votes:
            return Outcome(n, False, False, result)
        check = max(check + 1, math.ceil(check * growth))


def separation_table(args: argparse.Namespace) -> None:
    print(
        f"# design: true log strengths 0, -m, then 0.5 apart; prompt effects"
        f" N(0, {CROWD.prompt_sd}^2) per model; {args.votes_per_prompt} votes per prompt; 10"
        f" annotators (7 with error 0.05, 3 with 0.25), ties {CROWD.tie_rate:.0%}, weights"
        f" (1 - 2e)^2 (errors and ties shrink the fitted margin to about 0.74 m); separation ="
        f" 95 % prompt-bootstrap interval of theta_1 - theta_2 excluding 0 ({args.n_boot}"
        f" replicates), checked from {args.min_votes} votes every x{args.growth}; votes needed"
        f" = the first look of a separation (same order) that holds at every look until the"
        f" votes have grown x{args.settle}; active arms"
        f" with explore={args.explore}; medians over {args.sims} seeded simulations; cap"
        f" {args.max_votes} votes"
    )
    header = (
        f"{'models':>6} {'margin':>6} | {'uniform':>8} {'active':>8} {'top-1':>8} |"
        f" {'unif/act':>8} {'unif/top1':>9} | {'right order (u/a/t)':>19} | {'sec':>5}"
    )
    print(header)
    print("-" * len(header))
    for n_models in [int(x) for x in args.models.split(",")]:
        for margin in [float(x) for x in args.margins.split(",")]:
            theta = true_strengths(n_models, margin)
            start = time.perf_counter()
            medians, right, capped = [], [], []
            for arm in ARMS:
                outcomes = [
                    run(
                        theta,
                        arm,
                        1000 * n_models + 100 * round(10 * margin) + sim,
                        votes_per_prompt=args.votes_per_prompt,
                        n_boot=args.n_boot,
                        growth=args.growth,
                        max_votes=args.max_votes,
                        min_votes=args.min_votes,
                        explore=args.explore,
                        settle=args.settle,
                    )
                    for sim in range(args.sims)
                ]
                votes = np.array([o.votes for o in outcomes])
                medians.append(float(np.median(votes)))
                right.append(sum(o.right_order for o in outcomes))
                capped.append(2 * sum(not o.separated for o in outcomes) >= args.sims)
            cells = [f"{'>=' if c else ''}{m:.0f}" for m, c in zip(medians, capped, strict=True)]
            print(
                f"{n_models:>6} {margin:>6.1f} | {cells[0]:>8} {cells[1]:>8} {cells[2]:>8} |"
                f" {medians[0] / medians[1]:>8.1f} {medians[0] / medians[2]:>9.1f} |"
                f" {'/'.join(str(r) for r in right):>13} of {args.sims:<3} |"
                f" {time.perf_counter() - start:>5.0f}",
                flush=True,
            )


def coverage_table(args: argparse.Namespace) -> None:
    """Coverage of theta_1 - theta_2 at fixed budgets, clean world: what adaptivity costs."""
    n_models, margin = 4, 0.1
    theta = true_strengths(n_models, margin)
    budgets = [int(x) for x in args.coverage_budgets.split(",")]
    print(
        f"# coverage of the 95 % interval of theta_1 - theta_2 (true {margin}) after a fixed"
        f" budget, {n_models} models, flawless annotators, no ties, no prompt effects (the fit's"
        f" target is the true margin); {args.coverage_sims} seeded simulations per cell"
        f" (+-{100 * 1.96 * math.sqrt(0.95 * 0.05 / args.coverage_sims):.0f} points)"
    )
    arms = [
        ("uniform", 0.0),
        ("active", args.explore),
        ("active", 0.0),
        ("active top-1", args.explore),
    ]
    header = f"{'arm':>27} | " + " ".join(f"{f'n={b}':>9}" for b in budgets)
    print(header)
    print("-" * len(header))
    for arm, explore in arms:
        cells = []
        for budget in budgets:
            covered = 0
            for sim in range(args.coverage_sims):
                outcome = run(
                    theta,
                    arm,
                    50_000 + sim,
                    votes_per_prompt=args.votes_per_prompt,
                    n_boot=args.n_boot,
                    growth=args.growth,
                    max_votes=budget,
                    min_votes=budget,
                    world=CLEAN,
                    explore=explore,
                )
                r = outcome.ranking
                covered += bool(r.diff_low[0, 1] <= margin <= r.diff_high[0, 1])
            cells.append(f"{covered / args.coverage_sims:>9.0%}")
        name = arm if arm == "uniform" else f"{arm}, explore={explore}"
        print(f"{name:>27} | " + " ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="4,8")
    parser.add_argument("--margins", default="0.1,0.2,0.4")
    parser.add_argument("--sims", type=int, default=10)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--votes-per-prompt", type=int, default=2)
    parser.add_argument("--growth", type=float, default=1.25)
    parser.add_argument("--max-votes", type=int, default=60000)
    parser.add_argument("--min-votes", type=int, default=200)
    parser.add_argument("--explore", type=float, default=0.25)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--coverage-sims", type=int, default=80)
    parser.add_argument("--coverage-budgets", default="400,1500")
    parser.add_argument("--skip", choices=["separation", "coverage"], default=None)
    args = parser.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# arena sampling benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# load before: {load}")
    start = time.perf_counter()
    if args.skip != "separation":
        separation_table(args)
    if args.skip != "coverage":
        coverage_table(args)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# {time.perf_counter() - start:.0f} s; load after: {load}")


if __name__ == "__main__":
    main()
