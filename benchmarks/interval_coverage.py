"""Coverage of the 95 % intervals by simulation, and the runtime of the per-kind entry points.

Coverage: each simulated study is drawn from a population whose agreement is known; a 95 %
interval should contain it in 93-97 % of 1,000 studies (a binomial spread of +-1.4 points).

* Cohen's kappa of two raters (200 items): the Wald interval of ``kappa_interval`` and the
  item bootstrap of ``kappa_with_others_bootstrap``.
* Fleiss' kappa of 4 raters x 150 items (latent-class raters, 10 % missing): the
  linearisation interval of ``fleiss_kappa_interval`` and the item bootstrap; on the same
  studies, rater 0's kappa with others (item jackknife, ``kappa_with_others_interval``),
  whose population value is the same for exchangeable raters.
* kappa_SDA of two 1,001-sample traces whose joint sign state persists 5 steps on average:
  the HAC interval of ``kappa_sda_hac_interval`` and the percentile block bootstrap of
  ``kappa_sda_bootstrap``.

Small and sparse designs (``--designs``): latent-class raters (3 labels, prevalence
0.5/0.3/0.2, each answer the true label with probability 0.6, else a uniform draw; exchangeable,
so every rater's population kappa with others is the latent-class kappa, and MACE's trust is
0.6 exactly) in dense designs (everyone rates every item) and sparse ones (3 answers per item)
at 20 and 200 items, 5 and 10 raters: per cell, the share (and number) of studies where rater
0's figure shows an interval at all (else the dashboard reads "too few"), the coverage of the
intervals shown and the share of zero-width intervals, for kappa with others (item
jackknife, ``kappa_with_others_interval``) and MACE trust (profile likelihood, shown only with
8 or more other answers per compared item and 30 items, ``mace_trust``). Then transitivity
kappa of one Thurstone annotator judging every pair of 10 and 20 items (delete-one-item
jackknife, ``transitivity_kappa_jackknife``; population value by Monte Carlo).

Runtime: ``indicator_intervals_categorical`` at 50 annotators x 2,000 items (5 labels,
every item rated by everyone, and 30 % of the ratings present) and
``indicator_intervals_traces`` at 20 annotators x 20 traces x 3,000 samples.

Run from the repository root::

    .venv/bin/python -m benchmarks.interval_coverage [--studies 1000] [--skip-timing]
        [--designs 300] [--skip-classic]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np

from analytics.metrics import (
    kappa_from_confusion,
    kappa_interval,
    kappa_sda_bootstrap,
    kappa_sda_from_counts,
    kappa_with_others_bootstrap,
)
from analytics.metrics.crowd import mace_trust
from analytics.metrics.intervals import (
    fleiss_kappa_interval,
    indicator_intervals_categorical,
    indicator_intervals_traces,
    kappa_sda_hac_interval,
    kappa_with_others_interval,
)
from analytics.metrics.preferences import transitivity_chance
from analytics.metrics.uncertainty import fleiss_kappa_bootstrap, transitivity_kappa_jackknife

#: Joint distribution of two raters' labels (3 categories) in the Cohen simulation.
JOINT = np.array([[0.25, 0.05, 0.03], [0.04, 0.22, 0.06], [0.02, 0.05, 0.28]])
#: Joint distribution of two traces' step signs (-1, 0, +1) in the trace simulation.
SIGN_JOINT = np.array([[0.15, 0.08, 0.02], [0.06, 0.30, 0.06], [0.02, 0.08, 0.23]])


def _two_raters(table: np.ndarray) -> np.ndarray:
    """Ratings ``(2, n)`` realising a 3 x 3 confusion table."""
    a, b = np.divmod(np.repeat(np.arange(9), table.ravel()), 3)
    return np.vstack([a, b]).astype(float)


def _latent_class(rng: np.random.Generator, prior, accuracy, m, n, missing) -> np.ndarray:
    truth = rng.choice(len(prior), n, p=prior)
    keep = rng.random((m, n)) < accuracy
    ratings = np.where(keep, truth, rng.integers(0, len(prior), (m, n))).astype(float)
    ratings[rng.random((m, n)) < missing] = np.nan
    return ratings


def _latent_class_kappa(prior, accuracy) -> float:
    """Population Fleiss' kappa of the latent-class raters (pairwise agreement against pooled
    marginals)."""
    v = len(prior)
    report = accuracy * np.eye(v) + (1 - accuracy) / v
    p_o = float(prior @ (report**2).sum(axis=1))
    marginal = prior @ report
    p_e = float(marginal @ marginal)
    return (p_o - p_e) / (1 - p_e)


def _persistent_traces(rng: np.random.Generator, n_steps: int, persistence: float):
    """Two traces whose joint step state is redrawn from SIGN_JOINT with probability
    ``1 - persistence`` and kept otherwise."""
    states = rng.choice(9, size=n_steps, p=SIGN_JOINT.ravel())
    fresh = rng.random(n_steps) >= persistence
    fresh[0] = True
    states = states[np.maximum.accumulate(np.where(fresh, np.arange(n_steps), 0))]
    sx, sy = np.divmod(states, 3)
    return np.vstack([np.concatenate([[0], np.cumsum(s - 1)]) for s in (sx, sy)]).astype(float)


def _covers(low, high, true) -> bool:
    return bool(np.all(low <= true) and np.all(true <= high))


def coverage(n_studies: int, *, seed: int = 2026) -> dict[str, float]:
    """Share of studies whose 95 % interval holds the population value, per method."""
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(
        [
            "Cohen kappa, Wald (Fleiss-Cohen-Everitt)",
            "Cohen kappa, item bootstrap",
            "Fleiss kappa, linearisation (Gwet)",
            "Fleiss kappa, item bootstrap",
            "kappa with others (4 raters), item jackknife",
            "kappa_SDA, HAC flat-top",
            "kappa_SDA, circular block bootstrap",
        ],
        0,
    )
    keys = list(hits)
    true_cohen = kappa_from_confusion(JOINT)
    prior, accuracy = np.array([0.5, 0.3, 0.2]), 0.6
    true_fleiss = _latent_class_kappa(prior, accuracy)
    true_sda = kappa_sda_from_counts(SIGN_JOINT)
    for study in range(n_studies):
        table = rng.multinomial(200, JOINT.ravel()).reshape(3, 3)
        res = kappa_interval(table)
        hits[keys[0]] += _covers(res.low, res.high, true_cohen)
        res = kappa_with_others_bootstrap(_two_raters(table), n_boot=500, seed=study)
        hits[keys[1]] += _covers(res.low[0], res.high[0], true_cohen)
        ratings = _latent_class(rng, prior, accuracy, 4, 150, 0.1)
        res = fleiss_kappa_interval(ratings)
        hits[keys[2]] += _covers(res.low, res.high, true_fleiss)
        res = fleiss_kappa_bootstrap(ratings, n_boot=500, seed=study)
        hits[keys[3]] += _covers(res.low, res.high, true_fleiss)
        res = kappa_with_others_interval(ratings)
        hits[keys[4]] += _covers(res.low[0], res.high[0], true_fleiss)
        traces = _persistent_traces(rng, 1000, 0.8)
        res = kappa_sda_hac_interval([traces])
        hits[keys[5]] += _covers(res.low, res.high, true_sda)
        res = kappa_sda_bootstrap(traces[0], traces[1], n_boot=500, seed=study)
        hits[keys[6]] += _covers(res.low, res.high, true_sda)
    return {key: count / n_studies for key, count in hits.items()}


DESIGNS = [
    (raters, items, per_item)
    for items in (20, 200)
    for raters in (5, 10)
    for per_item in (None, 3)  # None: everyone rates every item
]


def _design_study(rng: np.random.Generator, raters: int, items: int, per_item: int | None):
    """Latent-class ratings (prior 0.5/0.3/0.2, accuracy 0.6), dense or ``per_item`` each."""
    ratings = _latent_class(rng, np.array([0.5, 0.3, 0.2]), 0.6, raters, items, 0.0)
    if per_item is not None:
        keep = np.argsort(rng.random((raters, items)), axis=0) < per_item
        ratings[~keep] = np.nan
    return ratings


def design_coverage(
    n_studies: int, *, seed: int = 23
) -> list[tuple[str, str, float, float, float]]:
    """Per design and figure: share with an interval, its coverage, share of zero width."""
    rng = np.random.default_rng(seed)
    true_kappa = _latent_class_kappa(np.array([0.5, 0.3, 0.2]), 0.6)
    rows = []
    for raters, items, per_item in DESIGNS:
        name = f"{raters} raters x {items} items, " + (
            "dense" if per_item is None else f"{per_item} per item"
        )
        tallies = {"kappa with others": [0, 0, 0], "MACE trust": [0, 0, 0]}
        for _ in range(n_studies):
            ratings = _design_study(rng, raters, items, per_item)
            for figure, res, true in (
                ("kappa with others", kappa_with_others_interval(ratings), true_kappa),
                ("MACE trust", mace_trust(ratings), 0.6),
            ):
                low, high = float(res.low[0]), float(res.high[0])
                if np.isnan(low) or np.isnan(high):
                    continue
                tally = tallies[figure]
                tally[0] += 1
                tally[1] += low <= true <= high
                tally[2] += high - low < 1e-9
        for figure, (shown, covered, zero) in tallies.items():
            rows.append(
                (
                    name,
                    figure,
                    shown / n_studies,
                    covered / shown if shown else float("nan"),
                    zero / shown if shown else float("nan"),
                )
            )
    return rows


#: Thurstone annotator of the transitivity cells: latent scores N(0, 1), each judgement on
#: the score difference plus N(0, NOISE) noise, "equal" when it is within +-TIE.
THURSTONE_NOISE, THURSTONE_TIE = 0.2, 0.3


def _thurstone(rng: np.random.Generator, a, b) -> np.ndarray:
    d = a - b + rng.normal(0.0, THURSTONE_NOISE, np.shape(a))
    return np.where(np.abs(d) < THURSTONE_TIE, 0, np.sign(d)).astype(int)


def thurstone_transitivity(n_triplets: int = 2_000_000, seed: int = 0) -> float:
    """Population transitivity kappa (chance from the tie rate) of the Thurstone annotator:
    the share of transitive triplets and the tie rate over ``n_triplets`` independent
    triplets of items (Monte Carlo; 0.876 to three decimals)."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((3, n_triplets))
    out = {(0, 1): _thurstone(rng, s[0], s[1]), (1, 2): _thurstone(rng, s[1], s[2])}
    out[(0, 2)] = _thurstone(rng, s[0], s[2])
    at_least = {}  # x R y: x at least as good as y
    for (x, y), o in out.items():
        at_least[(x, y)], at_least[(y, x)] = o >= 0, o <= 0
    transitive = np.ones(n_triplets, dtype=bool)
    for x, y, z in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        transitive &= ~(at_least[(x, y)] & at_least[(y, z)] & ~at_least[(x, z)])
    chance = transitivity_chance(float(np.mean(np.concatenate(list(out.values())) == 0)))
    return (float(transitive.mean()) - chance) / (1 - chance)


