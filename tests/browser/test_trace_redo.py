"""A finished trace after a reload: redrawn on the trace page, and traced again only when the
question allows it (a new recording; the finished one stays in the history). Desktop and phone.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from apps.annotations.models import Annotation, Assignment
from apps.continuous.models import TraceRecording
from apps.continuous.services import trace_chunk_store, trace_finish
from tests.browser.test_continuous import SECONDS, short_green_study, upload_gate  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP, PHONE = {"width": 1366, "height": 850}, {"width": 390, "height": 844}


def _traced(allow_redo: bool):
    """The short green study with the annotator's trace finished (a ramp), through the
    services the recorder's API uses."""
    study, question, annotator = short_green_study()
    question.settings = {**question.settings, "allow_redo": allow_redo}
    question.save()
    assignment = Assignment.objects.get(annotator=annotator)
    times = np.round(np.arange(0, SECONDS + 0.05, 0.5), 6)
    first = uuid.uuid4()
    trace_chunk_store(
        annotator=annotator,
        assignment=assignment,
        question=question,
        recording_uuid=first,
        sequence=0,
        times=list(times),
        values=list(times / SECONDS),
    )
    trace_finish(annotator=annotator, recording_uuid=first)
    url = f"/studies/{study.pk}/traces/{question.key}/record/{assignment.pk}/"
    return question, annotator, first, url


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_finished_trace_is_redrawn_and_traced_again(open_page, sign_in, screenshot, viewport):
    question, annotator, first, url = _traced(allow_redo=True)
    name = "phone" if viewport is PHONE else "desktop"
    page: Page = open_page(viewport=viewport)
    sign_in(page, annotator.username)
    page.goto(url)
    status = page.locator("[data-role=status]")
    expect(status).to_contain_text("your trace is saved and drawn below")
    expect(page.locator(".trace-plot")).to_have_attribute("data-points", str(SECONDS + 1))
    expect(page.get_by_role("link", name="Next item")).to_be_visible()
    again = page.get_by_role("button", name="Trace again")
    expect(again).to_be_enabled()
    screenshot(page, f"trace-redo-before-{name}")

    again.click()
    for _ in range(5):
        page.keyboard.press("PageUp")
        page.wait_for_timeout(200)
    expect(status).to_have_text("Trace saved. Thank you!", timeout=20_000)
    screenshot(page, f"trace-redo-after-{name}")
    recordings = list(TraceRecording.objects.filter(annotator=annotator).order_by("id"))
    assert [r.status for r in recordings] == ["finished", "finished"]
    assert recordings[0].uuid == first  # the earlier trace stays
    annotation = Annotation.objects.get(annotator=annotator, question=question)
    assert [r.value["trace"] for r in annotation.revisions.order_by("number")] == [
        str(first),
        str(recordings[1].uuid),
    ]


def test_without_redo_the_finished_trace_is_shown_and_cannot_be_redone(
    open_page, sign_in, screenshot
):
    _, annotator, _, url = _traced(allow_redo=False)
    page: Page = open_page(viewport=PHONE)
    sign_in(page, annotator.username)
    page.goto(url)
    expect(page.locator("[data-role=status]")).to_contain_text("does not allow tracing it again")
    expect(page.locator(".trace-plot")).to_have_attribute("data-points", str(SECONDS + 1))
    expect(page.get_by_role("button", name="Play")).to_be_disabled()
    expect(page.get_by_role("link", name="Next item")).to_be_visible()
    screenshot(page, "trace-no-redo-phone")
    assert TraceRecording.objects.filter(annotator=annotator).count() == 1
