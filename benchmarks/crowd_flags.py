"""Flag rates in simulated crowd studies: random annotators, copiers, false alarms.

Each simulated study is a sparse crowd design of known truth: ``--annotators`` annotators
(default 30), 3 answers per item, each annotator 20-40 items (uniform), 4 labels with
prevalence 0.4/0.3/0.2/0.1, annotators of accuracy uniform in ``--accuracy`` (errors spread
evenly over the wrong labels) and one annotator answering uniformly at random. With
``--copier`` annotator 2's answers are replaced by a copy of annotator 1's (both then answer
the same items identically).

The figures and flags are the dashboard's: the categorical kind's live indicators
(:func:`apps.categorical.indicators.derive_categorical`), its intervals and crowd findings
(:func:`apps.categorical.indicators.ratings_intervals`, without test-retest and seconds,
which the simulation has not) and the flag rules of :func:`analytics.services._rule_hits`
with the default configuration. Printed: the share of studies whose random annotator got a
flag (any rule; and by the MACE trust rule), the share of good annotators flagged (any rule,
and per rule), with ``uptime``'s load. The goal: >= 90 % and <= 2 %.

Run from the repository root (about 1 s a study on 2 busy cores)::

    .venv/bin/python -m benchmarks.crowd_flags [--studies 100] [--accuracy 0.7 0.95] [--copier]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections import Counter

import numpy as np
from numpy.typing import NDArray

PREVALENCE = np.array([0.4, 0.3, 0.2, 0.1])


def crowd_study(
    rng: np.random.Generator,
    *,
    annotators: int = 30,
    per_item: int = 3,
    items_each: tuple[int, int] = (20, 40),
    accuracy: tuple[float, float] = (0.7, 0.95),
    prevalence: NDArray[np.float64] = PREVALENCE,
    copier: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A sparse crowd study: ratings ``(annotators, items)`` (nan = not asked) and each
    annotator's accuracy (row 0 answers at random; with ``copier`` row 2 copies row 1)."""
    labels = prevalence.size
    loads = rng.integers(items_each[0], items_each[1] + 1, annotators)
    n = round(loads.sum() / per_item)
    truth = rng.choice(labels, n, p=prevalence)
    # each item goes to per_item distinct annotators, drawn by the load each has left
    asked = np.zeros((annotators, n), dtype=bool)
    left = loads.astype(float)
    for i in range(n):
        weight = np.maximum(left, 1e-9)
        who = rng.choice(annotators, per_item, replace=False, p=weight / weight.sum())
        left[who] -= 1
        asked[who, i] = True
    skill = rng.uniform(*accuracy, annotators)
    skill[0] = 1.0 / labels
    correct = rng.random((annotators, n)) < skill[:, None]
    answers = np.where(correct, truth, (truth + rng.integers(1, labels, (annotators, n))) % labels)
    answers[0] = rng.integers(0, labels, n)
    ratings = np.where(asked, answers, np.nan).astype(float)
    if copier:
        ratings[2] = ratings[1]
        skill[2] = skill[1]
    return ratings, skill