def transitivity_coverage(
    n_studies: int, *, seed: int = 27
) -> list[tuple[str, str, float, float, float]]:
    """One Thurstone annotator judging every pair of 10 or 20 items: the share of studies
    with an interval (delete-one-item jackknife), its coverage and zero-width share."""
    rng = np.random.default_rng(seed)
    true = thurstone_transitivity()
    rows = []
    for items in (10, 20):
        a, b = np.triu_indices(items, 1)
        shown = covered = zero = 0
        for _ in range(n_studies):
            score = rng.standard_normal(items)
            outcome = _thurstone(rng, score[a], score[b])
            res = transitivity_kappa_jackknife(list(zip(a, b, outcome, strict=True)))
            if np.isnan(res.low) or np.isnan(res.high):
                continue
            shown += 1
            covered += res.low <= true <= res.high
            zero += res.high - res.low < 1e-9
        rows.append(
            (
                f"1 annotator x {items} items, every pair (true K {true:.3f})",
                "transitivity kappa",
                shown / n_studies,
                covered / shown if shown else float("nan"),
                zero / shown if shown else float("nan"),
            )
        )
    return rows


def timing(seed: int = 0) -> dict[str, float]:
    """Seconds of one call of each entry point at dashboard scale (1,000 replicates)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 5, 2000)
    full = np.where(rng.random((50, 2000)) < 0.7, truth, rng.integers(0, 5, (50, 2000)))
    full = full.astype(float)
    retest = np.where(rng.random(full.shape) < 0.1, full, np.nan)
    sparse = np.where(rng.random(full.shape) < 0.3, full, np.nan)
    out = {}
    for label, ratings, ordered in (
        ("categorical 50 x 2,000, all rated", full, False),
        ("ordinal (linear weights) 50 x 2,000, all rated", full, True),
        ("categorical 50 x 2,000, 30 % rated", sparse, False),
    ):
        start = time.perf_counter()
        indicator_intervals_categorical(ratings, retest=retest, ordered=ordered, seed=0)
        out[label] = time.perf_counter() - start
    items, truths = [], []
    for i in range(20):
        signal = np.cumsum(rng.normal(0, 0.02, 3040))
        lags = rng.integers(0, 15, 20)
        noise = np.cumsum(rng.normal(0, 0.005, (20, 3000)), axis=1)
        rows = np.vstack([signal[20 - lag : 3020 - lag] for lag in lags]) + noise
        items.append(np.round(np.clip(rows, -5, 5), 2))
        truths.append(signal[20:3020] if i < 5 else None)
    start = time.perf_counter()
    indicator_intervals_traces(items, rate_hz=10, truths=truths, max_lag=2.0, tol=0.005)
    out["traces 20 x 20 x 3,000 (5 gold items)"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-classic", action="store_true")
    parser.add_argument("--designs", type=int, default=0, help="studies per design cell")
    args = parser.parse_args()
    if not args.skip_classic:
        start = time.perf_counter()
        found = coverage(args.studies)
        print(f"Coverage of 95 % intervals over {args.studies:,} simulated studies")
        for key, share in found.items():
            print(f"  {key:<42} {share:6.1%}")
        print(f"  ({time.perf_counter() - start:.0f} s)")
    if args.designs:
        start = time.perf_counter()
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"\nSmall and sparse designs, {args.designs} studies per cell; load: {load}")
        print("| design | figure | interval shown | coverage (goal 93-97 %) | zero width |")
        print("|---|---|---|---|---|")
        rows = design_coverage(args.designs) + transitivity_coverage(args.designs)
        for name, figure, shown, covered, zero in rows:
            shown_n = round(shown * args.designs)
            print(f"| {name} | {figure} | {shown:.0%} ({shown_n}) | {covered:.1%} | {zero:.1%} |")
        print(f"({time.perf_counter() - start:.0f} s)")
    if not args.skip_timing:
        print("\nEntry points (1,000 bootstrap replicates where they bootstrap)")
        for key, seconds in timing().items():
            print(f"  {key:<48} {seconds:6.1f} s")


if __name__ == "__main__":
    main()
