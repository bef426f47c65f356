"""Adaptive overlap against fixed k on a simulated study: aggregated accuracy vs annotations.

A study of ``--items`` items with true labels among ``--labels`` nominal classes; 10 % of the
items are hard (every annotator's accuracy on them falls to a third of its margin over chance);
``--annotators`` annotators with accuracies drawn uniformly from 0.55-0.95, errors spread evenly
over the other labels. Every annotator's would-be answer to every item and a random order of
annotators per item are drawn once, so fixed and adaptive designs see the same answers.

- **fixed k**: each item gets the first ``k`` annotators of its order.
- **adaptive** (the studio's rule, :func:`apps.annotations.services.assignment_extend_disputed`):
  each item starts with ``base k``; while its AAD-RMSE (one-hot labels 1 apart: 0 when all
  agree, 1 for a 1-1 split, 0.82 for 2-1) exceeds the threshold and it has fewer than ``k_max``
  answers, it gets the next annotator.

The aggregated label is the Dawid-Skene label
(:func:`apps.adjudication.aggregation.aggregate_items`, fitted on the final matrix) and, for
comparison, the majority (ties count as the expected accuracy of a random pick among the tied
labels). Figures are means over ``--seeds`` studies.
The goal of issue #14: fixed k = 5's aggregated accuracy with at most 70 % of its annotations.

Run with ``.venv/bin/python -m benchmarks.adaptive_overlap [--svg out.svg]``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from analytics.metrics.aad import aad_rmse_per_item
from apps.adjudication.aggregation import aggregate_items

HARD_SHARE = 0.10


@dataclass(frozen=True)
class World:
    truth: NDArray[np.int64]  # (N,)
    answers: NDArray[np.int64]  # (M, N): what each annotator would say
    order: NDArray[np.int64]  # (N, M): annotators in the order an item meets them
    n_labels: int


def simulate(*, n_items: int, n_annotators: int, n_labels: int, seed: int) -> World:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_labels, n_items)
    hard = rng.random(n_items) < HARD_SHARE
    accuracy = rng.uniform(0.55, 0.95, n_annotators)
    chance = 1.0 / n_labels
    p_right = np.where(
        hard[None, :], chance + (accuracy[:, None] - chance) / 3.0, accuracy[:, None]
    )
    right = rng.random((n_annotators, n_items)) < p_right
    wrong = (truth + rng.integers(1, n_labels, (n_annotators, n_items))) % n_labels
    answers = np.where(right, truth, wrong)
    order = np.argsort(rng.random((n_items, n_annotators)), axis=1)
    return World(truth, answers, order, n_labels)


def ratings_with(world: World, n: NDArray[np.int64]) -> NDArray[np.float64]:
    """The ratings matrix when item ``i`` has been answered by its first ``n[i]`` annotators."""
    m, n_items = world.answers.shape
    asked = np.zeros((n_items, m), dtype=bool)
    asked[np.arange(m)[None, :] < n[:, None]] = True
    taken = np.zeros((m, n_items), dtype=bool)
    rows = np.broadcast_to(np.arange(n_items)[:, None], (n_items, m))
    taken[world.order[asked], rows[asked]] = True
    return np.where(taken, world.answers, np.nan)


def adaptive_counts(world: World, *, base_k: int, k_max: int, threshold: float) -> NDArray:
    """Answers per item under the adaptive rule."""
    points = np.eye(world.n_labels) / np.sqrt(2.0)
    coordinates = {float(c): tuple(p) for c, p in enumerate(points)}
    n = np.full(world.truth.size, base_k)
    while True:
        disagreement = aad_rmse_per_item(ratings_with(world, n), coordinates=coordinates)
        grow = (np.nan_to_num(disagreement) > threshold) & (n < k_max)
        if not grow.any():
            return n
        n[grow] += 1


def accuracies(world: World, ratings: NDArray[np.float64]) -> tuple[float, float]:
    """Dawid-Skene and majority accuracy against the truth."""
    agg = aggregate_items(ratings, points=np.eye(world.n_labels) / np.sqrt(2.0))
    ds = float(np.mean(agg.ds_label == world.truth))
    top = agg.votes.max(axis=1, keepdims=True)
    winners = agg.votes == top
    majority = float(np.mean(winners[np.arange(world.truth.size), world.truth] / winners.sum(1)))
    return ds, majority


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--labels", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--svg", type=Path, default=None, help="write the curve here")
    args = parser.parse_args()
    designs: list[tuple[str, dict]] = [(f"fixed k={k}", {"k": k}) for k in range(1, 8)]
    designs += [
        (f"adaptive {b}..{k_max}, > {t:g}", {"base_k": b, "k_max": k_max, "threshold": t})
        for b, k_max, t in [
            (2, 3, 0.0),
            (2, 4, 0.0),
            (2, 5, 0.0),
            (2, 6, 0.0),
            (2, 5, 0.75),
            (2, 6, 0.75),
            (2, 7, 0.75),
            (3, 5, 0.75),
            (3, 7, 0.75),
        ]
    ]
    results = {name: np.zeros(3) for name, _ in designs}
    for seed in range(args.seeds):
        world = simulate(
            n_items=args.items, n_annotators=args.annotators, n_labels=args.labels, seed=seed
        )
        for name, design in designs:
            if "k" in design:
                n = np.full(world.truth.size, design["k"])
            else:
                n = adaptive_counts(world, **design)
            ds, majority = accuracies(world, ratings_with(world, n))
            results[name] += np.array([n.mean(), ds, majority]) / args.seeds
    budget = results["fixed k=5"][0]
    goal = results["fixed k=5"][1]
    print(
        f"{args.items} items ({HARD_SHARE:.0%} hard), {args.annotators} annotators "
        f"(accuracy 0.55-0.95), {args.labels} labels, mean of {args.seeds} studies\n"
    )
    print(f"{'design':<24} {'answers/item':>12} {'% of k=5':>9} {'DS acc':>7} {'majority':>9}")
    for name, (per_item, ds, majority) in results.items():
        mark = (
            " <- goal met"
            if name.startswith("adaptive") and (ds >= goal and per_item <= 0.7 * budget)
            else ""
        )
        print(
            f"{name:<24} {per_item:>12.2f} {per_item / budget:>8.0%} {ds:>7.4f} "
            f"{majority:>9.4f}{mark}"
        )
    print(f"\ngoal: DS accuracy >= {goal:.4f} (fixed k=5) with <= {0.7 * budget:.2f} answers/item")
    if args.svg:
        args.svg.write_text(curve_svg(results))
        print(f"curve written to {args.svg}")


def curve_svg(results: dict[str, NDArray]) -> str:
    """Dawid-Skene accuracy vs answers per item: fixed k as a line, adaptive designs as dots."""
    width, height, pad = 480, 320, 48
    values = np.array(list(results.values()))
    x_max = float(values[:, 0].max()) + 0.5
    y_min, y_max = float(values[:, 1].min()) - 0.01, min(1.0, float(values[:, 1].max()) + 0.01)

    def x(v: float) -> float:
        return pad + (width - 2 * pad) * v / x_max

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v - y_min) / (y_max - y_min)

    fixed = [(x(v[0]), y(v[1])) for name, v in results.items() if name.startswith("fixed")]
    adaptive = [(x(v[0]), y(v[1])) for name, v in results.items() if name.startswith("adaptive")]
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in fixed)
    dots = "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" fill="#c2410c"/>' for a, b in adaptive)
    ticks = "".join(
        f'<text x="{x(k):.1f}" y="{height - pad + 16}" text-anchor="middle">{k}</text>'
        for k in range(int(x_max) + 1)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">'
        f'<rect width="{width}" height="{height}" fill="white"/>'
        f'<polyline points="{line}" fill="none" stroke="#1d4ed8" stroke-width="2"/>{dots}{ticks}'
        f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">answers per item</text>'
        f'<text x="12" y="{pad - 16}">Dawid-Skene accuracy {y_min:.3f}-{y_max:.3f}: '
        f"fixed k (line), adaptive (dots)</text></svg>\n"
    )


if __name__ == "__main__":
    main()
