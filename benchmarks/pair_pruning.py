"""How many pairs the PairScheduler asks, and how well it ranks consistent and noisy annotators.

Simulated annotators answer from a hidden order. Each row of the main table (n = 100 items,
20 runs unless ``--runs``) is one kind of annotator, run through three schedulers:

* ``adaptive``: today's scheduler (``PairScheduler(adaptive=True)``, new sessions), which
  verifies answers as the measured reliability warrants and fits the final ranking to every
  judgement;
* ``insertion``: binary insertion trusting every answer (``adaptive=False``, sessions started
  before the adaptive scheduler; below the kappa floor it asks every pair never asked);
* ``all pairs``: every n(n-1)/2 pair once, ranked by Copeland score (wins minus losses).

Both schedulers apply the kappa floor (0.4) after each answer as the services do
(:meth:`PairScheduler.check_floor`). Annotators:

* consistent, strict total order, calibration and audits off;
* consistent, strict total order, the shipped defaults (T = 10 calibration triplets, audit
  rate 0.1);
* 5 % and 20 % noisy: a hidden weak order (about n/3 tie groups), each answer replaced with
  that probability by one of the two other outcomes, defaults;
* random: each outcome equally likely, defaults.

Columns: pairs asked (mean) and its ratio to ceil(log2 n!), Kendall tau-b of the recovered
ranking to the truth (mean and worst run), share of runs with the exact ranking, with the
manager warned (kappa below the floor, stopped, or an estimated error rate of 20 % or more),
and stopped early (adaptive) or asked every pair (insertion).

Run from the repository root::

    .venv/bin/python -m benchmarks.pair_pruning [--runs 20] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from apps.preferences.scheduling import PairScheduler

Annotator = Callable[[int, int], int]
#: The default ``kappa_floor`` of a pairwise question (``PairwiseSettings``).
KAPPA_FLOOR = 0.4


@dataclass(frozen=True)
class Case:
    """One row of the table: an annotator and the settings of the question."""

    name: str
    ties: bool
    noise: float
    calibration_triplets: int
    audit_rate: float
    goal: str


CASES = [
    Case("consistent, calibration/audits off", False, 0.0, 0, 0.0, "<= 1.02 x bound, exact"),
    Case("consistent, defaults", False, 0.0, 10, 0.1, "<= 1.15 x bound, exact"),
    Case("5 % flipped", True, 0.05, 10, 0.1, "<= 1.5 x bound, tau >= 0.95"),
    Case("20 % flipped", True, 0.2, 10, 0.1, "<= 2.5 x bound, tau >= 0.85, warned"),
    Case("random", True, 2 / 3, 10, 0.1, "stops early, flagged"),
]


def hidden_levels(n: int, *, ties: bool, rng: random.Random) -> list[int]:
    """Hidden quality level of every item: a permutation, or about n/3 tie groups."""
    if ties:
        return [rng.randrange(max(2, n // 3)) for _ in range(n)]
    levels = list(range(n))
    rng.shuffle(levels)
    return levels


def annotator(levels: list[int], *, noise: float, rng: random.Random) -> Annotator:
    """Answer from the levels; with probability ``noise`` give one of the two other outcomes
    (``noise = 2/3``: every outcome equally likely, a random annotator)."""

    def answer(a: int, b: int) -> int:
        truth = (levels[a] > levels[b]) - (levels[a] < levels[b])
        if rng.random() < noise:
            return rng.choice([o for o in (1, 0, -1) if o != truth])
        return truth

    return answer


def _tau(levels: list[int], groups: list[list[int]]) -> tuple[float, bool]:
    """Kendall tau-b of a ranking (tie groups, best first) to the levels; exactly right?"""
    recovered = np.empty(len(levels))
    for position, group in enumerate(groups):
        recovered[list(group)] = -position
    tau = float(kendalltau(levels, recovered).statistic)
    truth = {frozenset(i for i in range(len(levels)) if levels[i] == v) for v in levels}
    exact = {frozenset(g) for g in groups} == truth and all(
        levels[groups[k][0]] > levels[groups[k + 1][0]] for k in range(len(groups) - 1)
    )
    return tau, exact


def run_session(n: int, case: Case, *, seed: int, scheduler: str) -> dict[str, float]:
    """One annotator's session under one scheduler; returns the row's figures."""
    rng = random.Random(seed)
    levels = hidden_levels(n, ties=case.ties, rng=rng)
    answer = annotator(levels, noise=case.noise, rng=rng)
    if scheduler == "all pairs":
        copeland = np.zeros(n)
        for a in range(n):
            for b in range(a + 1, n):
                outcome = answer(a, b) if rng.random() < 0.5 else -answer(b, a)
                copeland[a] += outcome
                copeland[b] -= outcome
        groups = [
            [int(i) for i in np.flatnonzero(copeland == v)] for v in sorted(set(copeland))[::-1]
        ]
        tau, exact = _tau(levels, groups)
        return {"asked": n * (n - 1) / 2, "tau": tau, "exact": exact, "warned": 0, "stopped": 0}
    session = PairScheduler(
        range(n),
        calibration_triplets=case.calibration_triplets,
        audit_rate=case.audit_rate,
        seed=seed,
        audit_rule=2,
        adaptive=scheduler == "adaptive",
    )
    while (pair := session.next_pair()) is not None:
        session.record(*pair, answer(*pair))
        session.check_floor(KAPPA_FLOOR)
    tau, exact = _tau(levels, session.ranking())
    return {
        "asked": len(session.judgements),
        "tau": tau,
        "exact": exact,
        "warned": session.flagged(KAPPA_FLOOR),
        "stopped": not session.pruning,
    }


def main() -> None:
    """Run every case under the three schedulers and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per row (default 20)")
    parser.add_argument("--quick", action="store_true", help="3 runs per row (smoke test)")
    parser.add_argument("-n", type=int, default=100, help="items (default 100)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    runs, n = (3 if args.quick else args.runs), args.n
    bound = math.ceil(math.lgamma(n + 1) / math.log(2))
    print(f"n = {n}, ceil(log2 n!) = {bound}, n(n-1)/2 = {n * (n - 1) // 2}, {runs} runs per row")
    header = (
        f"{'annotator':<35} {'scheduler':<10} {'asked':>7} {'x bound':>8} {'tau':>6}"
        f" {'min tau':>7} {'exact':>6} {'warned':>6} {'stopped':>7}  goal"
    )
    print(header)
    print("-" * len(header))
    report = []
    for case in CASES:
        for scheduler in ("adaptive", "insertion", "all pairs"):
            rows = [run_session(n, case, seed=s, scheduler=scheduler) for s in range(runs)]
            mean = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
            worst = min(row["tau"] for row in rows)
            report.append({"case": case.name, "scheduler": scheduler, **mean, "min_tau": worst})
            print(
                f"{case.name if scheduler == 'adaptive' else '':<35} {scheduler:<10}"
                f" {mean['asked']:>7.1f} {mean['asked'] / bound:>8.3f} {mean['tau']:>6.3f}"
                f" {worst:>7.3f} {mean['exact']:>6.2f} {mean['warned']:>6.2f}"
                f" {mean['stopped']:>7.2f}  {case.goal if scheduler == 'adaptive' else ''}"
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"n": n, "bound": bound, "runs": runs, "rows": report}, handle, indent=2)


if __name__ == "__main__":
    main()
