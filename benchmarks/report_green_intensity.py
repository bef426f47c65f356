"""Shades-of-green figures of Booth & Narayanan (ICMI 2020) recomputed with analytics.metrics.

Ten annotators traced the green intensity of two videos whose true intensity is known
(``shared/datasets/green_intensity``, see its README). This prints, per task: the ICCs
among annotators (paper: ICC(k) 0.97), each annotator's lag behind the truth (paper: about
1.6 s), each annotator's agreement with the truth after the shift (SDA, kappa_SDA, trend F1
and MCC, cubic distortion fit), and the pairwise comparator matrices; then the dashboard's
trace figures with 95 % intervals and the independent samples they rest on
(``indicator_intervals_traces``: kappa_SDA with the truth and with the others, raw and with
each lag removed, HAC intervals; the study ICC). The loaders are shared with
``tests/analytics/metrics/test_real_data_green.py``.

Run with ``.venv/bin/python -m benchmarks.report_green_intensity``. The data folder can be
moved with the environment variable ``GREEN_INTENSITY_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from analytics.metrics.alignment import dtw_align, estimate_lag, shift_trace, windowed_sda
from analytics.metrics.intervals import indicator_intervals_traces
from analytics.metrics.traces import (
    ccc,
    ccc_matrix,
    cronbach_alpha,
    fit_monotonic_cubic,
    icc_all,
    kappa_sda,
    kappa_sda_matrix,
    kendall_tau_matrix,
    pearson,
    pearson_matrix,
    sda,
    sda_matrix,
    spearman_matrix,
    trend_agreement,
)

DATA_DIR = Path(
    os.environ.get(
        "GREEN_INTENSITY_DIR",
        Path(__file__).resolve().parents[2] / "shared" / "datasets" / "green_intensity",
    )
)
TASKS = ("TaskA", "TaskB")
ANNOTATORS = tuple(f"ann{i}" for i in range(1, 11))
MAX_LAG_S = 5.0
TOL = 1e-5
"""Dead band for comparisons with the truth: the stored truths step by ~1e-17 of float noise
where they are flat; 1e-5 is the threshold of the authors' consistency script."""
DTW_WINDOW_S = 3.0
WINDOWED_SDA_S = 3.0


def _values(path: Path) -> NDArray[np.float64]:
    """The value column of one of the dataset's two-column CSV files."""
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=1, ndmin=1)


def load_task(task: str, *, rate_hz: int = 1) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Truth ``(n,)`` and annotations ``(10, n)`` of a task, cut to their common span.

    ``rate_hz`` 1 or 2 reads the 2020 repository's files (1 Hz is the paper's analysis),
    10 the original 10 Hz release (``from_2016_repo``). Trailing nan rows of a truth file
    (the 2 Hz truth of task A) are dropped.
    """
    if rate_hz in (1, 2):
        folder = DATA_DIR / task
    elif rate_hz == 10:
        folder = DATA_DIR / "from_2016_repo" / task
    else:
        raise ValueError(f"rate_hz must be 1, 2 or 10; got {rate_hz}")
    truth = _values(folder / "objective_truth" / f"{task}_normalized_{rate_hz}hz.csv")
    truth = truth[: np.flatnonzero(~np.isnan(truth))[-1] + 1]
    annotation_dir = folder / f"annotations_{rate_hz}hz"
    traces = [_values(annotation_dir / f"{task}_{name}.csv") for name in ANNOTATORS]
    n = min(truth.size, *(trace.size for trace in traces))
    return truth[:n], np.vstack([trace[:n] for trace in traces])


def authors_shifts(task: str, *, rate_hz: int = 1) -> NDArray[np.int64]:
    """Shift in samples of each annotator in the authors' ``annotations_<rate>hz_shift_aligned``.

    Their method is not documented; the files are the annotations advanced by a whole
    number of samples (rewritten with different float formatting), recovered by matching.
    """
    shifts = []
    for name in ANNOTATORS:
        file_name = f"{task}_{name}.csv"
        raw = _values(DATA_DIR / task / f"annotations_{rate_hz}hz" / file_name)
        aligned = _values(DATA_DIR / task / f"annotations_{rate_hz}hz_shift_aligned" / file_name)
        matches = [
            k
            for k in range(raw.size - aligned.size + 1)
            if np.allclose(raw[k : k + aligned.size], aligned, rtol=0, atol=1e-9)
        ]
        if len(matches) != 1:
            raise ValueError(f"{task} {name}: shift-aligned file is not a unique shift")
        shifts.append(matches[0])
    return np.array(shifts)


def estimate_lags(task: str, *, rate_hz: int = 1) -> NDArray[np.int64]:
    """Each annotator's lag behind the truth in samples (``estimate_lag``, +-5 s)."""
    truth, annotations = load_task(task, rate_hz=rate_hz)
    return np.array(
        [
            estimate_lag(trace, truth, max_lag=MAX_LAG_S, rate_hz=rate_hz).samples
            for trace in annotations
        ]
    )


