"""Lag estimation, shifting, DTW (against dtw-python and a slow DP) and windowed SDA."""

from __future__ import annotations

import dtw as dtw_python  # GPL: a test oracle only
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.metrics.alignment import (
    dtw_align,
    estimate_lag,
    shift_trace,
    windowed_sda,
)
from analytics.metrics.traces import sda


def smooth_signal(seed: int, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.convolve(rng.normal(size=n + 20), np.ones(8) / 8, mode="valid")[:n]


def slow_dtw(x: np.ndarray, y: np.ndarray, window: int) -> float:
    """Textbook DTW (symmetric1, squared cost) over the band used by ``dtw_align``.

    Cell (i, j) is allowed when ``i - w - max(0, n - m) <= j <= i + w + max(0, m - n)``:
    ``abs(i - j) <= w`` for equal lengths, widened by the length difference otherwise.
    """
    n, m = len(x), len(y)
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(n):
        for j in range(m):
            if i - window - max(0, n - m) <= j <= i + window + max(0, m - n):
                best = min(acc[i, j], acc[i, j + 1], acc[i + 1, j])
                acc[i + 1, j + 1] = (x[i] - y[j]) ** 2 + best
    return float(np.sqrt(acc[n, m]))


# ------------------------------------------------------------------ estimate_lag


@pytest.mark.parametrize("lag", [-4, -1, 0, 2, 5])
def test_estimate_lag_recovers_a_known_shift_of_a_distorted_copy(lag):
    truth = smooth_signal(0, n=400)
    late = np.roll(truth, lag)  # annotation[t] = truth[t - lag]
    annotation = 0.3 + 0.5 * np.tanh(late)  # monotone distortion: correlation still peaks
    result = estimate_lag(annotation, truth, max_lag=3, rate_hz=2)  # +-6 samples
    assert result.samples == lag
    assert result.seconds == lag / 2
    assert result.correlation > 0.95


def test_estimate_lag_uses_the_common_span_and_breaks_ties_towards_zero():
    truth = smooth_signal(1, n=150)
    annotation = np.concatenate([[truth[0]] * 3, truth])  # 3 samples late and 3 longer
    assert estimate_lag(annotation, truth, max_lag=5, rate_hz=1).samples == 3
    square = np.tile([0.0, 0.0, 1.0, 1.0], 25)  # periodic: lags -4, 0, 4 tie
    assert estimate_lag(square, square, max_lag=4, rate_hz=1).samples == 0


def test_estimate_lag_validation():
    truth = smooth_signal(2, n=20)
    with pytest.raises(ValueError, match="too short"):
        estimate_lag(truth, truth, max_lag=9, rate_hz=1)
    with pytest.raises(ValueError, match="rate_hz"):
        estimate_lag(truth, truth, max_lag=1, rate_hz=0)
    with pytest.raises(ValueError, match="max_lag"):
        estimate_lag(truth, truth, max_lag=-1, rate_hz=1)
    with pytest.raises(ValueError, match="constant"):
        estimate_lag(np.ones(20), truth, max_lag=2, rate_hz=1)
    with pytest.raises(ValueError, match="nan"):
        estimate_lag(np.r_[truth[:-1], np.nan], truth, max_lag=2, rate_hz=1)


# ------------------------------------------------------------------ shift_trace


def test_shift_trace_moves_and_edge_pads():
    x = np.arange(6.0)
    np.testing.assert_array_equal(shift_trace(x, 2), [2, 3, 4, 5, 5, 5])
    np.testing.assert_array_equal(shift_trace(x, -2), [0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(shift_trace(x, 0), x)


@settings(deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=3, max_size=50), st.data())
def test_shift_trace_round_trip_in_the_interior(values, data):
    x = np.array(values)
    lag = data.draw(st.integers(-(x.size - 1) // 2, (x.size - 1) // 2))
    back = shift_trace(shift_trace(x, lag), -lag)
    keep = slice(abs(lag), x.size - abs(lag))
    np.testing.assert_array_equal(back[keep], x[keep])


def test_shift_trace_validation():
    with pytest.raises(ValueError, match="below the trace length"):
        shift_trace([1.0, 2.0, 3.0], 3)
    with pytest.raises(ValueError, match="integer"):
        shift_trace([1.0, 2.0, 3.0], 1.5)


# ------------------------------------------------------------------ dtw_align


@pytest.mark.parametrize("window", [0, 1, 3, 10])
@pytest.mark.parametrize("seed", range(3))
def test_dtw_cost_matches_dtw_python(seed, window):
    rng = np.random.default_rng(seed)
    x, y = np.cumsum(rng.normal(size=(2, 120)), axis=1)
    oracle = dtw_python.dtw(
        x,
        y,
        dist_method="sqeuclidean",
        step_pattern=dtw_python.symmetric1,
        window_type="sakoechiba",
        window_args={"window_size": window},
    )
    assert dtw_align(x, y, window=window).cost == pytest.approx(np.sqrt(oracle.distance))


@pytest.mark.parametrize(("n", "m"), [(30, 30), (30, 33), (34, 30)])
@pytest.mark.parametrize("window", [1, 3])
def test_dtw_cost_and_path_match_a_slow_dynamic_programme(n, m, window):
    rng = np.random.default_rng(n * m + window)
    x, y = rng.normal(size=n), rng.normal(size=m)
    result = dtw_align(x, y, window=window)
    assert result.cost == pytest.approx(slow_dtw(x, y, window))
    path = result.path
    assert path[0].tolist() == [0, 0]
    assert path[-1].tolist() == [n - 1, m - 1]
    assert set(map(tuple, np.diff(path, axis=0))) <= {(0, 1), (1, 0), (1, 1)}
    assert np.sum((x[path[:, 0]] - y[path[:, 1]]) ** 2) == pytest.approx(result.cost**2)
    # warped: the mean of the trace samples matched to each reference sample
    for j in (0, m // 2, m - 1):
        assert result.warped[j] == pytest.approx(x[path[path[:, 1] == j, 0]].mean())


def test_dtw_undoes_a_shift_within_the_window():
    reference = smooth_signal(4, n=300)
    late = np.r_[np.repeat(reference[0], 3), reference[:-3]]
    result = dtw_align(late, reference, window=5)
    np.testing.assert_allclose(result.warped[:-3], reference[:-3])
    assert dtw_align(late, reference, window=1).cost > result.cost
    same = dtw_align(reference, reference, window=0)
    assert same.cost == 0.0
    np.testing.assert_array_equal(same.warped, reference)


def test_dtw_validation():
    with pytest.raises(ValueError, match="window"):
        dtw_align([0.0, 1.0], [0.0, 1.0], window=-1)
    with pytest.raises(ValueError, match="window"):
        dtw_align([0.0, 1.0], [0.0, 1.0], window=1.5)
    with pytest.raises(ValueError, match="nan"):
        dtw_align([0.0, np.nan], [0.0, 1.0], window=1)


# ------------------------------------------------------------------ windowed_sda


def test_windowed_sda_hand_computed():
    # y is one sample late; steps of x: + + + 0 0 - - - 0, of y: 0 + + + 0 0 - - -
    x = [0, 1, 2, 3, 3, 3, 2, 1, 0, 0]
    y = [0, 0, 1, 2, 3, 3, 3, 2, 1, 0]
    assert sda(x, y) == pytest.approx(1 / 9)  # 5 of 9 steps agree
    assert windowed_sda(x, y, window=3) == 1.0  # blocks: (+, 0, -) for both
    # blocks of 4, the last one shorter: x (+ + + 0 -> +, 0 - - - -> -, 0 -> 0),
    # y (0 + + + -> +, 0 0 - - -> tie -> 0, - -> -): 1 of 3 blocks agree
    assert windowed_sda(x, y, window=4) == pytest.approx(-1 / 3)


def test_windowed_sda_window_one_is_sda_and_ties_give_zero():
    rng = np.random.default_rng(5)
    x, y = np.round(np.cumsum(rng.normal(size=(2, 60)), axis=1))
    assert windowed_sda(x, y, window=1) == sda(x, y)
    assert windowed_sda(x, y, window=1, tol=1.0) == sda(x, y, tol=1.0)
    # one block with one rise and one fall: no prevailing sign, same as a flat block
    assert windowed_sda([0, 1, 0], [5, 5, 5], window=2) == 1.0


@settings(deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=2, max_size=40).flatmap(
        lambda x: st.tuples(
            st.just(x), st.lists(st.integers(-3, 3), min_size=len(x), max_size=len(x))
        )
    ),
    st.integers(1, 6),
)
def test_windowed_sda_symmetric_and_bounded(pair, window):
    x, y = pair
    value = windowed_sda(x, y, window=window)
    assert -1.0 <= value <= 1.0
    assert value == windowed_sda(y, x, window=window)


def test_windowed_sda_validation():
    with pytest.raises(ValueError, match="window"):
        windowed_sda([0, 1, 2], [0, 1, 2], window=0)
    with pytest.raises(ValueError, match="same length"):
        windowed_sda([0, 1, 2], [0, 1], window=2)
