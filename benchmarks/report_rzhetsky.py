"""Categorical agreement on the Rzhetsky et al. (2009) data, recomputed with analytics.metrics.

15,521 biomedical text fragments, each labelled by 3 of 8 annotators in a rotating panel
(``shared/datasets/rzhetsky2009``, see its README; codes 1-5, -1 = not annotated). This
prints the pairwise overlaps and Cohen's kappas (pairs below the overlap threshold are nan:
the panel never puts some annotators together), Fleiss' kappa, Krippendorff's alpha at three
levels, Dawid-Skene competences, label skew, AAD-RMSE and the outlier flags. The loader is
shared with ``tests/analytics/metrics/test_real_data_rzhetsky.py``.

Run with ``.venv/bin/python -m benchmarks.report_rzhetsky``. The data folder can be moved with
the environment variable ``RZHETSKY_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from analytics.metrics import (
    aad_rmse_per_item,
    dawid_skene,
    flag_outliers,
    fleiss_kappa,
    krippendorff_alpha,
    label_skew,
    landis_koch_band,
    mean_with_others,
    pairwise_kappa,
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

    print("\nStudy-level agreement")
    fleiss = fleiss_kappa(ratings)
    print(f"  Fleiss' kappa           {fleiss:.4f} ({landis_koch_band(fleiss)})")
    for level in ("nominal", "ordinal", "interval"):
        print(f"  Krippendorff alpha {level:<9} {krippendorff_alpha(ratings, level=level):.4f}")
    rmse = aad_rmse_per_item(ratings)
    print(f"  AAD-RMSE per item       mean {np.nanmean(rmse):.3f}, 0 on {np.mean(rmse == 0):.1%}")

    fit = dawid_skene(ratings)
    with_others = mean_with_others(kappa)
    skew = label_skew(ratings)
    print(f"\nPer annotator (Dawid-Skene: {fit.n_iter} EM iterations, converged={fit.converged})")
    print("  annot  items  kappa w/ others  DS competence  label skew (JSD)")
    for k in range(ratings.shape[0]):
        print(
            f"  a{k:<5}{rated[k].sum():>6}  {with_others[k]:>15.3f}  {fit.competence[k]:>13.3f}"
            f"  {skew[k]:>16.3f}"
        )
    print(
        "  class priors: "
        + ", ".join(f"{v:g}: {p:.3f}" for v, p in zip(fit.values, fit.priors, strict=True))
    )

    flags = flag_outliers(
        {"kappa": with_others, "competence": fit.competence, "skew": skew},
        rated.sum(axis=1),
        min_evidence=MIN_OVERLAP,
        z_threshold={"kappa": -3.5, "competence": -3.5, "skew": 3.5},
        names={"kappa": "kappa with others", "competence": "DS competence", "skew": "label skew"},
    )
    print("\nOutlier flags (robust z beyond 3.5):")
    for flag in flags:
        print(f"  a{flag.annotator}: {flag.reason}")
    print(f"  {len(flags)} flag(s)")


if __name__ == "__main__":
    main()
