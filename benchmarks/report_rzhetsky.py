"""Categorical agreement on the Rzhetsky et al. (2009) data, recomputed with analytics.metrics.

15,521 biomedical text fragments, each labelled by 3 of 8 annotators in a rotating panel
(``shared/datasets/rzhetsky2009``, see its README; codes 1-5, -1 = not annotated). This
prints the pairwise overlaps and Cohen's kappas (pairs below the overlap threshold are nan:
the panel never puts some annotators together), Fleiss' kappa, Krippendorff's alpha at three
levels, Dawid-Skene competences, label skew, AAD-RMSE and the outlier flags, each figure with
its 95 % interval (issue #11): Fleiss' kappa with the linearisation interval and the null
test of Fleiss, Nee & Landis, alpha with an item bootstrap, kappa with others with the
delta-method interval, mean AAD with an item bootstrap, Dawid-Skene competence with an item
bootstrap of EM refits (``--ds-replicates``, 50 by default: each refit takes seconds), and
the flags of ``flag_with_intervals``. The loader is shared with
``tests/analytics/metrics/test_real_data_rzhetsky.py``.

Run with ``.venv/bin/python -m benchmarks.report_rzhetsky [--ds-replicates N]``. The data
folder can be moved with the environment variable ``RZHETSKY_DIR``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from analytics.metrics import (
    aad_rmse_per_item,
    alpha_bootstrap,
    dawid_skene_competence_bootstrap,
    flag_with_intervals,
    label_skew,
    landis_koch_band,
    pairwise_kappa,
)
from analytics.metrics.intervals import (
    fleiss_kappa_interval,
    fleiss_kappa_null_se,
    indicator_intervals_categorical,
)

DATA_DIR = Path(
    os.environ.get(
        "RZHETSKY_DIR",
        Path(__file__).resolve().parents[2] / "shared" / "datasets" / "rzhetsky2009",
    )
)
N_ANNOTATORS = 8
MIN_OVERLAP = 100
"""Pairs sharing fewer items get no kappa (the panel leaves some pairs with none)."""


def load_ratings(path: Path | None = None) -> NDArray[np.float64]:
    """Ratings matrix ``(8, 15521)`` of label codes 1-5, nan where not annotated."""
    raw = np.loadtxt(path or DATA_DIR / "annotations.csv", delimiter=",", usecols=range(8))
    if raw.ndim != 2 or raw.shape[1] != N_ANNOTATORS:
        raise ValueError(f"expected {N_ANNOTATORS} annotator columns; got shape {raw.shape}")
    ratings = raw.T.copy()
    ratings[ratings < 0] = np.nan
    return ratings


def _print_matrix(title: str, matrix: NDArray[np.float64], fmt: str) -> None:
    print(title)
    print("      " + "".join(f"{f'a{k}':>8}" for k in range(matrix.shape[1])))
    for k, row in enumerate(matrix):
        cells = "".join(f"{'—':>8}" if np.isnan(v) else f"{v:>8{fmt}}" for v in row)
        print(f"  a{k:<3}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ds-replicates", type=int, default=50)
    report(parser.parse_args().ds_replicates)


def report(ds_replicates: int) -> None:
    """Print the reproduction; Dawid-Skene intervals from ``ds_replicates`` refits."""
    ratings = load_ratings()
    rated = ~np.isnan(ratings)
    values, counts = np.unique(ratings[rated], return_counts=True)
    print(f"Rzhetsky et al. (2009): {ratings.shape[1]:,} items, {ratings.shape[0]} annotators")
    print(
        f"  {rated.sum():,} ratings ({rated.sum(axis=0).min()}-{rated.sum(axis=0).max()} per item)"
    )
    print(
        "  label counts: " + ", ".join(f"{v:g}: {c:,}" for v, c in zip(values, counts, strict=True))
    )

    overlap = rated.astype(float) @ rated.T.astype(float)
    _print_matrix("\nItems shared by each pair", overlap, ".0f")
    kappa = pairwise_kappa(ratings, min_overlap=MIN_OVERLAP)
    _print_matrix(f"\nCohen's kappa per pair (min overlap {MIN_OVERLAP})", kappa, ".3f")

    out = indicator_intervals_categorical(ratings, min_overlap=MIN_OVERLAP, seed=0)
    print("\nStudy-level agreement (95 % intervals)")
    fleiss = fleiss_kappa_interval(ratings)
    z = fleiss.estimate / fleiss_kappa_null_se(ratings)
    print(
        f"  Fleiss' kappa           {_interval(fleiss.estimate, fleiss.low, fleiss.high)}"
        f" ({landis_koch_band(fleiss.estimate)}; {fleiss.n:,} items; z vs chance {z:.0f})"
    )
    for level in ("nominal", "ordinal", "interval"):
        alpha = alpha_bootstrap(ratings, level=level, seed=0)
        print(
            f"  Krippendorff alpha {level:<9}"
            f" {_interval(alpha.estimate, alpha.low, alpha.high)} (item bootstrap)"
        )
    rmse = aad_rmse_per_item(ratings)
    print(f"  AAD-RMSE per item       mean {np.nanmean(rmse):.3f}, 0 on {np.mean(rmse == 0):.1%}")

    competence = dawid_skene_competence_bootstrap(ratings, n_boot=ds_replicates, seed=0)
    kappa_others, aad = out["kappa"], out["aad"]
    skew = label_skew(ratings)
    print(f"\nPer annotator (Dawid-Skene: item bootstrap of {ds_replicates} EM refits)")
    print("  annot  items  kappa w/ others        mean AAD               DS competence       skew")
    for k in range(ratings.shape[0]):
        cells = [
            _interval(res.estimate[k], res.low[k], res.high[k])
            for res in (kappa_others, aad, competence)
        ]
        print(f"  a{k:<5}{rated[k].sum():>6}  {cells[0]}  {cells[1]}  {cells[2]}  {skew[k]:.3f}")

    print(
        "\nFlags (whole interval below a floor, or beyond the colleagues; see flag_with_intervals)"
    )
    flags = [
        ("kappa with others", "low", 0.2, kappa_others),
        ("mean AAD", "high", None, aad),
        ("DS competence", "low", None, competence),
    ]
    found = 0
    for name, side, floor, res in flags:
        for flag in flag_with_intervals(
            res.estimate,
            res.low,
            res.high,
            rated.sum(axis=1),
            min_evidence=MIN_OVERLAP,
            bad_side=side,
            floor=floor,
            name=name,
        ):
            print(f"  a{flag.annotator}: {flag.reason}")
            found += 1
    print(f"  {found} flag(s) among {ratings.shape[0]} annotators")


def _interval(estimate: float, low: float, high: float) -> str:
    """``0.59 [0.48, 0.69]``."""
    return f"{estimate:.3f} [{low:.3f}, {high:.3f}]"


if __name__ == "__main__":
    main()
