"""Speed and memory of the categorical metrics of analytics.metrics.

1. ``pairwise_kappa`` on 100 annotators x 100,000 items (5 labels, 6 ratings per item) against
   a loop of ``sklearn.metrics.cohen_kappa_score`` over the annotator pairs, each on its
   overlap: speed ratio (goal >= 100x) and largest absolute difference (goal <= 1e-9).
2. Every categorical metric of a 500,000-rating study from scratch (pairwise kappa, Fleiss'
   kappa, Krippendorff's alpha, AAD-RMSE per item, Dawid-Skene): wall time (goal < 2 s on a
   2-core machine) and peak memory (tracemalloc, in a second untimed run).
3. ``--crowd-kit``: Dawid-Skene against crowd-kit's ``DawidSkene`` on the same study, when
   crowd-kit is installed (it is not a dependency; see ``analytics/metrics/dawid_skene.py``).

At the end, the trace benchmarks of ``benchmarks/metrics_traces.py`` run too, if present.

Run from the repository root::

    .venv/bin/python -m benchmarks.metrics [--quick] [--crowd-kit]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import time
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from sklearn.metrics import cohen_kappa_score

from analytics.metrics import (
    aad_rmse_per_item,
    dawid_skene,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_kappa,
)


def simulated_study(
    n_annotators: int, n_items: int, *, per_item: int, n_labels: int, seed: int = 0
) -> NDArray[np.float64]:
    """Ratings ``(n_annotators, n_items)``: each item rated by ``per_item`` random annotators,
    who give the item's hidden label with their own accuracy (else a uniform random label)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_labels, n_items)
    accuracy = rng.uniform(0.4, 0.95, n_annotators)
    raters = np.argsort(rng.random((n_items, n_annotators)), axis=1)[:, :per_item]
    ratings = np.full((n_annotators, n_items), np.nan)
    items = np.arange(n_items)
    for column in raters.T:
        correct = rng.random(n_items) < accuracy[column]
        ratings[column, items] = np.where(correct, truth, rng.integers(0, n_labels, n_items))
    return ratings


