"""Checks of one uploaded chunk of slider samples against its recording and the settings.

Pure functions over numbers: the service loads the recording's state and stores the chunk only
when :func:`chunk_check` passes, without the samples that overlap what is already stored. Every
rejection says why, in words an annotator's developer can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from numpy.typing import NDArray

from apps.continuous.config import TraceSettings

EVENT_TYPES = ("play", "pause", "seek", "resume", "end")
GAP_EXPLAINERS = {"pause", "play", "seek", "resume"}
MAX_RATE_FACTOR = 2.0
MAX_CHUNK_SECONDS = 120.0


@dataclass(frozen=True)
class Chunk:
    """One chunk as received: samples in recording order and the player events among them.

    An event's ``index`` is the index of the first sample taken after it (``len(times)`` when
    no sample followed it in this chunk).
    """

    times: NDArray[np.float64]
    values: NDArray[np.float64]
    events: list[dict[str, Any]]


def _fail(message: str) -> None:
    raise ValidationError({"chunk": message})


def _check_events(chunk: Chunk, *, settings: TraceSettings, duration: float) -> None:
    n = chunk.times.size
    for event in chunk.events:
        kind, index, time = event.get("type"), event.get("index"), event.get("time")
        if kind not in EVENT_TYPES:
            _fail(f"unknown event type {kind!r}; use one of {', '.join(EVENT_TYPES)}")
        if kind == "seek" and not settings.allow_seek:
            _fail("this question does not allow seeking, but the chunk reports a seek")
        if kind == "pause" and not settings.allow_pause:
            _fail("this question does not allow pausing, but the chunk reports a pause")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= n:
            _fail(f"a {kind} event needs an index between 0 and {n}")
        if not isinstance(time, int | float) or not 0 <= time <= duration:
            _fail(f"a {kind} event needs a media time between 0 and {duration:g} s")


@dataclass(frozen=True)
class CheckedChunk:
    """A chunk that passed :func:`chunk_check`: what of it to store.

    ``chunk`` is the received chunk without its ``overlap`` leading samples, which the stored
    samples already cover (event indices shifted to match, events among the dropped samples
    moved to index 0); ``segment_starts`` are the indices in ``chunk`` where a seek starts a
    new segment. An empty ``chunk`` means nothing in it is new.
    """

    chunk: Chunk
    segment_starts: list[int]
    overlap: int


def _overlap(times: NDArray[np.float64], *, head: int, previous_time: float | None) -> int:
    """How many leading samples (before index ``head``) lie at or before ``previous_time``."""
    if previous_time is None:
        return 0
    return int(np.searchsorted(times[:head], previous_time, side="right"))


def _without_prefix(chunk: Chunk, k: int) -> Chunk:
    events = [{**event, "index": max(0, event["index"] - k)} for event in chunk.events]
    return Chunk(times=chunk.times[k:], values=chunk.values[k:], events=events)


def chunk_check(
    chunk: Chunk,
    *,
    settings: TraceSettings,
    duration: float,
    previous_time: float | None,
) -> CheckedChunk:
    """Validate a chunk; return the part of it to store and where its seeks start segments.

    Samples at the head of the chunk (before any seek) at or before ``previous_time`` overlap
    what is stored: a page that resumed from an older point, or a chunk re-sent under a new
    number. They are dropped, not refused; the stored samples stay. The whole received chunk
    must still pass every other rule, so a bad chunk is refused even when its bad samples
    would have been dropped.

    Parameters
    ----------
    chunk
        The samples and events received.
    settings
        The question's settings (scale, rates, pause and seek permissions, largest gap).
    duration
        The stimulus duration in seconds: every time must lie in ``[0, duration]``.
    previous_time
        Media time of the recording's last stored sample, ``None`` before the first chunk
        (the trace must then start within ``max_gap_s`` of 0 unless an event explains it).

    Returns
    -------
    CheckedChunk
        The new samples (possibly none), their segment starts and the number dropped.

    Raises
    ------
    ValidationError
        Under ``chunk``, with the first reason found; sample indices are the received ones.
    """
    t, v = chunk.times, chunk.values
    n = t.size
    if n == 0 or n != v.size:
        _fail(f"times and values must be non-empty and equally long; got {n} and {v.size}")
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        _fail("times and values must be finite numbers")
    if n > MAX_CHUNK_SECONDS * settings.recording_rate_hz * MAX_RATE_FACTOR:
        _fail(f"a chunk holds at most {MAX_CHUNK_SECONDS:g} s of samples; got {n} samples")
    _check_events(chunk, settings=settings, duration=duration)
    outside = np.flatnonzero((t < 0) | (t > duration))
    if outside.size:
        i = int(outside[0])
        _fail(f"sample {i} is at {t[i]:.3f} s, outside the media (0 to {duration:.3f} s)")
    off_scale = np.flatnonzero((v < settings.scale_min) | (v > settings.scale_max))
    if off_scale.size:
        i = int(off_scale[0])
        _fail(
            f"sample {i} has value {v[i]:g}, outside the scale "
            f"({settings.scale_min:g} to {settings.scale_max:g})"
        )
    starts = sorted({e["index"] for e in chunk.events if e["type"] == "seek" and e["index"] < n})
    breaks = np.zeros(n, dtype=bool)
    breaks[starts] = True
    backwards = np.flatnonzero((np.diff(t) <= 0) & ~breaks[1:]) + 1
    if backwards.size:
        i = int(backwards[0])
        _fail(
            f"times must increase strictly: sample {i} ({t[i]:.3f} s) is not after "
            f"{t[i - 1]:.3f} s and no seek precedes it"
        )
    k = _overlap(t, head=starts[0] if starts else n, previous_time=previous_time)
    kept = _without_prefix(chunk, k)
    starts = [i - k for i in starts]
    if k == n:
        return CheckedChunk(chunk=kept, segment_starts=[], overlap=k)
    t = kept.times
    explained = {e["index"] for e in kept.events if e["type"] in GAP_EXPLAINERS}
    first_sample = previous_time is None
    before = np.concatenate([[0.0 if first_sample else previous_time], t[:-1]])
    steps = t - before
    breaks = breaks[k:]
    gaps = np.flatnonzero((steps > settings.max_gap_s) & ~breaks)
    gaps = np.array([i for i in gaps if int(i) not in explained], dtype=np.int64)
    if gaps.size:
        i = int(gaps[0])
        _fail(
            f"gap of {steps[i]:.2f} s before sample {i + k} (at {t[i]:.3f} s) with no pause or "
            f"seek event; at most {settings.max_gap_s:g} s is accepted"
        )
    continuous = ~breaks
    continuous[0] &= not first_sample
    span = float(steps[continuous].sum())
    pairs = int(continuous.sum())
    limit = MAX_RATE_FACTOR * settings.recording_rate_hz
    if pairs > 1 and (pairs - 1) > limit * span:
        _fail(
            f"{pairs} samples in {span:.2f} s of media time is above {limit:g} Hz, "
            f"twice the recording rate"
        )
    return CheckedChunk(chunk=kept, segment_starts=starts, overlap=k)