def _flags(ratings: NDArray[np.float64], seed: int) -> dict[int, list[str]]:
    """The dashboard's flags of a simulated study: row -> indicator keys flagged."""
    from analytics.config import quality_config
    from analytics.indicators import NO_LAYOUT
    from analytics.intervals import interval_entries
    from analytics.metrics.categorical import pairwise_confusion
    from analytics.metrics.krippendorff import coincidence_matrix
    from analytics.services import _rule_hits
    from analytics.sufficient_stats import CategoricalStats
    from apps.categorical import indicators as cat

    m = ratings.shape[0]
    values = np.arange(PREVALENCE.size, dtype=float)
    stats = CategoricalStats(m, values.size)
    stats.confusion = pairwise_confusion(ratings, values=values)
    stats.coincidence = coincidence_matrix(ratings, values=values)
    keys = tuple(str(int(v)) for v in values)
    scale = cat.LabelScale.from_labels(
        keys,
        [{"key": k, "name": k, "valence": None, "arousal": None} for k in keys],
        ordered=False,
    )
    config = quality_config()
    ids = list(range(1, m + 1))
    derived = cat.derive_categorical(
        stats, annotators=ids, scale=scale, min_overlap=config.min_overlap, layout=NO_LAYOUT
    )
    competence, _ = cat.derive_competence(ratings)
    derived.indicators[cat.DS_COMPETENCE.key] = competence
    found = cat.ratings_intervals(
        ratings,
        annotators=ids,
        scale=scale,
        min_overlap=config.min_overlap,
        seed=seed,
        names={a: f"annotator {a}" for a in ids},
        min_items=config.evidence_needed("items"),
    )
    derived.intervals = interval_entries(found, ids)
    derived.study["intervals"] = {
        "notes": {k: {str(a): t for a, t in v.items()} for k, v in found.notes.items()},
        "pairs": list(found.pairs),
    }
    for spec in cat.INDICATORS:  # figures computed with the intervals take their estimates
        if not spec.live and spec.interval in derived.intervals:
            derived.indicators[spec.key] = [
                e[0] if e else None for e in derived.intervals[spec.interval]
            ]
    hits = _rule_hits(derived, cat.INDICATORS, (cat.ALPHA,), config=config)
    out: dict[int, list[str]] = {}
    for (annotator, key), _ in hits.items():
        if annotator is not None:
            out.setdefault(annotator - 1, []).append(key)
    return out


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--accuracy", type=float, nargs=2, default=(0.7, 0.95))
    parser.add_argument("--copier", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    import django

    django.setup()
    rng = np.random.default_rng(args.seed)
    random_hit = random_trust = copier_hit = 0
    good = good_flagged = 0
    by_rule: Counter[str] = Counter()
    started = time.perf_counter()
    for s in range(args.studies):
        ratings, _ = crowd_study(
            rng, annotators=args.annotators, accuracy=tuple(args.accuracy), copier=args.copier
        )
        flags = _flags(ratings, seed=s)
        random_hit += 0 in flags
        random_trust += "mace_trust" in flags.get(0, [])
        honest = range(3 if args.copier else 1, args.annotators)
        if args.copier:
            copier_hit += all("copying" in flags.get(k, []) for k in (1, 2))
        good += len(honest)
        good_flagged += sum(k in flags for k in honest)
        for k in honest:
            by_rule.update(flags.get(k, []))
    seconds = time.perf_counter() - started
    n = args.studies
    print(
        f"Sparse crowd: {args.annotators} annotators, 3 answers per item, 20-40 items each, "
        f"4 labels (prevalence {PREVALENCE.tolist()}), accuracy uniform "
        f"{args.accuracy[0]:.2f}-{args.accuracy[1]:.2f}, 1 random annotator"
        + ("; annotator 2 copies annotator 1" if args.copier else "")
    )
    print(f"{n} simulated studies, {seconds:.0f} s; load: {_load()}")
    print("| figure | rate | goal |")
    print("|---|---|---|")
    hit = f"{random_hit / n:.1%} ({random_hit}/{n})"
    print(f"| random annotator flagged (any rule) | {hit} | >= 90 % |")
    print(f"| random annotator flagged by MACE trust | {random_trust / n:.1%} | |")
    if args.copier:
        print(f"| copier pair both flagged 'copying' | {copier_hit / n:.1%} ({copier_hit}/{n}) | |")
    print(
        f"| good annotators flagged (any rule) | {good_flagged / good:.2%} "
        f"({good_flagged}/{good}) | <= 2 % |"
    )
    for rule, count in sorted(by_rule.items()):
        print(f"| good annotators flagged on {rule} | {count / good:.2%} | |")


if __name__ == "__main__":
    main()
