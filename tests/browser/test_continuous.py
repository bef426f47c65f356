"""Continuous tracing in a real browser: play the calibration stimulus, move the slider with
the keyboard, reload mid-way (the trace resumes where the server stopped), finish, and check
what was stored; reload ten times at random moments, with uploads in flight and on a slow
network (issue #18). Screenshots of the recorder and the manager's overlay go to
test-artifacts/.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.db import connection
from playwright.sync_api import expect

from apps.annotations.models import Annotation, Assignment
from apps.continuous.green import green_datasets_dir
from apps.continuous.models import TraceChunk, TraceRecording
from apps.continuous.selectors import recording_samples
from apps.continuous.services import gold_signal_save
from apps.demo.continuous import QUESTION_KEY, load_continuous_demo, tone_sweep_wav
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import StudyFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECONDS = 6


class UploadGate:
    """Wraps the live server's WSGI app to hold back or slow down chunk uploads.

    Held at the server, an upload is in flight for the page that sent it, and so is a
    ``keepalive`` one sent on ``pagehide`` (which Playwright's ``page.route`` does not see).
    With in-memory SQLite the live server's threads share one connection, and two overlapping
    writes fail with "database table is locked", which no real database does (a SQLite file
    waits, PostgreSQL locks the recording's row): then requests are served one at a time.
    """

    def __init__(self, app, *, serialise: bool) -> None:
        self.app = app
        self.lock = threading.Lock() if serialise else contextlib.nullcontext()
        self.open = threading.Event()
        self.open.set()
        self.delay = 0.0
        self.arrived = 0

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"].endswith("/chunks/"):
            self.arrived += 1
            time.sleep(self.delay)
            self.open.wait(timeout=30)
        with self.lock:
            return self.app(environ, start_response)


@pytest.fixture(autouse=True)
def upload_gate(live_server):
    """Every test of this module runs behind an open :class:`UploadGate`."""
    httpd = live_server.thread.httpd
    app = httpd.get_app()
    gate = UploadGate(app, serialise=connection.vendor == "sqlite" and connection.is_in_memory_db())
    httpd.set_app(gate)
    yield gate
    gate.open.set()
    httpd.set_app(app)


def short_green_study(seconds: int = SECONDS):
    study = StudyFactory(name="Green calibration")
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key="green",
        prompt="How green is the screen?",
        settings={"label_min": "Dark", "label_max": "Bright green"},
    )
    t = np.arange(seconds + 1)
    gold_signal_save(key="short-ramp", rate_hz=1.0, values=np.clip(0.15 * t, 0, 1))
    Item.objects.create(
        study=study,
        external_id="green-short",
        text="Calibration: a green screen.",
        metadata={"stimulus": "green", "signal": "short-ramp"},
    )
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return study, question, annotator


def test_trace_with_keyboard_reload_resume_and_finish(open_page, sign_in, screenshot):
    study, question, annotator = short_green_study()
    page = open_page()
    page.on("console", lambda m: print("CONSOLE", m.type, m.text))
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    play = page.get_by_role("button", name="Play")
    expect(play).to_be_enabled()
    play.click()
    slider = page.get_by_role("slider", name="How green is the screen?")
    for _ in range(3):
        page.wait_for_timeout(300)
        page.keyboard.press("PageUp")  # +10 % each
    expect(page.locator("[data-trace-recorder]")).to_have_attribute(
        "data-saved-chunks", re.compile(r"[1-9]"), timeout=8000
    )
    screenshot(page, "continuous-recording")
    assert float(slider.input_value()) == pytest.approx(0.3)

    page.reload()  # the tab closes mid-way; the rest of the buffer goes out on pagehide
    resume = page.get_by_role("button", name="Continue from")
    expect(resume).to_be_enabled()
    expect(page.locator("[data-role=status]")).to_contain_text("continue from there")
    recording = TraceRecording.objects.get(annotator=annotator)
    assert recording.status == "recording"
    stopped_at = recording.last_time
    assert 2.0 < stopped_at < SECONDS
    screenshot(page, "continuous-resume")

    resume.click()
    for _ in range(4):
        page.keyboard.press("ArrowUp")  # +1 % each
    expect(page.locator("[data-role=status]")).to_have_text(
        "Trace saved. Thank you!", timeout=15_000
    )
    expect(page.get_by_role("link", name="Next item")).to_be_visible()
    screenshot(page, "continuous-finished")

    recording.refresh_from_db()
    assert recording.status == "finished"
    assert recording.n_resampled == SECONDS + 1
    trace = recording.trace()
    assert trace[0] < 0.1
    assert trace[-1] == pytest.approx(0.34, abs=1e-6)
    assert np.all(np.diff(trace) >= 0)  # the slider only went up
    events = [e["type"] for c in TraceChunk.objects.filter(recording=recording) for e in c.events]
    assert "resume" in events
    annotation = Annotation.objects.get(annotator=annotator, question=question)
    assert annotation.current_revision.value == {
        "trace": str(recording.uuid),
        "rate_hz": 1.0,
        "n": SECONDS + 1,
    }

    manager = open_page()
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/traces/{question.key}/")
    expect(manager.locator("svg.trace-overlay polyline")).to_have_count(2)  # trace + truth
    expect(manager.get_by_role("row", name=annotator.username)).to_be_visible()
    screenshot(manager, "continuous-manager")


RELOAD_SECONDS = 24
CHUNK_S = 3.0  # CHUNK_EVERY_MS of trace-recorder.js
TOLERANCE_S = 0.5
SLOW_NETWORK = {"latency": 300, "downloadThroughput": 200_000, "uploadThroughput": 5_000}
FAST_NETWORK = {"latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}


@pytest.mark.fuzz
def test_reloads_at_random_moments_lose_nothing_beyond_one_chunk(
    open_page, sign_in, screenshot, upload_gate
):
    """Issue #18: ten reloads at random moments (seeded): some while a chunk upload is held
    in flight at the server and lands only after the next page has asked where to resume
    (before or after Continue is pressed), some on a slow network. The stored trace must be
    strictly increasing and cover the stimulus without a gap longer than one chunk interval;
    a reload whose uploads had landed by the time Continue is pressed may cost at most one
    chunk interval of re-played time."""
    rng = random.Random(18)
    study, question, annotator = short_green_study(RELOAD_SECONDS)
    page = open_page()
    network = page.context.new_cdp_session(page)
    recorder = page.locator("[data-trace-recorder]")
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    page.get_by_role("button", name="Play").click()
    modes = ["plain"] * 4 + ["in-flight"] + ["in-flight late"] * 2 + ["slow"] * 3
    rng.shuffle(modes)
    replayed, late = {}, False
    for attempt, mode in enumerate(modes):
        conditions = SLOW_NETWORK if mode == "slow" else FAST_NETWORK
        network.send("Network.emulateNetworkConditions", {"offline": False, **conditions})
        upload_gate.delay = 1.0 if mode == "slow" else 0.0
        page.keyboard.press("PageUp")
        if late:  # the page goes on past its first upload after the old page's landed
            page.wait_for_timeout(rng.uniform(CHUNK_S + 0.5, CHUNK_S + 1.5) * 1000)
        late = mode == "in-flight late"
        if mode.startswith("in-flight"):
            upload_gate.open.clear()
            arrived = upload_gate.arrived
            deadline = time.monotonic() + CHUNK_S + 1
            while upload_gate.arrived == arrived and time.monotonic() < deadline:
                page.wait_for_timeout(50)
            assert upload_gate.arrived > arrived, "no chunk upload while playing"
            page.wait_for_timeout(rng.uniform(0, 500))
        else:
            page.wait_for_timeout(rng.uniform(300, 2000))
        played = recorder.evaluate("root => root.traceRecorder.media.currentTime")
        page.reload()
        # "Play" if the old page's first upload has not landed yet: Play then continues it.
        resume = page.get_by_role("button", name=re.compile(r"^(Continue from|Play)"))
        expect(resume).to_be_enabled(timeout=15_000)
        if attempt == 4:
            screenshot(page, "continuous-reload-resume")
        if mode == "in-flight":
            page.wait_for_timeout(rng.uniform(0, 500))
            upload_gate.open.set()  # the old page's uploads land before Continue
            page.wait_for_timeout(300)
        resume.click()
        expect(recorder).to_have_attribute("data-resumed-at", re.compile(r"\d"))
        resumed_at = float(recorder.get_attribute("data-resumed-at"))
        upload_gate.open.set()  # late: they land after the page resumed
        replayed[(attempt, mode)] = played - resumed_at
        print(f"reload {attempt} ({mode}): played to {played:.2f} s, resumed at {resumed_at:.2f} s")
    upload_gate.delay = 0.0
    network.send("Network.emulateNetworkConditions", {"offline": False, **FAST_NETWORK})
    expect(page.locator("[data-role=status]")).to_have_text(
        "Trace saved. Thank you!", timeout=RELOAD_SECONDS * 1000
    )

    recording = TraceRecording.objects.get(annotator=annotator, status="finished")
    times, values, starts = recording_samples(recording)
    gaps = np.diff(times)
    print(f"largest gap between stored samples: {gaps.max():.3f} s")
    assert starts == []
    assert np.all(gaps > 0)  # strictly increasing: nothing stored twice
    assert times[0] < TOLERANCE_S
    assert times[-1] == pytest.approx(RELOAD_SECONDS, abs=0.05)
    assert gaps.max() <= CHUNK_S + TOLERANCE_S
    on_time = {key: s for key, s in replayed.items() if "late" not in key[1]}
    assert max(on_time.values()) <= CHUNK_S + TOLERANCE_S, on_time
    slider = page.get_by_role("slider", name="How green is the screen?")
    assert values[-1] == pytest.approx(float(slider.input_value()))


@pytest.fixture
def tone_item(live_server):
    """A 3-second tone sweep in MEDIA_ROOT (served by the site's /media/ route), removed after."""
    study, question, annotator = short_green_study()
    Item.objects.filter(study=study).delete()
    item = Item(study=study, external_id="tone", kind=Item.Kind.AUDIO, metadata={"duration": 3.0})
    item.media.save("tone.wav", ContentFile(tone_sweep_wav(seconds=3.0)), save=False)
    item.save()
    Assignment.objects.create(study=study, item=item, annotator=annotator, position=0)
    yield study, question, annotator
    item.media.delete(save=False)


def test_audio_plays_against_the_media_clock_with_a_pause(tone_item, open_page, sign_in):
    study, question, annotator = tone_item
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    page.get_by_role("button", name="Play").click()
    page.keyboard.press("PageUp")
    page.wait_for_timeout(800)
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("[data-role=status]")).to_have_text("Paused.")
    paused_at = page.evaluate("document.querySelector('audio').currentTime")
    page.wait_for_timeout(1500)  # wall time passes, the media clock does not
    assert page.evaluate("document.querySelector('audio').currentTime") == paused_at
    page.keyboard.press("Space")  # plays again
    page.keyboard.press("PageUp")
    expect(page.locator("[data-role=status]")).to_have_text(
        "Trace saved. Thank you!", timeout=15_000
    )

    recording = TraceRecording.objects.get(annotator=annotator, status="finished")
    times, _, _ = recording_samples(recording)
    assert times[-1] == pytest.approx(3.0, abs=0.05)
    assert np.all(np.diff(times) > 0)
    assert np.median(np.diff(times)) == pytest.approx(0.1, abs=0.03)  # 10 Hz of media time
    events = [e["type"] for c in TraceChunk.objects.filter(recording=recording) for e in c.events]
    assert "pause" in events
    assert "play" in events
    trace = recording.trace()
    assert trace.size == 4
    assert trace[-1] == pytest.approx(0.2, abs=1e-6)


@pytest.mark.skipif(
    green_datasets_dir() is None, reason="no green_intensity_2016 data set in $STUDIO_DATASETS_DIR"
)
def test_demo_manager_page_overlays_the_real_traces(
    open_page, sign_in, screenshot, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path  # the demo's tone sweep (not played here)
    manager = UserFactory(manager=True)
    study = load_continuous_demo(manager=manager, annotators=[])
    page = open_page()
    sign_in(page, manager.username)
    page.goto(f"/studies/{study.pk}/traces/{QUESTION_KEY}/")
    expect(page.locator("svg.trace-overlay polyline")).to_have_count(11)  # ten + truth
    expect(page.locator("table.trace-calibration tbody tr")).to_have_count(10)
    screenshot(page, "continuous-demo-manager")
    # Choosing another item swaps the plot in place (htmx).
    page.get_by_label("Item", exact=True).select_option(label="green-TaskB (gold)")
    expect(page.locator("#overlay-title")).to_contain_text("green-TaskB")
