"""Speed of the trace metrics at dashboard scale.

* kappa_SDA matrix of 50 annotators x 20 traces (items) x 3,000 samples: the vectorised
  ``kappa_sda_matrix`` (one matrix product of sign one-hot matrices per item) against a
  Python loop of the pairwise ``kappa_sda`` over every annotator pair, in the same run,
  plus the pooled (all items) kappa_SDA from summed coincidence counts.
* DTW alignment (``dtw_align``) cost per trace pair: 3,000 samples, Sakoe-Chiba window of
  3 s at 1 Hz (3 samples) and at 10 Hz (30 samples).

Run from the repository root::

    .venv/bin/python -m benchmarks.metrics_traces [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import numpy as np

from analytics.metrics.alignment import dtw_align
from analytics.metrics.traces import (
    kappa_sda,
    kappa_sda_from_counts,
    kappa_sda_matrix,
    sign_coincidence_matrix,
)

TOL = 0.005


def slider_traces(n_items: int, n_annotators: int, n_samples: int, *, seed: int = 0) -> np.ndarray:
    """Slider-like traces ``(n_items, n_annotators, n_samples)``: a shared random walk per
    item plus annotator noise, clipped to [0, 1] and rounded to 0.01 (flat steps and ties)."""
    rng = np.random.default_rng(seed)
    target = np.cumsum(rng.normal(scale=0.02, size=(n_items, 1, n_samples)), axis=2)
    noise = rng.normal(scale=0.01, size=(n_items, n_annotators, n_samples))
    return np.round(np.clip(0.5 + target + noise, 0.0, 1.0), 2)


def best_time(func: Callable[[], object], *, repeat: int) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def pairwise_loop(traces: np.ndarray) -> np.ndarray:
    """kappa_SDA matrix of one item by calling the pairwise function for every pair."""
    m = traces.shape[0]
    matrix = np.ones((m, m))
    for k, l in itertools.combinations(range(m), 2):
        matrix[k, l] = matrix[l, k] = kappa_sda(traces[k], traces[l], tol=TOL)
    return matrix


def bench_kappa_sda(n_items: int, n_annotators: int, n_samples: int, *, repeat: int) -> None:
    data = slider_traces(n_items, n_annotators, n_samples)
    n_pairs = n_annotators * (n_annotators - 1) // 2
    print(
        f"kappa_SDA matrix: {n_annotators} annotators x {n_items} traces x {n_samples} samples"
        f" ({n_pairs} pairs per trace, tol={TOL})"
    )
    vectorised = [kappa_sda_matrix(item, tol=TOL) for item in data]
    looped = [pairwise_loop(item) for item in data]
    agree = all(np.allclose(a, b, equal_nan=True) for a, b in zip(vectorised, looped, strict=True))
    t_matrix = best_time(lambda: [kappa_sda_matrix(item, tol=TOL) for item in data], repeat=repeat)
    t_loop = best_time(lambda: [pairwise_loop(item) for item in data], repeat=1)
    t_pooled = best_time(
        lambda: kappa_sda_from_counts(sum(sign_coincidence_matrix(item, tol=TOL) for item in data)),
        repeat=repeat,
    )
    print(f"  kappa_sda_matrix, all traces     {t_matrix * 1e3:9.1f} ms")
    print(f"  loop of kappa_sda over pairs     {t_loop * 1e3:9.1f} ms")
    print(
        f"  speed-up                         {t_loop / t_matrix:9.1f} x   (results equal: {agree})"
    )
    print(f"  pooled over traces (sum counts)  {t_pooled * 1e3:9.1f} ms")


def bench_dtw(n_samples: int, *, repeat: int) -> None:
    rng = np.random.default_rng(1)
    reference = np.cumsum(rng.normal(scale=0.02, size=n_samples))
    trace = np.roll(reference, 2) + rng.normal(scale=0.01, size=n_samples)
    print(f"DTW alignment of one trace pair, {n_samples} samples")
    for window, label in ((3, "3 s at 1 Hz"), (30, "3 s at 10 Hz")):
        seconds = best_time(lambda w=window: dtw_align(trace, reference, window=w), repeat=repeat)
        print(f"  window {window:3d} ({label:12s})   {seconds * 1e3:9.2f} ms per pair")


def run(quick: bool = False) -> None:
    """Print the benchmark figures; ``quick`` shrinks the problem for a smoke run."""
    if quick:
        bench_kappa_sda(n_items=2, n_annotators=10, n_samples=1_000, repeat=1)
        bench_dtw(1_000, repeat=1)
    else:
        bench_kappa_sda(n_items=20, n_annotators=50, n_samples=3_000, repeat=3)
        bench_dtw(3_000, repeat=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    run(quick=parser.parse_args().quick)


if __name__ == "__main__":
    main()
