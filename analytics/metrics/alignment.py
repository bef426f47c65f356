"""Temporal alignment of continuous annotation traces.

Annotators lag the stimulus (about 1.5 s in task A of the shades-of-green study), and SDA compares
differences step by step, so traces should be aligned first. Three tools:

* ``estimate_lag`` + ``shift_trace``: a constant per-annotator shift (the paper's choice,
  "EvalDep"), searched within +-max_lag against a reference (the truth, a stimulus feature,
  or the other annotators' mean).
* ``dtw_align``: dynamic time warping constrained by a Sakoe-Chiba band (3 s in the RECOLA
  analysis). DTW repeats samples to stretch a trace, which creates flat steps and so adds
  noise to SDA: show that caveat wherever DTW-aligned agreement is displayed.
* ``windowed_sda``: for traces that cannot be aligned, SDA over the majority sign of the
  forward differences within windows of 3-5 s.

DTW implementation, chosen by measurement
-----------------------------------------
Candidates, timed on this project's 2-core machine for one pair of 3,000-sample random-walk
traces (squared local cost, symmetric1 steps, warping path included, best of 5):

* numpy banded DP (row-vectorised prototype): 26-27 ms (window 3), 30-31 ms (window 30)
* dtaidistance 2.5.1 ``warping_path_fast`` (C): 0.4 ms (window 3), 1.1 ms (window 30)
* dtw-python 1.9.0 (``symmetric1``): 166 ms (window 3), 104 ms (window 30)

(Window 3 = 3 s at 1 Hz, window 30 = 3 s at 10 Hz.) All three gave the same DTW distance to
1e-12 and, without ties, the same path. The numpy prototype cannot go much below ~10 ms:
it pays a few numpy calls per row of the band in a Python loop. dtaidistance is 25-70 times
faster, which is the difference between about 1 s and about 35 s for the pairwise alignment
of 50 annotators, so it is the one runtime dependency here (Apache-2.0, binary wheels,
banded memory: a 30,000-sample pair takes 23 ms). dtw-python (GPL) is a test oracle only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from dtaidistance import dtw as dtaidistance_dtw
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray

from analytics.metrics._validate import as_trace
from analytics.metrics.traces import (
    _SIGN_VALUES,
    _check_tol,
    _coincidences,
    _difference_signs,
    _onehot,
    _pair,
    sda_from_counts,
)

__all__ = [
    "DTWAlignment",
    "LagEstimate",
    "dtw_align",
    "estimate_lag",
    "remove_lags",
    "shift_trace",
    "windowed_sda",
]


class LagEstimate(NamedTuple):
    """A constant lag of a trace behind a reference."""

    samples: int
    """Lag in samples; positive = the trace lags (comes after) the reference."""
    seconds: float
    """``samples / rate_hz``."""
    correlation: float
    """Pearson correlation of the shifted trace with the reference at that lag."""


def estimate_lag(
    trace: ArrayLike, reference: ArrayLike, *, max_lag: float, rate_hz: float
) -> LagEstimate:
    """Constant lag of an annotation behind a reference, by maximum correlation.

    Every candidate lag ``L`` in ``-L_max..L_max`` (``L_max = round(max_lag * rate_hz)``)
    is scored on the same reference samples ``L_max .. n - L_max - 1``, so all candidates
    are compared on equal footing; ties go to the smallest ``abs(L)``.

    Correlation rather than MSE is maximised because it ignores the annotator's offset and
    scale (the perceptual bias the SDA paper models); on the shades-of-green data both give
    the same lags at 1 and 2 Hz. Task A: the lags equal the shifts of the authors' own
    2 Hz ``*_shift_aligned`` files for all ten annotators (mean 1.4 s) and of their 1 Hz
    files for eight (two differ by one sample, where their 1 Hz files say 2 s and their
    2 Hz files 1 s); the mean is 1.5 s at 1 Hz and 1.53 s on the 10 Hz release, the
    paper's "about 1.6 s". Task B lags only 0.3-0.4 s (the authors' task B files are not
    shifted at all), so the paper's "in both tasks" does not hold for the released data.

    Parameters
    ----------
    trace : array-like of shape (n_samples,)
        The annotation, no nan.
    reference : array-like of shape (n_reference,)
        Truth, stimulus feature or consensus trace starting at the same time and sampled at
        the same rate. Only the first ``min(n_samples, n_reference)`` samples are used.
    max_lag : float
        Largest lag to consider, in seconds (either direction).
    rate_hz : float
        Sampling rate of both traces.

    Returns
    -------
    LagEstimate
        ``samples``, ``seconds`` and the ``correlation`` reached.

    Raises
    ------
    ValueError
        On bad input, a window too short for the lag range (fewer than 3 compared samples),
        or when no lag gives a defined correlation (a constant trace or reference).

    Notes
    -----
    .. math::

        \\hat L = \\arg\\max_{|L| \\le L_{max}}
            r\\big((x_{t+L})_{t=L_{max}}^{n-L_{max}-1},\\,
                   (y_t)_{t=L_{max}}^{n-L_{max}-1}\\big)

    References
    ----------
    Mariooryad, S., & Busso, C. (2015). Correcting time-continuous emotional labels by
    modeling the reaction lag of evaluators. IEEE Transactions on Affective Computing, 6(2),
    97-108. https://doi.org/10.1109/TAFFC.2014.2334294

    Booth, B. M., & Narayanan, S. S. (2020). ICMI 2020, Section 3.2.
    https://doi.org/10.1145/3382507.3418860

    Examples
    --------
    >>> t = np.arange(60)
    >>> truth = np.sin(t / 5.0)
    >>> annotation = 0.5 + 0.3 * np.sin((t - 3) / 5.0)  # 3 samples late, rescaled
    >>> lag = estimate_lag(annotation, truth, max_lag=5, rate_hz=2)
    >>> lag.samples, lag.seconds, round(lag.correlation, 6)
    (3, 1.5, 1.0)
    """
    x = as_trace(trace, name="trace")
    ref = as_trace(reference, name="reference")
    rate_hz, max_lag = float(rate_hz), float(max_lag)
    if not (np.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"rate_hz must be > 0; got {rate_hz}")
    if not (np.isfinite(max_lag) and max_lag >= 0):
        raise ValueError(f"max_lag must be >= 0 seconds; got {max_lag}")
    n = min(x.size, ref.size)
    lag_max = round(max_lag * rate_hz)
    span = n - 2 * lag_max
    if span < 3:
        raise ValueError(
            f"traces of {n} common samples are too short for lags up to {lag_max} samples"
        )
    correlations = _lag_correlations(x[None, :n], ref[:n], lag_max)[0]
    if np.isnan(correlations).all():
        raise ValueError("no lag gives a defined correlation (constant trace or reference)")
    best = _best_lag(correlations[None])[0]
    return LagEstimate(
        samples=int(best - lag_max),
        seconds=float((best - lag_max) / rate_hz),
        correlation=float(correlations[best]),
    )


def _lag_correlations(
    rows: NDArray[np.float64], reference: NDArray[np.float64], lag_max: int
) -> NDArray[np.float64]:
    """Pearson correlation of every row shifted by each lag ``-lag_max..lag_max`` (column
    ``lag + lag_max``) with ``reference[lag_max : n - lag_max]``; nan where a window or the
    reference is constant. All rows and lags at once: one product of the sliding windows
    with the centred reference, window sums from cumulative sums."""
    n = rows.shape[1]
    span = n - 2 * lag_max
    y = reference[lag_max : n - lag_max]
    centred = y - y.mean()
    windows = sliding_window_view(rows, span, axis=1)  # (R, 2 lag_max + 1, span)
    cross = windows @ centred
    sums = np.cumsum(np.pad(rows, ((0, 0), (1, 0))), axis=1)
    squares = np.cumsum(np.pad(rows**2, ((0, 0), (1, 0))), axis=1)
    total = sums[:, span:] - sums[:, :-span]
    spread = (squares[:, span:] - squares[:, :-span]) - total**2 / span
    constant = (np.ptp(windows, axis=-1) == 0) | (np.ptp(y) == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation = cross / np.sqrt(np.clip(spread, 0.0, None) * (centred @ centred))
    return np.where(constant, np.nan, np.clip(correlation, -1.0, 1.0))


def _best_lag(correlations: NDArray[np.float64]) -> NDArray[np.intp]:
    """Column of the largest correlation of each row, ties to the smallest ``abs(lag)``
    (columns ``0 .. 2 L`` are lags ``-L .. L``); rows all nan give the middle column."""
    lag_max = correlations.shape[1] // 2
    order = np.argsort(np.abs(np.arange(-lag_max, lag_max + 1)), kind="stable")
    filled = np.where(np.isnan(correlations), -np.inf, correlations)
    return order[np.argmax(filled[:, order], axis=1)]


def shift_trace(trace: ArrayLike, lag_samples: int) -> NDArray[np.float64]:
    """Shift a trace by a constant lag, keeping its length.

    ``out[t] = trace[t + lag_samples]``: a positive lag (the trace lags the stimulus) moves
    the trace earlier. The samples shifted in at the edge repeat the nearest original sample
    (edge padding), so the result stays on the original time base; those ``abs(lag_samples)``
    padded samples are flat, so drop them before computing SDA if they matter.

    Parameters
    ----------
    trace : array-like of shape (n_samples,)
        The trace, no nan.
    lag_samples : int
        Shift in samples, ``abs(lag_samples) < n_samples``, e.g. ``estimate_lag(...).samples``.

    Returns
    -------
    ndarray of shape (n_samples,)
        The shifted trace.

    Notes
    -----
    .. math::

        \\tilde x_t = x_{\\min(\\max(t + L,\\ 0),\\ N - 1)}, \\qquad t = 0, \\dots, N - 1

    References
    ----------
    Booth, B. M., & Narayanan, S. S. (2020). ICMI 2020, Section 3.2.
    https://doi.org/10.1145/3382507.3418860

    Examples
    --------
    >>> shift_trace([1.0, 2.0, 3.0, 4.0, 5.0], 2)
    array([3., 4., 5., 5., 5.])
    >>> shift_trace([1.0, 2.0, 3.0, 4.0, 5.0], -1)
    array([1., 1., 2., 3., 4.])
    """
    x = as_trace(trace, name="trace")
    lag = int(lag_samples)
    if lag != lag_samples:
        raise ValueError(f"lag_samples must be an integer; got {lag_samples}")
    if abs(lag) >= x.size:
        raise ValueError(f"abs(lag_samples) must be below the trace length {x.size}; got {lag}")
    return x[np.clip(np.arange(x.size) + lag, 0, x.size - 1)]


_CONSENSUS_ROUNDS = 10
"""Most rounds of re-estimating lags against the shifted consensus (``remove_lags``)."""


class LagRemoval(NamedTuple):
    """Result of ``remove_lags``."""

    aligned: NDArray[np.float64]
    """``(n_annotators, stop - start)``: row k is ``traces[k, start + lag_k : stop + lag_k]``
    (all nan for a row that was not traced); no padded sample anywhere."""
    lags: NDArray[np.int64]
    """Lag of each row in samples (positive = behind the reference); 0 for untraced rows."""
    start: int
    """First kept sample on the reference's time base."""
    stop: int
    """One past the last kept sample."""


