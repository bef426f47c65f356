"""The shades-of-green data set (its 2016 release, MIT): true signals and real 1 Hz traces.

Read from ``green_intensity_2016/`` in :func:`apps.studies.datasets.datasets_dir` (shipped with
the studio; its README there says where it comes from).
``manage.py load_gold_signals`` stores its true signals as gold signals; the demo study
(:mod:`apps.demo.continuous`) also pre-fills the real annotators' traces.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from apps.continuous.models import GoldSignal
from apps.continuous.services import gold_signal_save
from apps.studies.datasets import datasets_dir

GREEN_TASKS = ("TaskA", "TaskB")
GREEN_ANNOTATORS = tuple(f"ann{i}" for i in range(1, 11))
GREEN_FOLDER = "green_intensity_2016"


def green_datasets_dir() -> Path | None:
    """The data sets folder, or ``None`` when it holds no green data set."""
    path = datasets_dir()
    return path if path is not None and (path / GREEN_FOLDER).is_dir() else None


def _columns(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Time and value columns of one of the data set's two-column CSV files (header skipped)."""
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    keep = np.flatnonzero(~np.isnan(table[:, 1]))[-1] + 1
    return table[:keep, 0], table[:keep, 1]


def to_1hz(times: NDArray[np.float64], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Resample a trace to 1 Hz: sample ``k`` is the mean of the samples with ``|t - k| < 0.5``.

    Vectorised with :func:`numpy.bincount` (sums and counts per whole second).
    """
    second = np.floor(times + 0.5).astype(np.intp)
    sums = np.bincount(second, weights=values)
    counts = np.bincount(second)
    return sums[counts > 0] / counts[counts > 0]


def green_task(datasets: Path, task: str) -> tuple[NDArray[np.float64], dict[str, NDArray]]:
    """The 1 Hz true signal of a green task and each annotator's 1 Hz trace cut to its span.

    The traces are the release's 10 Hz files resampled by :func:`to_1hz` and rounded to
    float32, the precision the studio stores traces at (so a stored trace equals its source:
    the resampled means sit on the 0.005 dead band's edges, where float rounding decides).
    """
    folder = datasets / GREEN_FOLDER / task
    _, truth = _columns(folder / "objective_truth" / f"{task}_normalized_1hz.csv")
    traces = {
        name: to_1hz(*_columns(folder / "annotations_10hz" / f"{task}_{name}.csv"))[: truth.size]
        .astype(np.float32)
        .astype(np.float64)
        for name in GREEN_ANNOTATORS
    }
    return truth, traces


def green_signal_key(task: str) -> str:
    return f"green-{task.lower()}"


def green_signal_save(task: str, truth: NDArray[np.float64]) -> GoldSignal:
    """Store a green task's true signal as the gold signal ``green-<task>``."""
    return gold_signal_save(
        key=green_signal_key(task),
        rate_hz=1.0,
        values=truth,
        description=f"True green intensity of {task} (Booth & Narayanan 2020), 1 Hz.",
    )
