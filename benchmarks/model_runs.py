"""Cost of a model run's evaluation with its DIC/BAE intervals (issue #11).

A registered run is evaluated by :func:`apps.models_registry.evaluation.evaluate_run`
(off the request since registering a run or pressing "Recompute" only marks it pending:
on the quality pipeline's background thread or worker, and after answers change, at most once a
minute per run; see apps/models_registry/services.py). Its DIC and BAE intervals come from
:func:`analytics.metrics.dic_bae_bootstrap` with
:data:`~apps.models_registry.evaluation.BOOTSTRAP_REPLICATES` replicates. This prints, per
study shape, the seconds of the bootstrap alone and of the whole evaluation, and the figures:

* ``emotions``: the shape of the emotions demo (6 annotators x 40 sentences, 7 labels,
  everyone labels everything);
* ``sim 50x2000 k=5 / k=10``: 50 annotators x 2,000 items, 5 or 10 labels per item
  (``benchmarks.metrics.simulated_study``), 5 labels;
* ``sim 50x2000 k=50``: the same, every annotator labels every item (100,000 cells, the
  worst case: 2.45 million annotator pairs x items);
* ``rzhetsky``: the real Rzhetsky et al. (2009) data, 8 annotators x 15,521 sentences;
* ``traces 20x100``: a continuous question, 20 annotators x 100 items, every annotator traces
  every item (300 samples at 1 Hz, random walks); the model's traces add noise
  (:func:`~apps.models_registry.evaluation.evaluate_trace_run`,
  :func:`~analytics.metrics.dic_bae_bootstrap_sda`).

The model's predictions are the annotators' own labels with 40 % replaced at random; feature
vectors are random (BAE is then near its Random baseline). Timings are wall-clock on the
current machine (shared cores: expect noise). Run with
``.venv/bin/python -m benchmarks.model_runs [--replicates 500] [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numpy.typing import NDArray

from analytics.metrics import cosine_similarity_matrix, dic_bae_bootstrap, dic_bae_bootstrap_sda
from apps.models_registry.evaluation import (
    BOOTSTRAP_REPLICATES,
    SEED,
    TRACE_MIN_ITEMS,
    evaluate_run,
    evaluate_trace_run,
    item_pair_tables,
)
from benchmarks.metrics import simulated_study
from benchmarks.report_rzhetsky import load_ratings

MIN_OVERLAP = 10
"""The registry's default ``QUALITY_MIN_OVERLAP``."""


def _model(human: NDArray[np.float64], n_labels: int, seed: int = 1) -> NDArray[np.float64]:
    """The annotators' labels with 40 % of them replaced by a uniform random label."""
    rng = np.random.default_rng(seed)
    swap = rng.random(human.shape) < 0.4
    drawn = rng.integers(0, n_labels, human.shape) + np.nanmin(human)
    return np.where(np.isnan(human), np.nan, np.where(swap, drawn, human))


def _shapes(quick: bool) -> list[tuple[str, NDArray[np.float64], int]]:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 7, 40)
    emotions = np.where(rng.random((6, 40)) < 0.75, truth, rng.integers(0, 7, (6, 40)))
    shapes = [("emotions", emotions.astype(float), 7)]
    for per_item in (5, 10) if quick else (5, 10, 50):
        ratings = simulated_study(50, 2000, per_item=per_item, n_labels=5, seed=0)
        shapes.append((f"sim 50x2000 k={per_item}", ratings, 5))
    if not quick:
        shapes.append(("rzhetsky", load_ratings(), 5))
    return shapes


def main() -> None:
    """Parse the arguments and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=BOOTSTRAP_REPLICATES)
    parser.add_argument("--quick", action="store_true", help="skip the two largest shapes")
    args = parser.parse_args()
    print(f"replicates: {args.replicates}, min_overlap: {MIN_OVERLAP}")
    header = f"{'shape':<18} {'items':>6} {'cells':>7} {'boot s':>7} {'eval s':>7}  DIC [95 %]"
    print(header)
    for name, human, n_labels in _shapes(args.quick):
        model = _model(human, n_labels)
        m = human.shape[0]
        vectors = np.random.default_rng(2).random((m, 32))
        start = time.perf_counter()
        result = dic_bae_bootstrap(
            human,
            model,
            s_model={"feature": cosine_similarity_matrix(vectors)},
            min_overlap=MIN_OVERLAP,
            n_boot=args.replicates,
            seed=SEED,
        )
        boot = time.perf_counter() - start
        start = time.perf_counter()
        evaluate_run(
            human=human,
            predicted=model,
            n_labels=n_labels,
            ordered=True,
            min_overlap=MIN_OVERLAP,
            vectors={"feature": vectors},
        )
        whole = time.perf_counter() - start
        d = result.dic
        print(
            f"{name:<18} {result.n_items:>6} {result.n_cells:>7} {boot:>7.2f} {whole:>7.2f}  "
            f"{d.estimate:.3f} [{d.low:.3f}, {d.high:.3f}]"
        )
    _traces(args.replicates, n_items=30 if args.quick else 100)


def _traces(replicates: int, *, n_items: int, n_annotators: int = 20) -> None:
    """The trace shape: pair tables once, then the bootstrap and the whole evaluation."""
    rng = np.random.default_rng(3)
    human = {
        (k, i): np.cumsum(rng.normal(size=300)) for k in range(n_annotators) for i in range(n_items)
    }
    model = {cell: trace + rng.normal(0, 1.0, trace.size) for cell, trace in human.items()}
    start = time.perf_counter()
    th, tm = item_pair_tables(human, tol=0.0), item_pair_tables(model, tol=0.0)
    tables = time.perf_counter() - start
    start = time.perf_counter()
    result = dic_bae_bootstrap_sda(
        th.item, th.first, th.second, th.tables, tm.tables,
        traced=th.traced, n_annotators=n_annotators, min_items=TRACE_MIN_ITEMS,
        n_boot=replicates, seed=SEED,
    )  # fmt: skip
    boot = time.perf_counter() - start
    start = time.perf_counter()
    evaluate_trace_run(human=human, predicted=model, n_annotators=n_annotators, tol=0.0, vectors={})
    whole = time.perf_counter() - start
    d = result.dic
    name = f"traces {n_annotators}x{n_items}"
    print(
        f"{name:<18} {result.n_items:>6} {result.n_cells:>7} {boot:>7.2f} {whole:>7.2f}  "
        f"{d.estimate:.3f} [{d.low:.3f}, {d.high:.3f}]  (pair tables {tables:.2f} s)"
    )


if __name__ == "__main__":
    main()
