"""Resampling to the analysis rate is exact on known signals (analytics.metrics.resample)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analytics.metrics.resample import merge_segments, resample_hold, tick_count


def hold_oracle(times, values, ticks):
    """The definition, one tick at a time: the last sample at or before the tick."""
    out = []
    for tick in ticks:
        before = [v for t, v in zip(times, values, strict=True) if t <= tick + 1e-6]
        out.append(before[-1] if before else values[0])
    return np.array(out)


def test_a_step_signal_sampled_at_10_hz_comes_back_exactly_at_1_hz():
    levels = np.array([0.1, 0.4, 0.4, 0.9, 0.2, 0.7])  # one level per second, ends at 5 s
    times = np.cumsum(np.full(51, 0.1)) - 0.1  # 0.0, 0.1, ... with binary float drift
    values = levels[np.minimum((times + 1e-9).astype(int), 5)]
    assert resample_hold(times, values, rate_hz=1, duration=5).tolist() == levels.tolist()


def test_samples_taken_at_the_ticks_are_returned_unchanged():
    values = np.linspace(0, 1, 21)
    times = np.arange(21) * 0.5
    assert np.array_equal(resample_hold(times, values, rate_hz=2, duration=10), values)


def test_jittered_sampling_matches_the_definition():
    rng = np.random.default_rng(7)
    times = np.cumsum(rng.uniform(0.05, 0.15, 300))
    values = rng.random(300)
    ticks = np.arange(tick_count(duration=times[-1], rate_hz=4)) / 4
    expected = hold_oracle(times, values, ticks)
    assert np.array_equal(resample_hold(times, values, rate_hz=4, duration=times[-1]), expected)


def test_ticks_before_the_first_sample_take_its_value_and_the_tail_is_held():
    out = resample_hold([1.5, 2.0], [0.3, 0.6], rate_hz=1, duration=4)
    assert out.tolist() == [0.3, 0.3, 0.6, 0.6, 0.6]


def test_a_later_segment_replaces_the_span_it_re_recorded():
    times = [0, 1, 2, 3, 4, 5, 1.5, 2.5, 3.5]
    values = [0, 1, 2, 3, 4, 5, 9, 9, 8]
    t, v = merge_segments(times, values, segment_starts=[6])
    assert t.tolist() == [0, 1, 1.5, 2.5, 3.5, 4, 5]
    assert resample_hold(t, v, rate_hz=1, duration=5).tolist() == [0, 1, 9, 9, 4, 5]


def test_a_forward_seek_holds_the_value_over_the_skipped_span():
    t, v = merge_segments([0, 1, 2, 6, 7], [0.1, 0.2, 0.3, 0.8, 0.9], segment_starts=[3])
    assert resample_hold(t, v, rate_hz=1, duration=7).tolist() == [
        0.1,
        0.2,
        0.3,
        0.3,
        0.3,
        0.3,
        0.8,
        0.9,
    ]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="increase within a segment"):
        merge_segments([0, 1, 1], [0, 0, 0])
    with pytest.raises(ValueError, match="strictly increasing"):
        resample_hold([0, 2, 1], [0, 0, 0], rate_hz=1, duration=2)
    with pytest.raises(ValueError, match="differ in length"):
        resample_hold([0, 1], [0], rate_hz=1, duration=1)


@given(
    st.lists(st.floats(0.01, 2.0), min_size=1, max_size=60),
    st.sampled_from([0.5, 1.0, 2.0, 10.0]),
)
def test_hold_equals_the_definition_for_any_sampling(steps, rate):
    times = np.cumsum(steps)
    values = np.arange(times.size, dtype=float)
    ticks = np.arange(tick_count(duration=times[-1], rate_hz=rate)) / rate
    expected = hold_oracle(times, values, ticks)
    assert np.array_equal(resample_hold(times, values, rate_hz=rate, duration=times[-1]), expected)
