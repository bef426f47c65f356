"""How many pairs the PairScheduler asks, and how well it ranks noisy annotators.

Simulated annotators answer from a hidden order:

* consistent, strict total order: pairs asked against all n(n-1)/2 pairs and the
  information-theoretic minimum ceil(log2 n!) (calibration and audits off);
* consistent, hidden weak order (tie groups): pairs asked and whether the recovered tie
  groups are exact;
* noisy (weak order, 5 % and 20 % of answers replaced by one of the two other outcomes),
  with calibration (T = 10) and audits (rate 0.1) on: Kendall tau-b of the recovered
  ranking to the truth, transitivity kappa, contradictions.

Run from the repository root::

    .venv/bin/python -m benchmarks.pair_pruning [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable

import numpy as np
from scipy.stats import kendalltau

from apps.preferences.scheduling import PairScheduler

Annotator = Callable[[int, int], int]


def hidden_levels(n: int, *, ties: bool, rng: random.Random) -> list[int]:
    """Hidden quality level of every item: a permutation, or about n/3 tie groups."""
    if ties:
        return [rng.randrange(max(2, n // 3)) for _ in range(n)]
    levels = list(range(n))
    rng.shuffle(levels)
    return levels


def annotator(levels: list[int], *, noise: float, rng: random.Random) -> Annotator:
    """Answer from the levels; with probability ``noise`` give one of the two other outcomes."""

    def answer(a: int, b: int) -> int:
        truth = (levels[a] > levels[b]) - (levels[a] < levels[b])
        if rng.random() < noise:
            return rng.choice([o for o in (1, 0, -1) if o != truth])
        return truth

    return answer


def run_session(
    n: int,
    *,
    seed: int,
    ties: bool,
    noise: float = 0.0,
    calibration_triplets: int = 0,
    audit_rate: float = 0.0,
) -> dict[str, float]:
    """One annotator's session; returns pairs asked, exactness, Kendall tau, kappa."""
    rng = random.Random(seed)
    levels = hidden_levels(n, ties=ties, rng=rng)
    answer = annotator(levels, noise=noise, rng=rng)
    scheduler = PairScheduler(
        range(n),
        calibration_triplets=calibration_triplets,
        audit_rate=audit_rate,
        seed=seed,
    )
    while (pair := scheduler.next_pair()) is not None:
        scheduler.record(*pair, answer(*pair))
    ranking = scheduler.ranking()
    recovered = np.empty(n)
    for position, group in enumerate(ranking):
        recovered[list(group)] = -position
    truth_groups = sorted(
        {frozenset(i for i in range(n) if levels[i] == v) for v in levels}, key=min
    )
    exact = sorted((frozenset(g) for g in ranking), key=min) == truth_groups and all(
        levels[ranking[k][0]] > levels[ranking[k + 1][0]] for k in range(len(ranking) - 1)
    )
    return {
        "asked": len(scheduler.judgements),
        "exact": float(exact),
        "tau": float(kendalltau(levels, recovered).statistic),
        "kappa": scheduler.transitivity_kappa(),
        "contradictions": len(scheduler.contradictions),
    }


def mean_of(rows: list[dict[str, float]], key: str) -> float:
    """Mean of one field over runs, ignoring nan."""
    return float(np.nanmean([row[key] for row in rows]))


def main() -> None:
    """Run the three experiments and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and sizes (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    sizes = [10, 30, 100] if args.quick else [10, 30, 100, 200]
    runs = 5 if args.quick else 20
    report: dict[str, list[dict[str, float]]] = {"strict": [], "weak": [], "noisy": []}

    print(f"Consistent annotators, strict total order, no calibration/audit ({runs} runs)")
    print(f"{'n':>5} {'asked':>9} {'n(n-1)/2':>9} {'ceil lg n!':>10} {'ratio':>7} {'exact':>6}")
    for n in sizes:
        start = time.perf_counter()
        rows = [run_session(n, seed=s, ties=False) for s in range(runs)]
        bound = math.ceil(math.lgamma(n + 1) / math.log(2))
        asked = mean_of(rows, "asked")
        row = {"n": n, "asked": asked, "all_pairs": n * (n - 1) / 2, "bound": bound}
        row |= {"ratio": asked / bound, "exact": mean_of(rows, "exact")}
        row["seconds_per_session"] = (time.perf_counter() - start) / runs
        report["strict"].append(row)
        print(
            f"{n:>5} {asked:>9.1f} {n * (n - 1) // 2:>9} {bound:>10} {asked / bound:>7.4f}"
            f" {row['exact']:>6.2f}"
        )

    print(f"\nConsistent annotators, hidden weak order (~n/3 tie groups) ({runs} runs)")
    print(f"{'n':>5} {'asked':>9} {'n(n-1)/2':>9} {'ceil lg n!':>10} {'exact':>6}")
    for n in sizes:
        rows = [run_session(n, seed=s, ties=True) for s in range(runs)]
        bound = math.ceil(math.lgamma(n + 1) / math.log(2))
        row = {"n": n, "asked": mean_of(rows, "asked"), "exact": mean_of(rows, "exact")}
        report["weak"].append(row)
        print(f"{n:>5} {row['asked']:>9.1f} {n * (n - 1) // 2:>9} {bound:>10} {row['exact']:>6.2f}")

    print(f"\nNoisy annotators, weak order, calibration T=10, audit rate 0.1 ({runs} runs)")
    print(f"{'n':>5} {'noise':>6} {'asked':>9} {'tau-b':>7} {'kappa':>7} {'contra':>7}")
    for noise in (0.0, 0.05, 0.2):
        for n in sizes:
            rows = [
                run_session(
                    n, seed=s, ties=True, noise=noise, calibration_triplets=10, audit_rate=0.1
                )
                for s in range(runs)
            ]
            row = {"n": n, "noise": noise}
            row |= {key: mean_of(rows, key) for key in ("asked", "tau", "kappa", "contradictions")}
            report["noisy"].append(row)
            print(
                f"{n:>5} {noise:>6.2f} {row['asked']:>9.1f} {row['tau']:>7.3f}"
                f" {row['kappa']:>7.3f} {row['contradictions']:>7.1f}"
            )

    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
