"""Does the anchoring figure recover a simulated anchoring effect? (issue 28)

Design (stated with every figure): ``--items`` items (200), ``--annotators`` annotators (10)
who each answer every item, 3 labels with a uniform true label. The model's label is right with
probability 0.7 (else one of the two wrong labels at random). An annotator on their own answers
the true label with probability 0.75 (else a wrong one at random). The suggestion is held out
for a share 0.2 of the (annotator, item) pairs by the studio's own draw
(:func:`apps.models_registry.suggestions.suggestion_drawn` is a keyed hash; here a seeded
uniform draw with the same law). When the suggestion is shown **and wrong**, the annotator
follows it with probability ``f`` (else answers on their own); a followed answer takes a
lognormal time around 2 s, an own answer around 5 s.

The population effect is then

    Delta = (1 - m) * f * (1 - (1 - a) / (L - 1))

(m = 0.7 model accuracy, a = 0.75 annotator accuracy, L = 3 labels): the share of answers the
suggestion moves onto the model's label. For each ``f`` the script draws ``--studies`` seeded
studies and prints the mean estimate, the mean 95 % interval, and the coverage of Delta by the
study figure (item bootstrap, :func:`analytics.metrics.anchoring.anchoring_study`) and by each
annotator's Newcombe interval (:func:`analytics.metrics.anchoring.anchoring_effect`), plus the
share of annotators the card flags (:func:`analytics.metrics.anchoring.anchoring_flag`); then a
flag check with one rubber-stamping annotator per study (takes every suggestion shown, right or
wrong, in about 2 s) among others who follow a wrong one with probability 0.5. A 95 %
interval should cover in about 92-98 % of 200 studies (binomial spread +-3 points).

Run from the repository root::

    .venv/bin/python -m benchmarks.anchoring [--studies 200] [--items 200] [--annotators 10]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from analytics.metrics.anchoring import anchoring_effect, anchoring_flag, anchoring_study

LABELS = 3
MODEL_ACCURACY = 0.7
ANNOTATOR_ACCURACY = 0.75
HELD_OUT = 0.2


def population_effect(follow: float) -> float:
    """Delta of the design for a follow probability ``follow``."""
    chance_wrong_pick = (1 - ANNOTATOR_ACCURACY) / (LABELS - 1)
    return (1 - MODEL_ACCURACY) * follow * (1 - chance_wrong_pick)


def _wrong(rng: np.random.Generator, truth: np.ndarray) -> np.ndarray:
    """A uniformly drawn label other than ``truth`` (elementwise)."""
    return (truth + rng.integers(1, LABELS, truth.shape)) % LABELS


def simulate(
    rng: np.random.Generator,
    *,
    n_items: int,
    n_annotators: int,
    follow: float,
    stampers: int = 0,
) -> dict[str, np.ndarray]:
    """One study's answers, flattened (annotator-major); the first ``stampers`` annotators
    take every suggestion shown, right or wrong (a rubber stamp)."""
    truth = rng.integers(0, LABELS, n_items)
    model = np.where(rng.random(n_items) < MODEL_ACCURACY, truth, _wrong(rng, truth))
    shape = (n_annotators, n_items)
    own = np.where(
        rng.random(shape) < ANNOTATOR_ACCURACY, truth, _wrong(rng, np.broadcast_to(truth, shape))
    )
    shown = rng.random(shape) >= HELD_OUT
    followed = shown & (model != truth) & (rng.random(shape) < follow)
    followed[:stampers] = shown[:stampers]
    answer = np.where(followed, model, own)
    seconds = np.where(followed, 2.0, 5.0) * rng.lognormal(0.0, 0.3, shape)
    return {
        "annotator": np.repeat(np.arange(n_annotators), n_items),
        "item": np.tile(np.arange(n_items), n_annotators),
        "agree": (answer == model).ravel(),
        "shown": shown.ravel(),
        "seconds": seconds.ravel(),
    }


def run(*, studies: int, n_items: int, n_annotators: int, follows: list[float]) -> list[dict]:
    rows = []
    for follow in follows:
        delta = population_effect(follow)
        est, low, high, covered, ann_cov, flagged = [], [], [], 0, [], []
        for seed in range(studies):
            rng = np.random.default_rng([seed, int(follow * 1000)])
            data = simulate(rng, n_items=n_items, n_annotators=n_annotators, follow=follow)
            study = anchoring_study(
                data["item"], data["agree"], data["shown"], n_boot=1000, seed=seed
            )
            est.append(study.difference)
            low.append(study.low)
            high.append(study.high)
            covered += study.low <= delta <= study.high
            for k in range(n_annotators):
                mine = data["annotator"] == k
                effect = anchoring_effect(
                    data["agree"][mine], data["shown"][mine], seconds=data["seconds"][mine]
                )
                ann_cov.append(effect.low <= delta <= effect.high)
                flagged.append(anchoring_flag(effect) is not None)
        rows.append(
            {
                "follow": follow,
                "delta": delta,
                "estimate": float(np.mean(est)),
                "sd": float(np.std(est)),
                "low": float(np.mean(low)),
                "high": float(np.mean(high)),
                "coverage": covered / studies,
                "annotator_coverage": float(np.mean(ann_cov)),
                "flagged": float(np.mean(flagged)),
            }
        )
    return rows


def flag_check(*, studies: int, n_items: int, n_annotators: int) -> tuple[float, float]:
    """Share flagged of one rubber-stamping annotator per study, and of the others (who
    follow a wrong suggestion with probability 0.5)."""
    stamper, others = [], []
    for seed in range(studies):
        rng = np.random.default_rng([seed, 99])
        data = simulate(rng, n_items=n_items, n_annotators=n_annotators, follow=0.5, stampers=1)
        for k in range(n_annotators):
            mine = data["annotator"] == k
            effect = anchoring_effect(
                data["agree"][mine], data["shown"][mine], seconds=data["seconds"][mine]
            )
            (stamper if k == 0 else others).append(anchoring_flag(effect) is not None)
    return float(np.mean(stamper)), float(np.mean(others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--follow", type=float, nargs="+", default=[0.0, 0.2, 0.5, 1.0])
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    rows = run(
        studies=args.studies,
        n_items=args.items,
        n_annotators=args.annotators,
        follows=args.follow,
    )
    stamper, others = flag_check(
        studies=args.studies, n_items=args.items, n_annotators=args.annotators
    )
    elapsed = time.perf_counter() - started
    print(
        f"Design: {args.items} items x {args.annotators} annotators (everyone answers every "
        f"item), {LABELS} labels, model accuracy {MODEL_ACCURACY}, annotator accuracy "
        f"{ANNOTATOR_ACCURACY}, held out {HELD_OUT}; {args.studies} seeded studies per row; "
        "study interval: item bootstrap (1,000 replicates); annotator: Newcombe."
    )
    print(
        "| follow a wrong suggestion | simulated effect | mean estimate (sd) "
        "| mean 95 % interval | coverage, study | coverage, per annotator | annotators flagged |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['follow']:.2f} | {row['delta']:.4f} | {row['estimate']:.4f} "
            f"({row['sd']:.4f}) | [{row['low']:.4f}, {row['high']:.4f}] "
            f"| {row['coverage']:.1%} | {row['annotator_coverage']:.1%} "
            f"| {row['flagged']:.1%} |"
        )
    print(
        f"Flag check (one annotator per study takes every suggestion shown in ~2 s, the others "
        f"follow a wrong one with probability 0.5): rubber stamp flagged in {stamper:.1%} of "
        f"studies, the others in {others:.1%} of cases."
    )
    print(
        f"{elapsed:.1f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        "(1/5/15 min, at the start)"
    )


if __name__ == "__main__":
    main()
