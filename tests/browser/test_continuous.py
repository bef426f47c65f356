"""Continuous tracing in a real browser: play the calibration stimulus, move the slider with
the keyboard, reload mid-way (the trace resumes where the server stopped), finish, and check
what was stored. Screenshots of the recorder and the manager's overlay go to test-artifacts/.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from apps.annotations.models import Annotation, Assignment
from apps.continuous.demo import (
    QUESTION_KEY,
    datasets_dir,
    load_continuous_demo,
    tone_sweep_wav,
)
from apps.continuous.models import TraceChunk, TraceRecording
from apps.continuous.services import (
    gold_signal_save,
    recording_samples,
)
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import StudyFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECONDS = 6


def short_green_study():
    study = StudyFactory(name="Green calibration")
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key="green",
        prompt="How green is the screen?",
        settings={"label_min": "Dark", "label_max": "Bright green"},
    )
    t = np.arange(SECONDS + 1)
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


def saved_chunks(page) -> int:
    return int(page.locator("[data-trace-recorder]").get_attribute("data-saved-chunks") or 0)


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
    page.wait_for_function(
        "Number(document.querySelector('[data-trace-recorder]').dataset.savedChunks || 0) >= 1",
        timeout=8000,
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


@pytest.mark.skipif(datasets_dir() is None, reason="green_intensity data set not found")
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
