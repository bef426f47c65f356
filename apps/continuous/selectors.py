"""Reads of traces, gold signals and the calibration figures of annotators against the truth."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import Exists, OuterRef, Q, QuerySet
from numpy.typing import NDArray

from analytics.metrics.alignment import estimate_lag
from analytics.metrics.resample import merge_segments, tick_count
from analytics.metrics.traces import fit_monotonic_cubic, kappa_sda, sda, trend_agreement
from apps.annotations.models import Annotation, Assignment
from apps.continuous.config import trace_settings
from apps.continuous.models import TIME_DTYPE, VALUE_DTYPE, GoldSignal, TraceRecording, unpack
from apps.continuous.plotting import Overlay, green_strip, overlay, small_trace
from apps.items.models import Item
from apps.studies.models import Question, Study
from apps.studies.selectors import question_item_filter
from core.types import Account

GREEN_STIMULUS = "green"
MAX_LAG_S = 5.0
"""Largest reaction lag searched for, in seconds, either way."""
TRUTH_TOL = 1e-5
"""Dead band of comparisons with a truth: stored truths step by float noise where flat."""


MEDIA_KINDS = (Item.Kind.AUDIO, Item.Kind.VIDEO)
"""Item kinds with a media clock to trace against (besides gold items' canvas)."""
RESUME_POINTS = 1200
"""Most samples of the trace so far sent to a resuming page: about the plot's width in pixels."""


def gold_signal_for_item(item: Item) -> GoldSignal | None:
    """The known signal of a gold item (metadata ``{"signal": key}``), if any: the true
    answer its traces are compared with, whatever the item shows."""
    key = (item.metadata or {}).get("signal")
    return GoldSignal.objects.filter(key=key).first() if isinstance(key, str) else None


def green_signal_for_item(item: Item) -> GoldSignal | None:
    """The signal the recorder paints as the green calibration screen, if any.

    Only a gold item without audio or video of its own shows its known signal as the green
    screen; an audio or video item plays its media like every other item, and its known
    signal is only the answer its traces are scored against (a hidden attention check looks
    like the items around it).
    """
    return None if item.kind in MEDIA_KINDS else gold_signal_for_item(item)


def stimulus_duration(item: Item) -> float | None:
    """Seconds of the item's stimulus when the server knows it: the green screen's signal,
    else the metadata's ``duration`` (an audio or video item's own length, if given)."""
    signal = green_signal_for_item(item)
    if signal is not None:
        return signal.duration
    duration = (item.metadata or {}).get("duration")
    return float(duration) if isinstance(duration, int | float) and duration > 0 else None


def recording_open(
    *, question: Question, item: Item, annotator: Account, round: int = 1
) -> TraceRecording | None:
    """The annotator's unfinished recording of this item, to resume, if any (latest first)."""
    return (
        TraceRecording.objects.filter(
            question=question,
            item=item,
            annotator=annotator,
            round=round,
            status=TraceRecording.Status.RECORDING,
        )
        .order_by("-id")
        .first()
    )


def recording_samples(recording: TraceRecording) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """All stored samples of a recording in order, and where its segments start."""
    times: list[NDArray[np.float64]] = []
    values: list[NDArray[np.float64]] = []
    starts: list[int] = []
    offset = 0
    for chunk in recording.chunks.order_by("sequence"):
        chunk_times = unpack(chunk.times, TIME_DTYPE)
        times.append(chunk_times)
        values.append(unpack(chunk.values, VALUE_DTYPE))
        starts.extend(offset + i for i in chunk.segment_starts)
        offset += chunk_times.size
    if not times:
        return np.empty(0), np.empty(0), []
    return np.concatenate(times), np.concatenate(values), starts


@dataclass(frozen=True)
class ResumeState:
    """Where the annotator's unfinished recording of an item stops, for the recorder to go on.

    ``recording`` is ``None`` when there is nothing to resume (start a new recording).
    ``last_time`` and ``last_value`` are the last stored sample, exactly: the page seeks there.
    ``times`` and ``values`` are the trace so far (seeks merged), at most ``RESUME_POINTS``
    samples of it, evenly spread and always with its first and last, to redraw the plot; with
    nothing to resume, ``traced`` says they are the item's finished trace that counts (the
    page redraws it, and offers to trace again if the question allows it).
    """

    recording: uuid.UUID | None
    next_sequence: int
    last_time: float | None
    last_value: float | None
    duration: float | None
    finished: int
    times: list[float]
    values: list[float]
    traced: bool = False


def _for_display(times: NDArray, values: NDArray) -> tuple[list[float], list[float]]:
    """At most ``RESUME_POINTS`` of the samples, evenly spread over them, both ends kept."""
    if times.size > RESUME_POINTS:
        keep = np.unique(np.linspace(0, times.size - 1, RESUME_POINTS).round().astype(np.int64))
        times, values = times[keep], values[keep]
    return times.tolist(), values.round(6).tolist()


def trace_resume_state(*, question: Question, assignment: Assignment) -> ResumeState:
    """The resume state of ``assignment``'s annotator for ``question`` on its item."""
    lookup: dict[str, Any] = {
        "question": question,
        "item": assignment.item,
        "annotator": assignment.annotator,
        "round": assignment.round,
    }
    recording = recording_open(**lookup)
    finished = TraceRecording.objects.filter(
        **lookup, status=TraceRecording.Status.FINISHED
    ).count()
    if recording is None:
        duration = stimulus_duration(assignment.item)
        done = (
            current_traces(question=question, item=assignment.item)
            .filter(annotator=assignment.annotator, round=assignment.round)
            .first()
            if finished
            else None
        )
        if done is None:
            return ResumeState(None, 0, None, None, duration, finished, [], [])
        trace = done.trace()
        ticks = np.arange(trace.size) / (done.analysis_rate_hz or 1.0)
        return ResumeState(
            None, 0, None, None, duration, finished, *_for_display(ticks, trace), traced=True
        )
    times, values, starts = recording_samples(recording)
    shown_times, shown_values = _for_display(*merge_segments(times, values, segment_starts=starts))
    return ResumeState(
        recording=recording.uuid,
        next_sequence=recording.next_sequence,
        last_time=recording.last_time,
        last_value=recording.last_value,
        duration=recording.duration,
        finished=finished,
        times=shown_times,
        values=shown_values,
    )


def current_traces(*, question: Question, item: Item | None = None) -> QuerySet[TraceRecording]:
    """Finished recordings that are the current answer of their annotation (no retractions)."""
    live = Annotation.objects.filter(question=question, current_revision__value__isnull=False)
    if item is not None:
        live = live.filter(item=item)
    uuids = live.values_list("current_revision__value__trace", flat=True)
    return (
        TraceRecording.objects.filter(
            question=question, status=TraceRecording.Status.FINISHED, uuid__in=list(uuids)
        )
        .select_related("annotator", "item")
        .order_by("item__position", "item_id", "annotator__username", "round")
    )


def truth_at_rate(signal: GoldSignal, *, rate_hz: float) -> NDArray[np.float64]:
    """The gold signal on the ticks ``k / rate_hz`` of its duration (linear interpolation).

    The truth is a smooth target, not a slider: between its samples it is interpolated.
    """
    values = signal.array()
    ticks = np.arange(tick_count(duration=signal.duration, rate_hz=rate_hz)) / rate_hz
    return np.interp(ticks, np.arange(values.size) / signal.rate_hz, values)


@dataclass(frozen=True)
class ItemCalibration:
    """One annotator's trace of one gold item compared with the truth."""

    item_id: int
    item: str
    signal: str
    n: int
    lag_seconds: float
    lag_correlation: float
    cubic_r2: float
    cubic_increasing: bool
    sign_agreement: float
    f1: float
    mcc: float
    sda: float
    kappa_sda: float


@dataclass(frozen=True)
class AnnotatorCalibration:
    """An annotator's figures on every gold item they traced, and their means."""

    annotator_id: int
    username: str
    items: list[ItemCalibration] = field(default_factory=list)

    def _mean(self, name: str) -> float | None:
        """Mean over the items where the figure is defined; ``None`` where it never is."""
        defined = [v for row in self.items if not np.isnan(v := getattr(row, name))]
        return float(np.mean(defined)) if defined else None

    @property
    def lag_seconds(self) -> float | None:
        return self._mean("lag_seconds")

    @property
    def sda(self) -> float | None:
        return self._mean("sda")

    @property
    def kappa_sda(self) -> float | None:
        return self._mean("kappa_sda")

    @property
    def f1(self) -> float | None:
        return self._mean("f1")

    @property
    def mcc(self) -> float | None:
        return self._mean("mcc")

    @property
    def sign_agreement(self) -> float | None:
        return self._mean("sign_agreement")

    @property
    def cubic_r2(self) -> float | None:
        return self._mean("cubic_r2")


def item_calibration(
    trace: NDArray[np.float64],
    truth: NDArray[np.float64],
    *,
    rate_hz: float,
    tol: float,
    truth_tol: float,
) -> dict[str, Any]:
    """Lag, cubic distortion, trend agreement, SDA and kappa_SDA of a trace against a truth.

    The trace is first shifted by its constant lag (maximum correlation within ``MAX_LAG_S``,
    or less when the trace is too short for that search) on the samples it shares with the
    truth; the other figures are computed on the shifted trace, as in Booth & Narayanan
    (2020), over the samples it really has: the ``abs(lag)`` samples a shift pads at an edge
    are dropped, not compared (a padded repeat would count as "no change"). Figures the data
    cannot define are nan: the lag of a constant trace (then no shift is applied), the cubic
    fit of a trace with fewer than four distinct values.
    ``tol`` is the annotator's dead band (slider jitter, the question's SDA tolerance) and
    applies to the trace only; the truth's differences count as no change only below
    ``truth_tol`` (floating-point noise of a stored signal).
    """
    n = min(trace.size, truth.size)
    trace, truth = trace[:n], truth[:n]
    max_lag = min(MAX_LAG_S, ((n - 3) // 2) / rate_hz)
    lag_samples, lag_seconds, lag_correlation = 0, float("nan"), float("nan")
    if max_lag >= 0:
        try:
            lag = estimate_lag(trace, truth, max_lag=max_lag, rate_hz=rate_hz)
            lag_samples, lag_seconds, lag_correlation = lag
        except ValueError:  # a constant trace: no correlation at any lag
            pass
    # the shifted trace on the samples it really has: the |lag| samples a shift would pad at an
    # edge (a repeated value, "no change") are dropped, not compared (as remove_lags does)
    start, stop = max(0, -lag_samples), n - max(0, lag_samples)
    aligned, truth = trace[start + lag_samples : stop + lag_samples], truth[start:stop]
    try:
        fit = fit_monotonic_cubic(aligned, truth, direction="annotation_to_truth")
        cubic_r2, increasing = fit.r2, bool(fit.increasing)
    except ValueError:  # fewer than four distinct slider values
        cubic_r2, increasing = float("nan"), False
    trend = trend_agreement(aligned, truth, tol=tol, truth_tol=truth_tol)
    return {
        "n": n,
        "lag_seconds": lag_seconds,
        "lag_correlation": lag_correlation,
        "cubic_r2": cubic_r2,
        "cubic_increasing": increasing,
        "sign_agreement": trend.sign_agreement,
        "f1": trend.f1,
        "mcc": trend.mcc,
        "sda": sda(aligned, truth, tol=tol, y_tol=truth_tol),
        "kappa_sda": kappa_sda(aligned, truth, tol=tol, y_tol=truth_tol),
    }


def calibration_report(*, question: Question) -> list[AnnotatorCalibration]:
    """Per annotator, how their current traces of gold items follow the known truth.

    For every finished, current trace of an item whose metadata names a gold signal: the lag
    (constant shift, seconds), the R^2 and monotonicity of the cubic distortion fit, the trend
    agreement (sign agreement, F1 and MCC of forward-difference signs) and SDA / kappa_SDA of
    the lag-corrected trace against the truth, all at the question's analysis rate. The dead
    band of the traces is the question's SDA tolerance; the truth's is ``TRUTH_TOL``.
    Annotators are sorted by name.
    """
    settings = trace_settings(question)
    rate = settings.analysis_rate_hz
    tol = settings.sda_tolerance
    signals: dict[int, GoldSignal | None] = {}
    truths: dict[str, NDArray[np.float64]] = {}
    report: dict[int, AnnotatorCalibration] = {}
    for recording in current_traces(question=question):
        if recording.item_id not in signals:
            signals[recording.item_id] = gold_signal_for_item(recording.item)
        signal = signals[recording.item_id]
        if signal is None:
            continue
        if signal.key not in truths:
            truths[signal.key] = truth_at_rate(signal, rate_hz=rate)
        trace = recording.trace()
        if min(trace.size, truths[signal.key].size) < 2:
            continue  # a stimulus shorter than one analysis step has no trend
        figures = item_calibration(
            trace, truths[signal.key], rate_hz=rate, tol=tol, truth_tol=TRUTH_TOL
        )
        row = report.setdefault(
            recording.annotator_id,
            AnnotatorCalibration(recording.annotator_id, recording.annotator.get_username()),
        )
        row.items.append(
            ItemCalibration(
                item_id=recording.item_id,
                item=recording.item.external_id,
                signal=signal.key,
                **figures,
            )
        )
    return sorted(report.values(), key=lambda row: row.username)


@dataclass(frozen=True)
class ItemOverlay:
    """One item's current traces overlaid (with the truth of a gold item), for the
    ``continuous/traces.html#overlay`` fragment; ``plot`` is None without a known duration."""

    chosen: Item
    recordings: list[TraceRecording]
    gold: GoldSignal | None
    plot: Overlay | None


def item_overlay(*, question: Question, item: Item) -> ItemOverlay:
    """Every annotator's current trace of ``item`` and the item's gold truth, as SVG geometry
    on the question's scale (the manager's traces page and the quality dashboard)."""
    settings = trace_settings(question)
    recordings = list(current_traces(question=question, item=item))
    gold = gold_signal_for_item(item)
    duration = stimulus_duration(item)
    if duration is None and recordings:
        duration = recordings[0].duration
    plot = None
    if duration:
        plot = overlay(
            [(r.annotator.get_username(), r.trace()) for r in recordings],
            rate_hz=settings.analysis_rate_hz,
            duration=duration,
            scale=(settings.scale_min, settings.scale_max),
            truth=truth_at_rate(gold, rate_hz=settings.analysis_rate_hz) if gold else None,
        )
    return ItemOverlay(item, recordings, gold, plot)


@dataclass(frozen=True)
class ItemTrace:
    """One finished recording on the item page: ``current`` if it is its annotation's answer
    (a redone trace keeps the earlier one, no longer current); ``points`` its small plot."""

    recording: TraceRecording
    current: bool
    points: str


@dataclass(frozen=True)
class ItemTraces:
    """What the item page shows of a continuous question: every finished trace, oldest first
    per annotator, the truth of a gold item as a small plot and, for a green-screen item, the
    colours it showed (``strip`` is empty for an audio or video gold item: it plays its media)."""

    traces: list[ItemTrace]
    gold: GoldSignal | None
    truth: str
    strip: list[str]


def item_traces(*, question: Question, item: Item) -> ItemTraces:
    """Every finished trace of ``item`` for ``question`` (redone ones too), as small plots."""
    settings = trace_settings(question)
    scale = (settings.scale_min, settings.scale_max)
    current = set(current_traces(question=question, item=item).values_list("uuid", flat=True))
    recordings = (
        TraceRecording.objects.filter(
            question=question, item=item, status=TraceRecording.Status.FINISHED
        )
        .select_related("annotator")
        .order_by("annotator__username", "round", "created_at", "id")
    )
    gold = gold_signal_for_item(item)
    green = green_signal_for_item(item)
    duration = stimulus_duration(item)
    traces = [
        ItemTrace(
            recording,
            recording.uuid in current,
            small_trace(
                recording.trace(),
                rate_hz=recording.analysis_rate_hz or settings.analysis_rate_hz,
                duration=duration or recording.duration,
                scale=scale,
            ),
        )
        for recording in recordings
    ]
    truth, strip = "", []
    if gold is not None:
        values = truth_at_rate(gold, rate_hz=settings.analysis_rate_hz)
        truth = small_trace(
            values, rate_hz=settings.analysis_rate_hz, duration=gold.duration, scale=scale
        )
    if green is not None:
        strip = green_strip(green.array())
    return ItemTraces(traces, gold, truth, strip)


def continuous_questions(*, study: Study) -> QuerySet[Question]:
    """The study's continuous questions, each with its study loaded."""
    return Question.objects.select_related("study").filter(
        study=study, kind=Question.Kind.CONTINUOUS
    )


def trace_assignments(*, annotator: Account, question: Question) -> QuerySet[Assignment]:
    """Every assignment of the annotator in the question's study whose item the question
    applies to (its scope), with its item."""
    return Assignment.objects.select_related("item").filter(
        question_item_filter(question, prefix="item__"),
        study_id=question.study_id,
        annotator=annotator,
    )


def _traceable(prefix: str = "") -> Q:
    """Items that can be traced: audio, video, or a gold item naming a known signal
    (``prefix``: the path to the item, e.g. ``"item__"``)."""
    return Q(**{f"{prefix}kind__in": MEDIA_KINDS}) | Q(**{f"{prefix}metadata__has_key": "signal"})


def untraceable_items(*, question: Question) -> QuerySet[Item]:
    """The items the question's scope covers that cannot be traced (no audio, no video, no
    known signal): the recorder never offers them."""
    return Item.objects.filter(question_item_filter(question), study_id=question.study_id).exclude(
        _traceable()
    )


def overlay_items(*, question: Question) -> list[Item]:
    """The choices of the traces page: the study's traceable items in queue order (a text
    item has no trace to overlay)."""
    return list(
        Item.objects.filter(
            _traceable(), question_item_filter(question), study_id=question.study_id
        ).order_by("position", "id")
    )


def first_traced_item(*, question: Question, items: list[Item]) -> Item | None:
    """The item the traces page opens on: the first of ``items`` with a finished trace of the
    question, else the first of them."""
    traced = set(
        TraceRecording.objects.filter(question=question, status="finished").values_list(
            "item_id", flat=True
        )
    )
    return next((item for item in items if item.pk in traced), items[0] if items else None)


def traceable_assignments(*, annotator: Account, question: Question) -> QuerySet:
    """The annotator's assignments in the question's study whose item can be traced (audio,
    video, or a gold item naming a known signal) and is in the question's scope; in queue
    order."""
    return (
        Assignment.objects.filter(
            _traceable("item__"),
            question_item_filter(question, prefix="item__"),
            study_id=question.study_id,
            annotator=annotator,
        )
        .select_related("item")
        .order_by("round", "position", "id")
    )


def next_trace_assignment(*, annotator: Account, question: Question) -> Assignment | None:
    """The annotator's first traceable assignment without a current trace of ``question``."""
    traced = Annotation.objects.filter(
        question=question,
        annotator=annotator,
        item_id=OuterRef("item_id"),
        round=OuterRef("round"),
        current_revision__value__isnull=False,
    )
    assignments = traceable_assignments(annotator=annotator, question=question)
    return assignments.exclude(Exists(traced)).first()


def has_trace(*, assignment: Assignment, question: Question) -> bool:
    """Whether the assignment's item already has the annotator's current trace of ``question``
    (in the assignment's round)."""
    return Annotation.objects.filter(
        question=question,
        annotator_id=assignment.annotator_id,
        item_id=assignment.item_id,
        round=assignment.round,
        current_revision__value__isnull=False,
    ).exists()


def trace_progress(*, annotator: Account, question: Question) -> dict[str, int]:
    """``{"done": n, "total": n}``: the annotator's traceable assignments traced so far."""
    total = traceable_assignments(annotator=annotator, question=question).count()
    done = Annotation.objects.filter(
        question=question, annotator=annotator, current_revision__value__isnull=False
    ).count()
    return {"done": done, "total": total}