def remove_lags(
    traces: ArrayLike,
    *,
    max_lag: float,
    rate_hz: float,
    truth: ArrayLike | None = None,
) -> LagRemoval:
    r"""Remove each annotator's constant lag from an item's traces, keeping only real samples.

    Each traced row's lag is estimated (``estimate_lag``) against the truth when the item
    has one (a gold item). Otherwise against the consensus, the mean of the traced rows
    shifted by their current lags, re-estimated until the lags settle (at most
    ``_CONSENSUS_ROUNDS`` rounds, starting from no shift): the lags are then relative to the
    consensus, whose own delay is unknown without a truth. A row whose lag cannot be
    estimated (a constant trace) keeps lag 0. Every
    row is then shifted by its lag and all rows are cut to the samples that every shifted row
    really has: ``shift_trace`` would pad the ``abs(lag)`` samples shifted in at an edge with
    a repeated value, which SDA would count as "no change" and compare; here they are
    dropped instead.

    Parameters
    ----------
    traces : array-like of shape (n_annotators, n_samples)
        One item's traces at one rate; a row all nan = not traced. No other nan.
    max_lag : float
        Largest lag considered, in seconds, either way (capped so that at least 3 samples
        remain to correlate).
    rate_hz : float
        Sampling rate.
    truth : array-like of shape (n_truth,), optional
        The item's known signal (gold items). It may be shorter than the traces (a signal
        that covers only the start of the media): the lags are then estimated on the
        ``n_truth`` samples it covers, and the traces are still aligned over their whole
        length; samples past ``n_samples`` are ignored.

    Returns
    -------
    LagRemoval
        ``aligned`` (rows on the common window), ``lags``, ``start`` and ``stop``; crop a
        truth to ``truth[start:stop]`` to compare it with the aligned rows (with a shorter
        truth, with their first ``len(truth[start:stop])`` samples).

    Notes
    -----
    With lags :math:`L_k` and :math:`\tilde x_{k,t} = x_{k, t + L_k}`, sample :math:`t` is
    real for row k when :math:`0 \le t + L_k \le N - 1`; the kept window is the
    intersection over traced rows:

    .. math:: t \in \big[\max_k \max(0, -L_k),\ N - \max_k \max(0, L_k)\big)

    References
    ----------
    Mariooryad, S., & Busso, C. (2015). Correcting time-continuous emotional labels by
    modeling the reaction lag of evaluators. IEEE Transactions on Affective Computing, 6(2),
    97-108. https://doi.org/10.1109/TAFFC.2014.2334294

    Examples
    --------
    >>> t = np.arange(80)
    >>> truth = np.sin(t / 6.0)
    >>> traces = np.vstack([np.sin((t - 2) / 6.0), np.sin((t - 4) / 6.0)])
    >>> out = remove_lags(traces, truth=truth, max_lag=3, rate_hz=2)
    >>> out.lags.tolist(), out.start, out.stop, out.aligned.shape
    ([2, 4], 0, 76, (2, 76))
    >>> bool(np.allclose(out.aligned, truth[out.start : out.stop]))
    True
    """
    arr = np.asarray(traces, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"traces must be 2-D (annotators, samples); got shape {arr.shape}")
    traced = ~np.isnan(arr).all(axis=1)
    if np.isnan(arr[traced]).any():
        raise ValueError("a traced row holds nan; resample or interpolate first")
    n = arr.shape[1]
    reference = None if truth is None else as_trace(truth, name="truth")[:n]
    # the lags are estimated on the samples the reference covers (all of them without a truth)
    shared = n if reference is None else reference.size
    max_lag = min(float(max_lag), max(0, (shared - 3) // 2) / float(rate_hz))
    lags = np.zeros(arr.shape[0], dtype=np.int64)
    rows = np.flatnonzero(traced)
    lag_max = round(max_lag * float(rate_hz))
    for _ in range(_CONSENSUS_ROUNDS if reference is None else 1):
        if reference is None and rows.size < 2:
            break
        if reference is None:  # consensus: the mean of the rows shifted by their current lags
            target = np.mean([shift_trace(arr[k], int(lags[k])) for k in rows], axis=0)
        else:
            target = reference
        # a constant trace or reference has no lag to find: it keeps 0
        found = np.zeros_like(lags)
        found[rows] = _best_lag(_lag_correlations(arr[rows, :shared], target, lag_max)) - lag_max
        if np.array_equal(found, lags):
            break
        lags = found
    used = lags[traced]
    start = int(max(0, -used.min())) if used.size else 0
    stop = int(n - max(0, used.max())) if used.size else n
    index = np.arange(start, stop)[None, :] + lags[:, None]
    aligned = np.full((arr.shape[0], stop - start), np.nan)
    aligned[traced] = np.take_along_axis(arr[traced], index[traced], axis=1)
    return LagRemoval(aligned, lags, start, stop)


class DTWAlignment(NamedTuple):
    """Result of ``dtw_align``."""

    warped: NDArray[np.float64]
    """The trace on the reference's time base, shape ``(n_reference,)``."""
    cost: float
    """DTW distance: sqrt of the least summed squared difference along a path."""
    path: NDArray[np.int64]
    """Matched index pairs ``(i_trace, j_reference)``, shape ``(n_steps, 2)``."""


def dtw_align(trace: ArrayLike, reference: ArrayLike, *, window: int) -> DTWAlignment:
    """Warp a trace onto a reference's time base by DTW with a Sakoe-Chiba band.

    Parameters
    ----------
    trace : array-like of shape (n_samples,)
        The trace to warp, no nan.
    reference : array-like of shape (n_reference,)
        The reference (truth, another annotator, a consensus), no nan.
    window : int
        Band half-width in samples: only samples with ``abs(i - j) <= window`` may be
        matched (3 s at the trace's rate, e.g. 3 at 1 Hz, 30 at 10 Hz). For traces of
        unequal lengths n and m the band is widened by the difference on the longer
        trace's side, ``i - w - max(0, n - m) <= j <= i + w + max(0, m - n)``
        (dtaidistance's definition), so a path always exists.

    Returns
    -------
    DTWAlignment
        ``warped`` (shape ``(n_reference,)``: each reference sample gets the mean of the
        trace samples matched to it), ``cost`` (the DTW distance) and ``path``.

    Notes
    -----
    Symmetric steps without weights (``symmetric1``), squared local cost:

    .. math::

        D_{i,j} = (x_i - y_j)^2 + \\min(D_{i-1,j-1}, D_{i-1,j}, D_{i,j-1}),
        \\quad |i - j| \\le w, \\qquad \\mathrm{cost} = \\sqrt{D_{n-1,m-1}}

    .. math:: \\tilde x_j = \\operatorname{mean}\\{x_i : (i, j) \\in \\text{path}\\}

    Computed by dtaidistance's C routine (see the module docstring for the measurement).
    DTW repeats samples when it stretches a trace: the repeated values are flat steps, which
    SDA counts as "no change", so DTW-aligned SDA is noisier than shift-aligned SDA.

    References
    ----------
    Sakoe, H., & Chiba, S. (1978). Dynamic programming algorithm optimization for spoken word
    recognition. IEEE Transactions on Acoustics, Speech, and Signal Processing, 26(1), 43-49.
    https://doi.org/10.1109/TASSP.1978.1163055

    Examples
    --------
    >>> result = dtw_align([0, 0, 1, 2, 3, 3], [0, 1, 2, 3, 3, 3], window=2)
    >>> result.warped, result.cost
    (array([0., 1., 2., 3., 3., 3.]), 0.0)
    >>> result.path.shape[1], result.path[0].tolist(), result.path[-1].tolist()
    (2, [0, 0], [5, 5])
    """
    x = np.ascontiguousarray(as_trace(trace, name="trace"))
    ref = np.ascontiguousarray(as_trace(reference, name="reference"))
    w = int(window)
    if w != window or w < 0:
        raise ValueError(f"window must be a non-negative integer (samples); got {window}")
    # dtaidistance's ``window`` excludes its bound: window=w+1 allows abs(i - j) <= w.
    path_list, cost = dtaidistance_dtw.warping_path_fast(
        x, ref, window=w + 1, include_distance=True
    )
    path = np.asarray(path_list, dtype=np.int64)
    matched = np.bincount(path[:, 1], minlength=ref.size)
    warped = np.bincount(path[:, 1], weights=x[path[:, 0]], minlength=ref.size) / matched
    return DTWAlignment(warped=warped, cost=float(cost), path=path)


def windowed_sda(x: ArrayLike, y: ArrayLike, *, window: int, tol: float = 0.0) -> float:
    """SDA over the majority difference sign of consecutive windows (unaligned traces).

    The N - 1 forward differences are cut into consecutive blocks of ``window`` differences
    (the last block may be shorter). Each block's sign is the strict plurality of its
    difference signs; a tie between the most frequent signs gives 0 (no prevailing trend).
    SDA is then taken over the blocks.

    Parameters
    ----------
    x, y : array-like of shape (n_samples,)
        Two traces of the same stimulus at the same rate, ``n_samples >= 2``, no nan.
    window : int
        Differences per block, >= 1 (3-5 s: 3-5 at 1 Hz). ``window=1`` is plain ``sda``.
    tol : float, default 0.0
        Differences with ``abs(d) <= tol`` count as no change.

    Returns
    -------
    float
        SDA over the ``ceil((N - 1) / window)`` blocks, in [-1, 1].

    Notes
    -----
    .. math::

        \\bar s_b = \\operatorname*{plurality}_{t \\in B_b}
                    \\operatorname{sgn}(x_t - x_{t-1}), \\qquad
        \\mathrm{SDA}_w = \\frac{1}{n_B}\\sum_{b=1}^{n_B} \\delta(\\bar s_b, \\bar u_b)

    References
    ----------
    Booth, B. M., & Narayanan, S. S. (2020). ICMI 2020, Section 4.2 (majority voting within
    three- to five-second windows). https://doi.org/10.1145/3382507.3418860

    Examples
    --------
    Trace y is one sample late; step by step the two agree on 5 of 9 steps, block by block
    (3 steps each) on all three blocks:

    >>> x = [0, 1, 2, 3, 3, 3, 2, 1, 0, 0]
    >>> y = [0, 0, 1, 2, 3, 3, 3, 2, 1, 0]
    >>> from analytics.metrics.traces import sda
    >>> round(sda(x, y), 4), windowed_sda(x, y, window=3)
    (0.1111, 1.0)
    """
    w = int(window)
    if w != window or w < 1:
        raise ValueError(f"window must be a positive integer (differences); got {window}")
    signs = _difference_signs(_pair(x, y), _check_tol(tol))
    votes = np.add.reduceat(_onehot(signs), np.arange(0, signs.shape[1], w), axis=2)
    top = votes.max(axis=1, keepdims=True)
    unique_winner = (votes == top).sum(axis=1) == 1
    majority = np.where(unique_winner, _SIGN_VALUES[votes.argmax(axis=1)], 0).astype(np.int8)
    return float(sda_from_counts(_coincidences(majority)[0, 1]))