def timed(func: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def sklearn_pairs(
    ratings: NDArray[np.float64], pairs: list[tuple[int, int]], *, min_overlap: int
) -> NDArray[np.float64]:
    """Reference: one ``cohen_kappa_score`` call per pair, on the items both rated."""
    rated = ~np.isnan(ratings)
    out = np.full(len(pairs), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p, (k, l) in enumerate(pairs):
            both = rated[k] & rated[l]
            if both.sum() >= min_overlap:
                out[p] = cohen_kappa_score(ratings[k, both], ratings[l, both])
    return out


def bench_pairwise(quick: bool, *, sample_pairs: int | None) -> None:
    n_annotators, n_items = (40, 20_000) if quick else (100, 100_000)
    ratings = simulated_study(n_annotators, n_items, per_item=6, n_labels=5)
    pairs = list(itertools.combinations(range(n_annotators), 2))
    runs = [timed(lambda: pairwise_kappa(ratings, min_overlap=2)) for _ in range(5)]
    ours, t_ours = min(runs, key=lambda run: run[1])
    sample = pairs
    if sample_pairs and sample_pairs < len(pairs):
        chosen = np.random.default_rng(1).choice(len(pairs), sample_pairs, replace=False)
        sample = [pairs[i] for i in chosen]
    reference, t_sample = timed(lambda: sklearn_pairs(ratings, sample, min_overlap=2))
    t_loop = t_sample * len(pairs) / len(sample)
    rows, cols = np.array(sample).T
    diff = np.nanmax(np.abs(ours[rows, cols] - reference))
    same_nan = np.array_equal(np.isnan(ours[rows, cols]), np.isnan(reference))
    how = "all pairs" if sample is pairs else f"{len(sample):,} random pairs, extrapolated"
    print(f"1. pairwise kappa, {n_annotators} annotators x {n_items:,} items, 6 ratings/item")
    print(f"   pairwise_kappa         {t_ours * 1e3:9.1f} ms  ({len(pairs):,} pairs, best of 5)")
    print(f"   cohen_kappa_score loop {t_loop * 1e3:9.1f} ms  ({how})")
    print(f"   speed ratio {t_loop / t_ours:,.0f}x (goal >= 100x)")
    print(f"   max |difference| {diff:.1e} (goal <= 1e-9); same nan entries: {same_nan}")


def all_categorical(ratings: NDArray[np.float64]) -> dict[str, float]:
    """Every categorical metric from scratch; returns the seconds each took."""
    seconds = {}
    for name, func in (
        ("pairwise kappa", lambda: pairwise_kappa(ratings)),
        ("Fleiss' kappa", lambda: fleiss_kappa(ratings)),
        ("Krippendorff's alpha", lambda: krippendorff_alpha(ratings)),
        ("AAD-RMSE per item", lambda: aad_rmse_per_item(ratings)),
        ("Dawid-Skene", lambda: dawid_skene(ratings)),
    ):
        seconds[name] = timed(func)[1]
    return seconds


def bench_study(quick: bool, *, crowd_kit: bool) -> None:
    n_annotators, n_items = (50, 20_000) if quick else (100, 100_000)
    ratings = simulated_study(n_annotators, n_items, per_item=5, n_labels=5, seed=2)
    n_ratings = int(np.sum(~np.isnan(ratings)))
    runs = [all_categorical(ratings) for _ in range(3)]
    best = min(runs, key=lambda run: sum(run.values()))
    tracemalloc.start()
    all_categorical(ratings)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"\n2. all categorical metrics, {n_annotators} annotators x {n_items:,} items,"
        f" {n_ratings:,} ratings (input matrix {ratings.nbytes / 2**20:.0f} MiB)"
    )
    for name, sec in best.items():
        print(f"   {name:<22}{sec * 1e3:9.1f} ms")
    print(
        f"   total {sum(best.values()):.2f} s (best of 3; goal < 2 s);"
        f" peak memory above the input {peak / 2**20:.0f} MiB (tracemalloc)"
    )
    if crowd_kit:
        bench_crowd_kit(ratings)


def bench_crowd_kit(ratings: NDArray[np.float64]) -> None:
    if importlib.util.find_spec("crowdkit") is None:
        print("\n3. crowd-kit is not installed: `pip install crowd-kit` to compare")
        return
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    annotator, item = np.nonzero(~np.isnan(ratings))
    frame = pd.DataFrame(
        {"task": item, "worker": annotator, "label": ratings[annotator, item].astype(int)}
    )
    n_iter = 50
    fitted, t_theirs = timed(lambda: DawidSkene(n_iter=n_iter, tol=-np.inf).fit(frame))
    ours, t_ours = timed(
        lambda: dawid_skene(ratings, max_iter=n_iter, tol=-np.inf, smoothing=1e-10)
    )
    probas = fitted.probas_.sort_index()
    diff = np.abs(probas[sorted(probas.columns)].to_numpy() - ours.posteriors[probas.index]).max()
    print(f"\n3. Dawid-Skene, {n_iter} EM iterations each, {len(frame):,} ratings")
    print(
        f"   crowd-kit {t_theirs:.2f} s, analytics.metrics {t_ours:.2f} s;"
        f" max |posterior diff| {diff:.1e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems (smoke run)")
    parser.add_argument("--crowd-kit", action="store_true", help="compare with crowd-kit")
    parser.add_argument(
        "--sample-pairs",
        type=int,
        metavar="N",
        help="time the scikit-learn loop on N random pairs and extrapolate (default: all pairs)",
    )
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    bench_pairwise(args.quick, sample_pairs=args.sample_pairs)
    bench_study(args.quick, crowd_kit=args.crowd_kit)
    if importlib.util.find_spec("benchmarks.metrics_traces") is not None:
        from benchmarks import metrics_traces

        print()
        metrics_traces.run(quick=args.quick)


if __name__ == "__main__":
    main()
