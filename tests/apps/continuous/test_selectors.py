"""Reads of the recorder: where an interrupted trace resumes, and what the page redraws."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from apps.continuous import selectors
from apps.continuous.selectors import trace_resume_state
from apps.continuous.services import trace_finish
from tests.apps.continuous.conftest import AUDIO_SECONDS

TWENTY_S = np.round(np.arange(0, AUDIO_SECONDS + 0.05, 0.1), 6)


def _state(ts, annotator):
    return trace_resume_state(
        question=ts.question, assignment=ts.assignment(annotator, ts.audio_item)
    )


def test_without_a_recording_the_state_says_start_anew(trace_study):
    state = _state(trace_study, trace_study.annotators[0])
    assert state.recording is None
    assert (state.next_sequence, state.last_time, state.last_value) == (0, None, None)
    assert state.duration == AUDIO_SECONDS
    assert (state.times, state.values, state.finished) == ([], [], 0)


def test_the_state_is_the_servers_last_sample_and_the_trace_so_far(trace_study):
    ts = trace_study
    annotator, rec = ts.annotators[0], uuid.uuid4()
    values = np.linspace(0.2, 0.6, 50)
    ts.send(annotator, ts.audio_item, rec, 0, TWENTY_S[:50], values)
    ts.send(annotator, ts.audio_item, rec, 1, TWENTY_S[50:81], np.full(31, 0.7))
    state = _state(ts, annotator)
    assert state.recording == rec
    assert state.next_sequence == 2
    assert state.last_time == 8.0
    assert state.last_value == pytest.approx(0.7)
    assert state.times == pytest.approx(TWENTY_S[:81].tolist())
    assert state.values == pytest.approx(np.float32([*values, *[0.7] * 31]).tolist(), abs=1e-6)


def test_a_long_trace_is_downsampled_to_the_display_and_keeps_both_ends(trace_study, monkeypatch):
    ts = trace_study
    annotator, rec = ts.annotators[0], uuid.uuid4()
    monkeypatch.setattr(selectors, "RESUME_POINTS", 40)
    ts.send(annotator, ts.audio_item, rec, 0, TWENTY_S[:150], np.linspace(0, 1, 150))
    state = _state(ts, annotator)
    assert len(state.times) == len(state.values) == 40
    assert np.all(np.diff(state.times) > 0)
    assert (state.times[0], state.values[0]) == (0.0, 0.0)
    assert state.times[-1] == state.last_time == pytest.approx(14.9)
    assert state.values[-1] == pytest.approx(1.0)


def test_a_finished_recording_is_counted_and_not_resumed(trace_study):
    ts = trace_study
    annotator, rec = ts.annotators[0], uuid.uuid4()
    for sequence, start in enumerate(range(0, TWENTY_S.size, 50)):
        part = TWENTY_S[start : start + 50]
        ts.send(annotator, ts.audio_item, rec, sequence, part, np.full(part.size, 0.5))
    trace_finish(annotator=annotator, recording_uuid=rec)
    state = _state(ts, annotator)
    assert (state.recording, state.finished, state.traced) == (None, 1, True)
    # nothing to resume: the finished trace that counts, at the analysis rate, to redraw
    assert state.times == [float(t) for t in range(21)]
    assert state.values == [0.5] * 21
