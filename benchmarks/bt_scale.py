"""Pooled Bradley-Terry at scale: the sparse fit from 2,000 to 100,000 items.

Simulated crowd: items with true log-strengths ~ N(0, 1), ``--per-item`` judgements per item
on average (500,000 at 100,000 items and 5 per item), each between two random items of a
pool, answered by one of ``--annotators`` annotators who flips the Bradley-Terry answer with
their own error rate (0 to 20 %), weighted by :func:`reliability_weight` of it, as the results
page does. Per size: the wall time of :func:`bradley_terry` (with ``alpha=0.01``, as the page
uses when the comparison graph is not strongly connected), peak Python memory (tracemalloc),
Kendall tau of the fit against the truth, and whether the standard errors were exact.

Reference in the same run: at up to 2,000 items the items x items Newton fit the module used before
(``tests/analytics/metrics/test_preferences.py::dense_bradley_terry``) on the
same data; the largest difference of the log-strengths and the time ratio are printed.

    .venv/bin/python -m benchmarks.bt_scale [--sizes 1000 20000 100000] [--per-item 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

# One BLAS thread: on a shared, loaded machine more threads spin and slow small products 4x.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.metrics.preferences import bradley_terry, reliability_weight


def crowd(
    n: int, per_item: float, annotators: int, rng: np.random.Generator
) -> tuple[np.ndarray, dict[int, list[tuple[int, int, int]]], dict[int, float]]:
    """True strengths, judgements per annotator and their reliability weights."""
    theta = rng.normal(size=n)
    m = int(n * per_item)
    a = rng.integers(0, n, size=m)
    b = (a + rng.integers(1, n, size=m)) % n
    who = rng.integers(0, annotators, size=m)
    error = np.linspace(0.0, 0.2, annotators)
    right = rng.random(m) < 1 / (1 + np.exp(theta[b] - theta[a]))
    right ^= rng.random(m) < error[who]
    outcome = np.where(right, 1, -1)
    order = np.argsort(who, kind="stable")
    bounds = np.searchsorted(who[order], np.arange(annotators + 1))
    rows = list(zip(a[order].tolist(), b[order].tolist(), outcome[order].tolist(), strict=True))
    judgements = {k: rows[bounds[k] : bounds[k + 1]] for k in range(annotators)}
    return theta, judgements, {k: reliability_weight(float(error[k])) for k in range(annotators)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000, 100000])
    parser.add_argument("--per-item", type=float, default=5.0)
    parser.add_argument("--annotators", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(12)
    print(f"{'items':>8} {'judgements':>11} {'fit s':>7} {'peak MB':>8} {'tau':>6} {'se':>7}")
    for n in args.sizes:
        theta, judgements, weights = crowd(n, args.per_item, args.annotators, rng)
        tracemalloc.start()
        start = time.perf_counter()
        fit = bradley_terry(judgements, items=range(n), alpha=0.01, weights=weights)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        compared = ~np.isnan(fit.log_strengths)
        tau = kendalltau(fit.log_strengths[compared], theta[compared]).statistic
        total = sum(len(j) for j in judgements.values())
        kind = "exact" if fit.se_exact else "approx"
        print(f"{n:>8,} {total:>11,} {seconds:>7.2f} {peak:>8.0f} {tau:>6.3f} {kind:>7}")
        if n <= 2000:  # the dense fit's n x n matrices stay small
            reference(judgements, weights, n, fit, seconds)


def reference(judgements, weights, n, fit, seconds) -> None:  # type: ignore[no-untyped-def]
    """The dense fit on the same data: agreement and the time ratio."""
    from tests.analytics.metrics.test_preferences import dense_bradley_terry

    pooled = [j for k in judgements for j in judgements[k]]
    weight = [weights[k] for k in judgements for _ in judgements[k]]
    start = time.perf_counter()
    theta, se = dense_bradley_terry(pooled, weight, n, 0.01)
    dense_seconds = time.perf_counter() - start
    print(
        f"    dense reference at {n:,} items: {dense_seconds:.2f} s (sparse x"
        f"{dense_seconds / seconds:.1f} faster); max |diff| log-strengths "
        f"{np.max(np.abs(theta - fit.log_strengths)):.1e}, se {np.max(np.abs(se - fit.se)):.1e}"
    )


if __name__ == "__main__":
    main()
