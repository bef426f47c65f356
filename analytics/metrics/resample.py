"""Resampling of irregular slider recordings onto a fixed analysis rate.

A recorder samples a slider against the media clock at about its recording rate (e.g. 10 Hz),
but browser timers jitter, a seek re-records a span, and a paused stimulus produces no samples.
Agreement metrics (``analytics.metrics.traces``) need traces on one fixed time base, so a
recording is brought onto the ticks ``t_k = k / rate_hz`` in two steps:

1. ``merge_segments``: a recording is a sequence of *segments* (a new one starts after every
   seek). A later segment re-records the span of media time it covers, so it replaces the
   samples that earlier segments had recorded in that span. What remains is one strictly
   increasing set of samples: what the annotator meant last at each moment.
2. ``resample_hold``: the value at each tick is the value of the latest sample at or before it
   (zero-order hold).

Why zero-order hold
-------------------
The slider *shows* its last position until it is moved again: between two samples the
annotator has asserted exactly the earlier value, never an average of it with a value they had
not chosen yet. Hold is therefore what the annotator saw, it never invents values between two
positions (so the resampled trace stays on the slider's grid and inside its scale), and it is
causal: a tick's value only depends on what had been recorded by then, so a constant reaction
lag estimated later is not blurred by looking ahead. Linear interpolation would look ahead by
up to one sampling interval and smooth steps into ramps, which changes forward-difference signs
(SDA) at every step. Hold is also *exact*: a recording that is constant between ticks is
returned unchanged, which the tests check on known signals.

A sample counts for a tick when its time is at most ``TICK_TOLERANCE`` (1 microsecond) after
the tick, so media times like ``0.30000000000000004`` (0.1 * 3 in binary floating point) land on
the tick 0.3. Ticks before the first sample take the first sample's value (the slider's starting
position, which the recorder stores at the start of playback).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from analytics.metrics._validate import as_trace

__all__ = ["TICK_TOLERANCE", "merge_segments", "resample_hold", "tick_count"]

TICK_TOLERANCE = 1e-6
"""Seconds after a tick within which a sample still counts as taken at the tick."""


def _samples(times: ArrayLike, values: ArrayLike) -> tuple[NDArray[np.float64], NDArray]:
    t = as_trace(times, name="times")
    v = as_trace(values, name="values")
    if t.size != v.size:
        raise ValueError(f"times and values differ in length: {t.size} and {v.size}")
    if t.size == 0:
        raise ValueError("a recording needs at least one sample")
    return t, v


def merge_segments(
    times: ArrayLike, values: ArrayLike, *, segment_starts: ArrayLike = ()
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The samples that remain when later segments re-record the spans they cover.

    Parameters
    ----------
    times, values : array-like of shape (n_samples,)
        Samples in the order they were recorded (media time in seconds, slider value).
        Strictly increasing in time within each segment.
    segment_starts : array-like of int, default ()
        Indices where a new segment starts (after a seek). Index 0 is implied.

    Returns
    -------
    times, values : ndarray of shape (n_kept,)
        The kept samples, sorted by time (strictly increasing).

    Raises
    ------
    ValueError
        On bad shapes, bad indices, or times not strictly increasing within a segment.

    Notes
    -----
    With segments :math:`S_1, \\dots, S_m` in recording order spanning
    :math:`[a_j, b_j]` (first and last sample time), sample :math:`i \\in S_j` is kept iff

    .. math:: \\nexists\\, j' > j : a_{j'} \\le t_i \\le b_{j'}

    Examples
    --------
    Recorded 0-3 s, sought back to 1.5 s and re-recorded up to 2.5 s:

    >>> t, v = merge_segments([0, 1, 2, 3, 1.5, 2.5], [0, 1, 2, 3, 9, 9], segment_starts=[4])
    >>> t.tolist(), v.tolist()
    ([0.0, 1.0, 1.5, 2.5, 3.0], [0.0, 1.0, 9.0, 9.0, 3.0])
    """
    t, v = _samples(times, values)
    starts = np.unique(np.concatenate([[0], np.asarray(segment_starts, dtype=np.int64)]))
    if starts[0] < 0 or starts[-1] >= t.size:
        raise ValueError(f"segment_starts must lie in 0..{t.size - 1}; got {starts.tolist()}")
    segment = np.repeat(np.arange(starts.size), np.diff(np.append(starts, t.size)))
    steps = np.diff(t)
    same_segment = segment[1:] == segment[:-1]
    if (steps[same_segment] <= 0).any():
        i = int(np.flatnonzero(same_segment & (steps <= 0))[0]) + 1
        raise ValueError(f"times must increase within a segment; sample {i} does not")
    ends = np.append(starts[1:], t.size) - 1
    kept = np.ones(t.size, dtype=bool)
    for j in range(1, starts.size):
        covered = (t >= t[starts[j]]) & (t <= t[ends[j]]) & (segment < j)
        kept &= ~covered
    order = np.argsort(t[kept], kind="stable")
    return t[kept][order], v[kept][order]


def tick_count(*, duration: float, rate_hz: float) -> int:
    """Number of ticks ``k / rate_hz`` in ``[0, duration]``: ``floor(duration * rate_hz) + 1``.

    Examples
    --------
    >>> tick_count(duration=266.0, rate_hz=1.0), tick_count(duration=2.99, rate_hz=2.0)
    (267, 6)
    """
    duration, rate_hz = float(duration), float(rate_hz)
    if not (np.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"rate_hz must be > 0; got {rate_hz}")
    if not (np.isfinite(duration) and duration >= 0):
        raise ValueError(f"duration must be >= 0 seconds; got {duration}")
    return int(np.floor(duration * rate_hz + TICK_TOLERANCE)) + 1


def resample_hold(
    times: ArrayLike, values: ArrayLike, *, rate_hz: float, duration: float
) -> NDArray[np.float64]:
    """Zero-order hold of irregular samples at the ticks ``k / rate_hz`` in ``[0, duration]``.

    Parameters
    ----------
    times : array-like of shape (n_samples,)
        Strictly increasing sample times in seconds (e.g. from ``merge_segments``).
    values : array-like of shape (n_samples,)
        Slider values at those times.
    rate_hz : float
        Analysis rate, > 0.
    duration : float
        Length of the stimulus in seconds, >= 0.

    Returns
    -------
    ndarray of shape (tick_count(duration=duration, rate_hz=rate_hz),)
        Value of the latest sample at or before each tick (within ``TICK_TOLERANCE``); ticks
        before the first sample take the first sample's value.

    Notes
    -----
    .. math::

        y_k = v_{i(k)}, \\qquad
        i(k) = \\max\\big(0,\\ \\max\\{i : t_i \\le k / r + \\varepsilon\\}\\big),
        \\qquad k = 0, \\dots, \\lfloor D r \\rfloor

    Examples
    --------
    A 10 Hz recording of a step at 1.05 s, held at 2 Hz over 2 s:

    >>> t = np.arange(21) / 10
    >>> resample_hold(t, np.where(t < 1.05, 0.2, 0.8), rate_hz=2, duration=2).tolist()
    [0.2, 0.2, 0.2, 0.8, 0.8]
    """
    t, v = _samples(times, values)
    if (np.diff(t) <= 0).any():
        raise ValueError("times must be strictly increasing; merge segments first")
    ticks = np.arange(tick_count(duration=duration, rate_hz=rate_hz)) / float(rate_hz)
    index = np.searchsorted(t, ticks + TICK_TOLERANCE, side="right") - 1
    return v[np.maximum(index, 0)]
