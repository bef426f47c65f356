"""Intervals of the categorical kind agree with the live dashboard figures (#11)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.models import QualitySnapshot
from tests.analytics.test_intervals import answered  # noqa: F401  (fixture)


def test_kappa_interval_is_centred_on_the_live_kappa_with_others(answered):  # noqa: F811
    """The ordered test scale: the live figure is unweighted kappa, so is the interval's."""
    _, question, _ = answered
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    stored = snapshot.indicators
    live = np.array(stored["values"]["cohen_kappa"], dtype=float)
    estimate = np.array([entry[0] for entry in stored["intervals"]["kappa"]], dtype=float)
    assert estimate == pytest.approx(live, abs=1e-4)