def shift_aligned(task: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """1 Hz truth and annotations shifted by their estimated lags, cut where padding starts."""
    truth, annotations = load_task(task)
    lags = estimate_lags(task)
    keep = truth.size - max(int(lags.max()), 0)
    shifted = np.vstack(
        [shift_trace(trace, lag) for trace, lag in zip(annotations, lags, strict=True)]
    )
    return truth[:keep], shifted[:, :keep]


def _summary(matrix: NDArray[np.float64]) -> str:
    off_diagonal = matrix[~np.eye(matrix.shape[0], dtype=bool)]
    return (
        f"mean {np.nanmean(off_diagonal):6.3f}  min {np.nanmin(off_diagonal):6.3f}  "
        f"max {np.nanmax(off_diagonal):6.3f}"
    )


def report_task(task: str) -> None:
    truth, annotations = load_task(task)
    print(f"\n{task}: {annotations.shape[0]} annotators x {truth.size} samples at 1 Hz")
    iccs = icc_all(annotations)
    print("  " + "  ".join(f"ICC({kind})={value:.3f}" for kind, value in iccs.items()))
    print(f"  Cronbach alpha={cronbach_alpha(annotations):.3f}   (paper: ICC(k) = 0.97)")

    print(f"  lag behind truth, s (max correlation within +-{MAX_LAG_S:g} s; paper: ~1.6 s)")
    print(f"    {'':16s}" + "".join(f"{name:>6s}" for name in ANNOTATORS) + "   mean")
    for label, lags in (
        ("1 Hz", estimate_lags(task)),
        ("authors' 1 Hz", authors_shifts(task)),
        ("2 Hz", estimate_lags(task, rate_hz=2) / 2),
        ("authors' 2 Hz", authors_shifts(task, rate_hz=2) / 2),
        ("10 Hz (2016)", estimate_lags(task, rate_hz=10) / 10),
    ):
        print(f"    {label:16s}" + "".join(f"{lag:6.1f}" for lag in lags) + f"  {lags.mean():5.2f}")

    aligned_truth, aligned = shift_aligned(task)
    dtw_window = round(DTW_WINDOW_S)  # samples at 1 Hz
    print(f"  each annotator vs truth (shift-aligned, tol={TOL:g})")
    print("    annot.    SDA  kSDA    F1   MCC  cubicR2 monotone  SDA(dtw) SDA(raw,3s-win)")
    for name, trace, raw in zip(ANNOTATORS, aligned, annotations, strict=True):
        trend = trend_agreement(trace, aligned_truth, tol=TOL)
        fit = fit_monotonic_cubic(trace, aligned_truth, direction="annotation_to_truth")
        warped = dtw_align(raw, truth, window=dtw_window).warped
        print(
            f"    {name:6s} {sda(trace, aligned_truth, tol=TOL):6.3f}"
            f" {kappa_sda(trace, aligned_truth, tol=TOL):5.3f} {trend.f1:5.3f}"
            f" {trend.mcc:5.3f}  {fit.r2:7.3f} {fit.increasing!s:>8s}"
            f"  {sda(warped, truth, tol=TOL):8.3f}"
            f"  {windowed_sda(raw, truth, window=round(WINDOWED_SDA_S), tol=TOL):8.3f}"
        )

    print("  pairwise among annotators (shift-aligned), off-diagonal")
    for label, matrix in (
        ("Pearson", pearson_matrix(aligned)),
        ("Spearman", spearman_matrix(aligned)),
        ("Kendall tau-b", kendall_tau_matrix(aligned)),
        ("CCC", ccc_matrix(aligned)),
        ("SDA", sda_matrix(aligned)),
        ("kappa_SDA", kappa_sda_matrix(aligned)),
        ("kappa_SDA tol=.005", kappa_sda_matrix(aligned, tol=0.005)),
    ):
        print(f"    {label:18s} {_summary(matrix)}")

    report_intervals(truth, annotations)

    if task == "TaskA":
        fit = fit_monotonic_cubic(aligned[6], aligned_truth, direction="annotation_to_truth")
        distorted = np.polyval(fit.coefficients, aligned_truth)
        print(
            "  ann7's cubic distortion applied to the truth: "
            f"Pearson {pearson(distorted, aligned_truth):.3f} (paper 0.90), "
            f"CCC {ccc(distorted, aligned_truth):.3f} (paper 0.43)"
        )


def report_intervals(truth: NDArray[np.float64], annotations: NDArray[np.float64]) -> None:
    """The dashboard's trace figures of one task with 95 % intervals (HAC, flat-top window)
    and effective samples; the annotators' dead band is the study demo's 0.005, the truth's
    only its float noise (TOL)."""
    out = indicator_intervals_traces(
        [annotations], rate_hz=1, truths=[truth], max_lag=MAX_LAG_S, tol=0.005, truth_tol=TOL
    )
    print("  with 95 % intervals (annotators' tol 0.005, truth's 1e-5; lags removed, no padding)")
    print("    annot.  kSDA with truth          kSDA w/ others raw       kSDA w/ others aligned")
    keys = ("kappa_truth", "kappa_sda", "kappa_sda_aligned")
    for k, name in enumerate(ANNOTATORS):
        cells = [
            f"{out[key].estimate[k]:.3f} [{out[key].low[k]:.3f}, {out[key].high[k]:.3f}]"
            for key in keys
        ]
        print(f"    {name:6s}  " + "   ".join(cells))
    print(
        "    independent steps (of "
        + ", ".join(
            f"{key} {out[key].n[0]}: {np.nanmedian(out[key].n_effective):.0f}" for key in keys
        )
        + ", median over annotators)"
    )
    found = out["icc"]
    print(
        f"    ICC(1,k) {found.estimate:.3f} on {found.n} samples worth"
        f" {found.n_effective:.0f} independent ones (one item: no interval over items)"
    )


def main() -> None:
    for task in TASKS:
        report_task(task)


if __name__ == "__main__":
    main()
