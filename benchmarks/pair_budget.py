"""Pooled ranking quality against the judgements spent: adaptive batches vs random pairs.

A simulated crowd ranks ``--items`` items with a hidden strict order. Annotators arrive one at
a time; each ranks a batch of ``--batch`` items drawn by
:func:`apps.preferences.scheduling.batch_draw` (least covered items, then the least certain:
largest standard error of the pooled fit after the previous annotator once its comparison graph
is strongly connected, fewest judgements before, as the studio's
:func:`~apps.preferences.selectors.batch_uncertainty` reads its stored fit; beside it the same
crowd with batches always favouring the least compared items, the rule this replaced) with the
shipped scheduler (adaptive, 10 calibration triplets, audit rate 0.1), answering the truth
except for their own share of flipped answers (0 to 15 %); one annotator is adversarial and
answers every pair reversed (consistently: transitivity cannot catch them). After each
annotator the question's pooled ranking is refitted as the results page does (Bradley-Terry
over every judgement, each annotator weighted by :func:`reliability_weight` of their
measured error rate, ``alpha=0.01``) and its Kendall tau against the truth printed beside
random pairs with the same budget: as many judgements, each between two items drawn uniformly
from the whole pool and answered by an annotator of the same crowd.

    .venv/bin/python -m benchmarks.pair_budget [--items 1000] [--batch 50] [--annotators 80]
        [--seeds 1] [--svg docs/pairwise_budget.svg]

Both batch designs see the same crowd (error rates) and start from the same random stream;
``--seeds`` averages over several crowds.
"""

from __future__ import annotations

import argparse
import os
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see benchmarks/bt_scale.py

import numpy as np
from scipy.stats import kendalltau

from analytics.metrics.preferences import bradley_terry, reliability_weight
from apps.preferences.scheduling import PairScheduler, batch_draw

Judged = list[tuple[int, int, int]]


Favour = Literal["se", "count"]


class Point(NamedTuple):
    judgements: int
    tau_batches: float
    tau_random: float
    judgements_count: int  # batches favouring the least compared items instead
    tau_count: float


def crowd_errors(n_annotators: int, rng: np.random.Generator) -> np.ndarray:
    """Each annotator's share of flipped answers; annotator 1 is adversarial (all flipped)."""
    errors = rng.uniform(0.0, 0.15, size=n_annotators)
    errors[min(1, n_annotators - 1)] = 1.0
    return errors


def answer(truth: np.ndarray, a: int, b: int, error: float, rng: np.random.Generator) -> int:
    right = 1 if truth[a] > truth[b] else -1
    return -right if rng.random() < error else right


def rank_batch(
    items: list[int], truth: np.ndarray, error: float, rng: np.random.Generator, seed: int
) -> tuple[Judged, float]:
    """One annotator ranks ``items`` with the shipped scheduler; judgements and error rate."""
    scheduler = PairScheduler(
        items, calibration_triplets=10, audit_rate=0.1, seed=seed, audit_rule=2, adaptive=True
    )
    judged: Judged = []
    while (pair := scheduler.next_pair()) is not None:
        a, b = int(pair[0]), int(pair[1])
        outcome = answer(truth, a, b, error, rng)
        scheduler.record(a, b, outcome)
        judged.append((a, b, outcome))
    return judged, scheduler.error_rate()


def pooled_tau(judged: dict[int, Judged], weights: dict[int, float], truth: np.ndarray) -> float:
    """Kendall tau against the truth of the pooled weighted Bradley-Terry ranking (items never
    compared rank at the mean, 0)."""
    fit = bradley_terry(judged, items=range(truth.size), alpha=0.01, weights=weights)
    return float(kendalltau(np.nan_to_num(fit.log_strengths), truth).statistic)


def least_compared(comparisons: Counter[int]) -> dict[int, float]:
    """``1 / sqrt(d)`` of each item's judgements d: the standard error's leading term."""
    return {item: 1 / np.sqrt(d) for item, d in comparisons.items() if d}


