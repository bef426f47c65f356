"""Dawid-Skene competence interval on Rzhetsky et al. (2009): cost and width (issue #11).

The categorical kind's interval job runs :func:`dawid_skene_competence_bootstrap` with
``warm=True`` (every refit started from the full fit's posteriors of its items). Plain EM
needs about 600 iterations on these 8 annotators x 15,521 items, so refits capped at 100
iterations stopped short and the interval came out about 40 % too narrow. This times the
job and prints each annotator's interval width for:

* ``capped``: refits capped at 100 EM iterations (the former setting), SQUAREM EM;
* ``converged``: refits run to convergence (the setting now), SQUAREM EM;
* ``plain capped`` / ``plain converged`` (with ``--plain``): the same with plain EM, the
  former job and its converged reference (minutes).

Run with ``.venv/bin/python -m benchmarks.ds_interval [--replicates 50] [--plain]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from analytics.metrics import dawid_skene, dawid_skene_competence_bootstrap
from benchmarks.report_rzhetsky import load_ratings

CAP = 100
"""The former iteration cap of a refit."""


def main() -> None:
    """Parse the arguments and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=50, help="bootstrap replicates")
    parser.add_argument("--plain", action="store_true", help="also run plain EM (minutes)")
    args = parser.parse_args()
    ratings = load_ratings()
    for accelerate in (True, False):
        start = time.perf_counter()
        fit = dawid_skene(ratings, accelerate=accelerate)
        print(
            f"full fit, {'SQUAREM' if accelerate else 'plain'} EM: {fit.n_iter} EM steps, "
            f"{time.perf_counter() - start:.2f} s"
        )
    runs = [("capped", True, CAP), ("converged", True, None)]
    if args.plain:
        runs += [("plain capped", False, CAP), ("plain converged", False, None)]
    widths = {}
    for name, accelerate, cap in runs:
        start = time.perf_counter()
        res = dawid_skene_competence_bootstrap(
            ratings,
            n_boot=args.replicates,
            seed=0,
            warm=True,
            replicate_iter=cap,
            accelerate=accelerate,
        )
        seconds = time.perf_counter() - start
        widths[name] = res.high - res.low
        print(
            f"{name:>16}: {seconds:7.1f} s for {args.replicates} replicates; widths "
            + " ".join(f"{w:.3f}" for w in widths[name])
        )
    for name in widths:
        ratio = widths[name] / widths["converged"]
        print(f"{name:>16} / converged: mean width ratio {np.mean(ratio):.2f}")


if __name__ == "__main__":
    main()
