"""The dead band (``sda_tolerance``) is for the annotators' slider jitter, never for the truth.

A truth that moves in steps smaller than the annotators' dead band (here 0.002 per sample
against a band of 0.005) still moves: only floating-point noise below ``TRUTH_TOL`` is "no
change" in a known signal. An annotator who follows every move of it in clear slider steps
agrees with it perfectly.
"""

from __future__ import annotations

import numpy as np
import pytest

from analytics.sufficient_stats import CONTINUOUS_COLUMNS
from apps.continuous.quality import _item_contribution
from apps.continuous.selectors import TRUTH_TOL, item_calibration

JITTER_TOL = 0.005  # the question's sda_tolerance
TRUTH = np.concatenate([np.arange(0, 30) * 0.002, (30 - np.arange(0, 30)) * 0.002])
FOLLOWER = TRUTH * 25  # the same moves in slider steps of 0.05, far above the band


def test_item_calibration_applies_the_band_to_the_trace_only():
    found = item_calibration(FOLLOWER, TRUTH, rate_hz=1.0, tol=JITTER_TOL, truth_tol=TRUTH_TOL)
    assert found["lag_seconds"] == 0.0
    assert found["f1"] == pytest.approx(1.0)
    assert found["kappa_sda"] == pytest.approx(1.0)


def test_item_contribution_scores_the_truth_with_the_truth_tolerance():
    _, _, figures = _item_contribution(
        {0: FOLLOWER, 1: FOLLOWER[::-1].copy()}, truth=TRUTH, rate_hz=1.0, tol=JITTER_TOL
    )
    kappa = figures[:, CONTINUOUS_COLUMNS.index("kappa_truth_sum")]
    counted = figures[:, CONTINUOUS_COLUMNS.index("kappa_truth_n")]
    f1 = figures[:, CONTINUOUS_COLUMNS.index("f1_sum")]
    assert counted.tolist() == [1.0, 1.0]
    assert kappa[0] == pytest.approx(1.0)
    assert f1[0] == pytest.approx(1.0)
