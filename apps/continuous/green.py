"""The shades-of-green data set (Booth & Narayanan 2020): true signals and real 1 Hz traces.

Read from ``$STUDIO_DATASETS_DIR/green_intensity`` (default ``<repo>/../shared/datasets``).
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


def green_datasets_dir() -> Path | None:
    """The shared data sets folder, or ``None`` when the green data set is absent."""
    path = datasets_dir()
    return path if (path / "green_intensity").is_dir() else None


def _column(path: Path) -> NDArray[np.float64]:
    """The value column of one of the data set's two-column CSV files (header skipped)."""
    values = np.loadtxt(path, delimiter=",", skiprows=1, usecols=1, ndmin=1)
    return values[: np.flatnonzero(~np.isnan(values))[-1] + 1]


def green_task(datasets: Path, task: str) -> tuple[NDArray[np.float64], dict[str, NDArray]]:
    """The 1 Hz true signal of a green task and each annotator's 1 Hz trace cut to its span."""
    folder = datasets / "green_intensity" / task
    truth = _column(folder / "objective_truth" / f"{task}_normalized_1hz.csv")
    traces = {
        name: _column(folder / "annotations_1hz" / f"{task}_{name}.csv")[: truth.size]
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
