"""Chunk validation, idempotent retries, resume, finishing into revisions (services)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.continuous.config import clean_trace_settings
from apps.continuous.models import TraceChunk, TraceRecording
from apps.continuous.selectors import recording_open, recording_samples
from apps.continuous.services import trace_finish
from tests.apps.continuous.conftest import AUDIO_SECONDS, make_trace_study

TEN_HZ = np.arange(0, 5, 0.1)


def _store_nothing(ts, annotator, item, *args, **kwargs) -> str:
    """Send a chunk that must be refused; return the message; check nothing was stored."""
    chunks, recordings = TraceChunk.objects.count(), TraceRecording.objects.count()
    with pytest.raises(ValidationError) as caught:
        ts.send(annotator, item, *args, **kwargs)
    assert TraceChunk.objects.count() == chunks
    assert TraceRecording.objects.count() == recordings
    return " ".join(m for ms in caught.value.message_dict.values() for m in ms)


@pytest.mark.parametrize(
    ("times", "values", "events", "reason"),
    [
        ([], [], [], "non-empty"),
        ([0, 0.1], [0.5], [], "equally long"),
        ([0, 0.1, 0.1], [0.5] * 3, [], "increase strictly"),
        ([0, 0.2, 0.1], [0.5] * 3, [], "increase strictly"),
        (
            [0, 0.1, 25.0],
            [0.5] * 3,
            [{"type": "seek", "index": 2, "time": 19.0}],
            "outside the media",
        ),
        ([-0.1, 0.0], [0.5] * 2, [], "outside the media"),
        ([0, 0.1], [0.5, 1.2], [], "outside the scale"),
        ([0, 0.1], [float("nan"), 0.5], [], "finite"),
        (np.arange(0, 1, 0.01), [0.5] * 100, [], "twice the recording rate"),
        ([0, 0.1, 3.0], [0.5] * 3, [], "gap of 2.90 s"),
        ([3.0, 3.1], [0.5] * 2, [], "gap of 3.00 s"),
        ([0, 0.1], [0.5] * 2, [{"type": "jump", "index": 1, "time": 0.1}], "unknown event"),
        ([0, 0.1], [0.5] * 2, [{"type": "seek", "index": 7, "time": 0.1}], "index between"),
    ],
)
def test_each_bad_first_chunk_is_refused_with_its_reason(
    trace_study, times, values, events, reason
):
    ts = trace_study
    message = _store_nothing(
        ts, ts.annotators[0], ts.audio_item, uuid.uuid4(), 0, times, values, events
    )
    assert reason in message


def test_pause_and_seek_are_refused_when_the_question_forbids_them(db):
    ts = make_trace_study(settings={"allow_pause": False, "allow_seek": False})
    annotator, item = ts.annotators[0], ts.audio_item
    pause = [{"type": "pause", "index": 1, "time": 0.1}]
    assert "does not allow pausing" in _store_nothing(
        ts, annotator, item, uuid.uuid4(), 0, [0, 0.1], [0.5, 0.5], pause
    )
    seek = [{"type": "seek", "index": 1, "time": 9.0}]
    assert "does not allow seeking" in _store_nothing(
        ts, annotator, item, uuid.uuid4(), 0, [0, 9.0], [0.5, 0.5], seek
    )


def test_a_gap_after_a_seek_is_accepted_and_chunk_numbers_must_increase(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    seek = [{"type": "seek", "index": 2, "time": 9.0}]
    receipt, created = ts.send(annotator, item, rec, 0, [0, 0.1, 9.0, 9.1], [0.5] * 4, seek)
    assert created
    assert receipt.next_sequence == 1
    assert receipt.last_time == pytest.approx(9.1)
    receipt, created = ts.send(annotator, item, rec, 2, [9.2], [0.5])  # a number may be skipped
    assert created
    assert receipt.next_sequence == 3
    assert "Expected chunk 3 or above, got 1" in _store_nothing(
        ts, annotator, item, rec, 1, [9.3], [0.5]
    )
    assert "increase strictly" in _store_nothing(ts, annotator, item, rec, 3, [9.3, 9.3], [0.5] * 2)
    assert "gap of" in _store_nothing(ts, annotator, item, rec, 3, [12.0], [0.5])


EIGHT_S = np.round(np.arange(0, 8, 0.1), 6)


def _stored(rec) -> tuple[np.ndarray, np.ndarray]:
    times, values, _ = recording_samples(TraceRecording.objects.get(uuid=rec))
    return times, values


@pytest.mark.parametrize("start", [40, 49], ids=["starts-earlier", "starts-at-the-last-sample"])
def test_a_chunk_that_overlaps_what_is_stored_is_trimmed_and_nothing_is_lost(trace_study, start):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, EIGHT_S[:50], np.full(50, 0.4))
    # A page that resumed from an older point re-sends 4.0 (or 4.9) to 7.9 s.
    resume = [{"type": "resume", "index": 0, "time": float(EIGHT_S[start])}]
    part = EIGHT_S[start:]
    receipt, created = ts.send(annotator, item, rec, 1, part, np.full(part.size, 0.9), resume)
    assert created
    assert (receipt.sequence, receipt.n_samples, receipt.next_sequence) == (1, 30, 2)
    assert receipt.last_time == pytest.approx(7.9)
    times, values = _stored(rec)
    assert np.array_equal(times, EIGHT_S)  # every moment once, in order
    assert values.tolist() == pytest.approx([0.4] * 50 + [0.9] * 30)  # the stored ones stay
    chunk = TraceChunk.objects.get(recording__uuid=rec, sequence=1)
    assert chunk.events == [{"type": "resume", "index": 0, "time": float(EIGHT_S[start])}]
    again = ts.send(annotator, item, rec, 1, part, np.full(part.size, 0.9), resume)
    assert again == (receipt, False)  # a retry of the trimmed chunk is a replay


def test_the_chunk_refused_in_issue_18_is_trimmed_and_stored(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    stored = np.round(np.arange(0.011, 8.12, 0.1), 6)  # the old page's last sample: 8.111 s
    ts.send(annotator, item, rec, 0, stored, np.full(stored.size, 0.3))
    late = np.round(np.arange(6.631, 10.0, 0.1), 6)  # the resumed page started at 5.4 s
    _, created = ts.send(annotator, item, rec, 1, late, np.full(late.size, 0.6))
    assert created
    times, _ = _stored(rec)
    assert np.all(np.diff(times) > 0)
    assert times[-1] == pytest.approx(9.931)
    assert np.diff(times).max() == pytest.approx(0.1, abs=1e-6)


def test_a_chunk_entirely_before_the_stored_end_is_a_no_op(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, EIGHT_S[:50], np.full(50, 0.4))
    receipt, created = ts.send(annotator, item, rec, 1, EIGHT_S[30:50], np.full(20, 0.9))
    assert not created
    assert (receipt.sequence, receipt.n_samples, receipt.next_sequence) == (1, 0, 1)
    assert receipt.last_time == pytest.approx(4.9)
    assert TraceChunk.objects.filter(recording__uuid=rec).count() == 1
    assert TraceRecording.objects.get(uuid=rec).n_samples == 50
    # The next chunk takes the number the receipt names, and continues after 4.9 s.
    receipt, created = ts.send(annotator, item, rec, 1, EIGHT_S[45:], np.full(35, 0.9))
    assert created
    assert np.array_equal(_stored(rec)[0], EIGHT_S)


@pytest.mark.parametrize("first", ["in-flight", "pagehide"])
def test_a_closing_page_loses_nothing_whichever_upload_lands_first(trace_study, first):
    """A page closes while chunk 1 is in flight; on ``pagehide`` it sends everything not
    acknowledged, chunk 1's samples included, as chunk 2. Either order of arrival stores every
    sample once."""
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, EIGHT_S[:30], np.full(30, 0.4))
    in_flight = (1, EIGHT_S[30:60], np.full(30, 0.5))
    merged = (2, EIGHT_S[30:], np.full(50, 0.5))
    if first == "in-flight":
        ts.send(annotator, item, rec, *in_flight)
        receipt, created = ts.send(annotator, item, rec, *merged)
        assert (created, receipt.n_samples) == (True, 20)  # trimmed to what is new
    else:
        assert ts.send(annotator, item, rec, *merged)[0].n_samples == 50
        assert "Expected chunk 3 or above, got 1" in _store_nothing(
            ts, annotator, item, rec, *in_flight
        )
    assert np.array_equal(_stored(rec)[0], EIGHT_S)


def test_an_overlap_before_a_seek_is_dropped_and_the_seek_still_re_records(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, EIGHT_S[:50], np.full(50, 0.4))
    seek = [{"type": "seek", "index": 2, "time": 2.0}]
    ts.send(annotator, item, rec, 1, [4.5, 4.8, 2.0, 2.1], [0.9] * 4, seek)
    chunk = TraceChunk.objects.get(recording__uuid=rec, sequence=1)
    assert chunk.segment_starts == [0]
    assert chunk.events == [{"type": "seek", "index": 0, "time": 2.0}]
    times, _, starts = recording_samples(TraceRecording.objects.get(uuid=rec))
    assert times[-2:].tolist() == [2.0, 2.1]
    assert starts == [50]


@pytest.mark.parametrize(
    ("times", "values", "reason"),
    [
        (EIGHT_S[40:60], [1.5] + [0.5] * 19, "outside the scale"),  # off-scale in the overlap
        (EIGHT_S[40:60], [0.5] * 19 + [-1], "outside the scale"),
        ([4.0, 4.5, 4.5, 5.0], [0.5] * 4, "increase strictly"),  # within the chunk
        ([4.0, 5.0, 4.95], [0.5] * 3, "increase strictly"),
        ([4.0, 8.0], [0.5] * 2, "gap of 3.10 s"),
        ([4.0, *np.arange(5.0, 5.5, 0.01)], [0.5] * 51, "twice the recording rate"),
        ([4.0, 25.0], [0.5] * 2, "outside the media"),
        ([4.0, float("inf")], [0.5] * 2, "finite"),
    ],
)
def test_an_overlapping_chunk_is_still_checked_and_a_bad_one_stores_nothing(
    trace_study, times, values, reason
):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, EIGHT_S[:50], np.full(50, 0.4))
    assert reason in _store_nothing(ts, annotator, item, rec, 1, times, values)
    assert TraceRecording.objects.get(uuid=rec).next_sequence == 1


def test_a_retried_chunk_is_stored_once_with_the_same_receipt(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    first = ts.send(annotator, item, rec, 0, TEN_HZ, np.full(50, 0.4))
    again = ts.send(annotator, item, rec, 0, TEN_HZ, np.full(50, 0.4))
    assert first == (again[0], True)
    assert again[1] is False
    assert TraceChunk.objects.count() == 1
    assert TraceRecording.objects.get(uuid=rec).n_samples == 50
    other = _store_nothing(ts, annotator, item, rec, 0, TEN_HZ, np.full(50, 0.6))
    assert "already stored with other samples" in other


def test_chunks_are_stored_compactly(trace_study):
    ts = trace_study
    ts.send(ts.annotators[0], ts.audio_item, uuid.uuid4(), 0, TEN_HZ, np.full(50, 0.4))
    chunk = TraceChunk.objects.get()
    assert len(chunk.times) == 50 * 8
    assert len(chunk.values) == 50 * 4


def test_a_recording_id_cannot_be_reused_by_another_annotator_or_item(trace_study):
    ts = trace_study
    rec = uuid.uuid4()
    ts.send(ts.annotators[0], ts.audio_item, rec, 0, [0, 0.1], [0.5, 0.5])
    with pytest.raises(ValidationError, match="another trace"):
        ts.send(ts.annotators[1], ts.audio_item, rec, 1, [0.2], [0.5])
    with pytest.raises(ValidationError, match="another trace"):
        ts.send(ts.annotators[0], ts.gold_item, rec, 1, [0.2], [0.5])


def test_an_assignment_of_someone_else_is_refused(trace_study):
    ts = trace_study
    other = ts.assignment(ts.annotators[1], ts.audio_item)
    from apps.continuous.services import trace_chunk_store

    with pytest.raises(PermissionDenied):
        trace_chunk_store(
            annotator=ts.annotators[0],
            assignment=other,
            question=ts.question,
            recording_uuid=uuid.uuid4(),
            sequence=0,
            times=[0.0],
            values=[0.5],
        )


def _record_whole(ts, annotator, item, rec, level: float) -> None:
    times = np.round(np.arange(0, AUDIO_SECONDS + 0.05, 0.1), 6)
    for sequence, start in enumerate(range(0, times.size, 50)):
        part = times[start : start + 50]
        ts.send(annotator, item, rec, sequence, part, np.full(part.size, level))


def test_an_interrupted_trace_resumes_where_the_server_stopped(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    ts.send(annotator, item, rec, 0, TEN_HZ, np.linspace(0.2, 0.6, 50))
    # The tab closes; a new page asks where to continue.
    state = recording_open(question=ts.question, item=item, annotator=annotator)
    assert state.uuid == rec
    assert state.next_sequence == 1
    assert state.last_time == pytest.approx(4.9)
    assert state.last_value == pytest.approx(0.6)
    rest = np.round(np.arange(5.0, AUDIO_SECONDS + 0.05, 0.1), 6)
    resume = [{"type": "resume", "index": 0, "time": state.last_time}]
    ts.send(annotator, item, rec, 1, rest, np.full(rest.size, 0.8), resume)
    revision, _ = trace_finish(annotator=annotator, recording_uuid=rec)
    recording = TraceRecording.objects.get(uuid=rec)
    assert recording.n_resampled == 21
    expected = np.concatenate([np.float32(np.linspace(0.2, 0.6, 50))[::10], np.full(16, 0.8)])
    assert np.array_equal(recording.trace(), expected.astype(np.float32).astype(float))
    assert revision.value == {"trace": str(rec), "rate_hz": 1.0, "n": 21}
    assert recording_open(question=ts.question, item=item, annotator=annotator) is None


def test_finishing_records_a_revision_and_re_recording_appends_one(db):
    ts = make_trace_study(settings={"allow_redo": True})
    annotator, item = ts.annotators[0], ts.audio_item
    first, second = uuid.uuid4(), uuid.uuid4()
    _record_whole(ts, annotator, item, first, 0.3)
    revision, created = trace_finish(annotator=annotator, recording_uuid=first)
    assert created
    assert trace_finish(annotator=annotator, recording_uuid=first) == (revision, False)  # a retry
    _record_whole(ts, annotator, item, second, 0.7)
    newer, _ = trace_finish(annotator=annotator, recording_uuid=second)
    annotation = Annotation.objects.get(question=ts.question, item=item, annotator=annotator)
    assert [r.number for r in annotation.revisions.all()] == [1, 2]
    assert annotation.current_revision == newer
    assert newer.value["trace"] == str(second)
    assert Assignment.objects.get(annotator=annotator, item=item).completed_at is not None
    assert "finished" in _store_nothing(ts, annotator, item, first, 9, [20.0], [0.5])


def test_a_finished_trace_is_redone_only_if_the_question_allows_it(trace_study):
    ts = trace_study
    annotator, item = ts.annotators[0], ts.audio_item
    _record_whole(ts, annotator, item, uuid.uuid4(), 0.3)
    trace_finish(annotator=annotator, recording_uuid=TraceRecording.objects.get().uuid)
    refused = _store_nothing(ts, annotator, item, uuid.uuid4(), 0, [0.0, 0.1], [0.5, 0.5])
    assert "does not allow tracing again" in refused
    assert TraceRecording.objects.count() == 1  # no new recording either


def test_nobody_can_claim_another_annotators_trace_as_their_answer(trace_study):
    ts = trace_study
    owner, other = ts.annotators
    rec = uuid.uuid4()
    _record_whole(ts, owner, ts.audio_item, rec, 0.3)
    pointer = trace_finish(annotator=owner, recording_uuid=rec)[0].value
    with pytest.raises(ValidationError, match="No finished trace"):
        annotations_submit(
            annotator=other,
            assignment=ts.assignment(other, ts.audio_item),
            answers={ts.question: pointer},
            idempotency_key=uuid.uuid4(),
        )
    assert not Annotation.objects.filter(annotator=other).exists()


def test_a_trace_that_stops_early_cannot_be_finished(trace_study):
    ts = trace_study
    rec = uuid.uuid4()
    ts.send(ts.annotators[0], ts.audio_item, rec, 0, TEN_HZ, np.full(50, 0.4))
    with pytest.raises(ValidationError, match=r"stops at 4\.9 s of 20\.0 s"):
        trace_finish(annotator=ts.annotators[0], recording_uuid=rec)
    with pytest.raises(PermissionDenied):
        trace_finish(annotator=ts.annotators[1], recording_uuid=rec)


def test_a_rewind_re_records_the_span_it_covers(trace_study):
    ts = trace_study
    annotator, item, rec = ts.annotators[0], ts.audio_item, uuid.uuid4()
    _record_whole(ts, annotator, item, rec, 0.3)
    seek = [{"type": "seek", "index": 0, "time": 5.0}]
    redo = np.round(np.arange(5.0, 8.05, 0.1), 6)
    ts.send(annotator, item, rec, 5, redo, np.full(redo.size, 0.9), seek)
    _times, _, starts = recording_samples(TraceRecording.objects.get(uuid=rec))
    assert starts == [201]
    trace_finish(annotator=annotator, recording_uuid=rec)
    trace = TraceRecording.objects.get(uuid=rec).trace()
    assert trace.tolist() == pytest.approx([0.3] * 5 + [0.9] * 4 + [0.3] * 12)


def test_settings_are_validated_and_completed():
    cleaned = clean_trace_settings({"recording_rate_hz": 20})
    assert cleaned["analysis_rate_hz"] == 1.0
    assert cleaned["orientation"] == "horizontal"
    with pytest.raises(ValidationError) as caught:
        clean_trace_settings(
            {"scale_min": 1, "scale_max": 0, "orientation": "diagonal", "colour": "red"}
        )
    errors = caught.value.message_dict
    assert errors["settings"] == ["unknown setting 'colour'"]
    assert errors["scale_max"] == ["scale_max must be above scale_min"]
    assert "orientation" in errors
    with pytest.raises(ValidationError, match="analysis_rate_hz"):
        clean_trace_settings({"analysis_rate_hz": 30})


def test_home_and_overview_link_the_trace_pages(client, trace_study):
    from django.urls import reverse

    ts = trace_study
    client.force_login(ts.annotators[0])
    html = client.get(reverse("studies:home")).content.decode()
    assert reverse("continuous:record_next", args=[ts.study.pk, "arousal"]) in html
    client.force_login(ts.study.created_by)
    html = client.get(reverse("studies:overview", args=[ts.study.pk])).content.decode()
    assert reverse("continuous:traces", args=[ts.study.pk, "arousal"]) in html


def test_the_traces_page_opens_on_the_first_item_with_traces(client, trace_study):
    """It opened on the study's first item, a text item with nothing to overlay, and said "No
    items with a known duration or a finished trace yet" beside ten finished traces."""
    from django.db.models import F
    from django.urls import reverse

    from apps.items.models import Item
    from tests.factories import ItemFactory

    ts = trace_study
    Item.objects.filter(study=ts.study).update(position=F("position") + 10)
    text = ItemFactory(study=ts.study, kind=Item.Kind.TEXT, text="A sentence.", position=0)
    ts.trace_gold(ts.annotators[0], lambda t: 0.5 + 0.4 * np.sin(t / 3.0))
    client.force_login(ts.study.created_by)
    page = client.get(reverse("continuous:traces", args=[ts.study.pk, "arousal"]))
    assert page.context["chosen"] == ts.gold_item  # the item with a finished trace
    assert text not in page.context["items"]  # nothing to trace on a text item
    assert "No items" not in page.content.decode()