def stored_uncertainty(
    judged: dict[int, Judged], weights: dict[int, float], n: int, comparisons: Counter[int]
) -> dict[int, float]:
    """What the studio's draw reads (:func:`apps.preferences.selectors.batch_uncertainty`):
    the standard errors of the results page's fit (no ridge) when the comparison graph is
    strongly connected, else :func:`least_compared`."""
    try:
        fit = bradley_terry(judged, items=range(n), weights=weights)  # type: ignore[arg-type]
    except ValueError:  # not strongly connected: the studio's fit is regularised
        return least_compared(comparisons)
    return dict(enumerate(np.nan_to_num(fit.se, nan=np.inf).tolist()))


def adaptive_batches(
    truth: np.ndarray,
    *,
    batch: int,
    errors: np.ndarray,
    rng: np.random.Generator,
    favour: Favour = "se",
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """Annotators rank batches in turn: ``(judgements so far, pooled tau)`` after each, and
    each annotator's weight from their measured error rate.

    Among equally covered items the draw takes the least certain as the studio does
    (``favour="se"``: :func:`stored_uncertainty`) or the fewest judgements (``"count"``).
    """
    coverage: Counter[int] = Counter()
    comparisons: Counter[int] = Counter()
    judged: dict[int, Judged] = {}
    weights: dict[int, float] = {}
    uncertainty: dict[int, float] = {}
    curve = []
    for k, error in enumerate(errors):
        if k and favour == "se":
            uncertainty = stored_uncertainty(judged, weights, truth.size, comparisons)
        elif favour == "count":
            uncertainty = least_compared(comparisons)
        items = batch_draw(
            range(truth.size), size=batch, coverage=coverage, uncertainty=uncertainty, rng=rng
        )
        judged[k], error_rate = rank_batch(items, truth, float(error), rng, seed=k)
        weights[k] = reliability_weight(error_rate)
        coverage.update(items)
        comparisons.update(item for a, b, _ in judged[k] for item in (a, b))
        curve.append((sum(map(len, judged.values())), pooled_tau(judged, weights, truth)))
    return curve, weights


def random_pairs(
    truth: np.ndarray,
    *,
    budget: int,
    errors: np.ndarray,
    weights: dict[int, float],
    rng: np.random.Generator,
) -> float:
    """Pooled tau of ``budget`` uniformly random pairs answered by the same crowd, each
    annotator weighted as measured when they ranked their batch."""
    n = truth.size
    a = rng.integers(0, n, size=budget)
    b = (a + rng.integers(1, n, size=budget)) % n
    who = rng.integers(0, errors.size, size=budget)
    judged: dict[int, Judged] = {k: [] for k in range(errors.size)}
    for x, y, k in zip(a.tolist(), b.tolist(), who.tolist(), strict=True):
        judged[k].append((x, y, answer(truth, x, y, float(errors[k]), rng)))
    return pooled_tau(judged, weights, truth)


def budget_curve(n_items: int, *, batch: int, n_annotators: int, seed: int) -> list[Point]:
    """One simulated crowd: pooled tau after each annotator, batches favouring the largest
    standard error and (same crowd, same noise) the fewest judgements, and random pairs."""
    rng = np.random.default_rng(seed)
    truth = rng.permutation(n_items).astype(float)
    errors = crowd_errors(n_annotators, rng)
    stream = int(rng.integers(2**63))
    curve, weights = adaptive_batches(
        truth, batch=batch, errors=errors, rng=np.random.default_rng(stream)
    )
    counted, _ = adaptive_batches(
        truth, batch=batch, errors=errors, rng=np.random.default_rng(stream), favour="count"
    )
    return [
        Point(
            spent,
            tau,
            random_pairs(truth, budget=spent, errors=errors, weights=weights, rng=rng),
            spent_count,
            tau_count,
        )
        for (spent, tau), (spent_count, tau_count) in zip(curve, counted, strict=True)
    ]


def mean_curve(curves: Iterable[list[Point]]) -> list[Point]:
    """The pointwise mean of several crowds' curves (judgements rounded)."""
    stacked = np.array([[tuple(p) for p in curve] for curve in curves], dtype=np.float64)
    mean = stacked.mean(axis=0)
    return [Point(round(r[0]), r[1], r[2], round(r[3]), r[4]) for r in mean.tolist()]


def curve_svg(points: list[Point], *, title: str) -> str:
    """The two curves as an SVG document (built as XML elements, no plotting library)."""
    width, height, pad = 560, 340, 52
    x_max = max(p.judgements for p in points)

    def x(v: float) -> str:
        return f"{pad + (width - 2 * pad) * v / x_max:.1f}"

    def y(v: float) -> str:
        return f"{height - pad - (height - 2 * pad) * max(v, 0.0):.1f}"

    svg = ET.Element(
        "svg",
        xmlns="http://www.w3.org/2000/svg",
        width=str(width),
        height=str(height),
        attrib={"font-family": "sans-serif", "font-size": "11"},
    )
    ET.SubElement(svg, "rect", width=str(width), height=str(height), fill="white")
    axes = f"{pad},{pad} {pad},{height - pad} {width - pad},{height - pad}"
    ET.SubElement(svg, "polyline", points=axes, fill="none", stroke="#444")
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        label = ET.SubElement(svg, "text", x=str(pad - 6), y=y(tick), attrib={"text-anchor": "end"})
        label.text = f"{tick:g}"
    for tick in np.linspace(0, x_max, 5):
        label = ET.SubElement(
            svg, "text", x=x(tick), y=str(height - pad + 16), attrib={"text-anchor": "middle"}
        )
        label.text = f"{tick:,.0f}"
    for field, colour, name, spent in (
        ("tau_batches", "#0072B2", "batches, largest SE first", "judgements"),
        ("tau_count", "#009E73", "batches, fewest judgements first", "judgements_count"),
        ("tau_random", "#D55E00", "random pairs", "judgements"),
    ):
        line = " ".join(f"{x(getattr(p, spent))},{y(getattr(p, field))}" for p in points)
        ET.SubElement(
            svg, "polyline", points=line, fill="none", stroke=colour, attrib={"stroke-width": "2"}
        )
        legend = ET.SubElement(
            svg,
            "text",
            x=str(width - pad - 190),
            y=y({"tau_batches": 0.3, "tau_count": 0.2, "tau_random": 0.1}[field]),
            fill=colour,
        )
        legend.text = name
    caption = ET.SubElement(svg, "text", x=str(pad), y=str(pad - 20))
    caption.text = title
    xlabel = ET.SubElement(
        svg, "text", x=str(width / 2), y=str(height - 12), attrib={"text-anchor": "middle"}
    )
    xlabel.text = "judgements spent"
    return ET.tostring(svg, encoding="unicode") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--annotators", type=int, default=80)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=1, help="crowds to average over")
    parser.add_argument("--svg", type=Path, default=None, help="write the curves here")
    args = parser.parse_args()
    curves = [
        budget_curve(args.items, batch=args.batch, n_annotators=args.annotators, seed=seed)
        for seed in range(args.seed, args.seed + args.seeds)
    ]
    points = mean_curve(curves)
    print(
        f"{args.items:,} items, batches of {args.batch}, {args.annotators} annotators, "
        f"mean of {args.seeds} crowd(s)"
    )
    print(
        f"{'annotators':>10} {'judgements':>11} {'tau SE-first':>13} {'judgements':>11} "
        f"{'tau count-first':>16} {'tau random':>11} {'SE - count (min, max over crowds)':>34}"
    )
    for k, p in enumerate(points, start=1):
        if k % max(1, len(points) // 16) == 0 or k == len(points):
            gaps = [c[k - 1].tau_batches - c[k - 1].tau_count for c in curves]
            print(
                f"{k:>10} {p.judgements:>11,} {p.tau_batches:>13.3f} {p.judgements_count:>11,} "
                f"{p.tau_count:>16.3f} {p.tau_random:>11.3f} "
                f"{p.tau_batches - p.tau_count:>+12.3f} ({min(gaps):+.3f}, {max(gaps):+.3f})"
            )
    if args.svg:
        title = (
            f"Pooled tau, {args.items:,} items, batches of {args.batch}, "
            f"{args.annotators} annotators (1 adversarial)"
            + (f", {args.seeds} crowds" if args.seeds > 1 else "")
        )
        args.svg.write_text(curve_svg(points, title=title))
        print(f"curves written to {args.svg}")


if __name__ == "__main__":
    main()
