"""A gold-trace attention check among audio items, in a real browser (issue #13): a
participant of a trace study works through a package of audio clips, one of them a hidden
check with an uploaded true signal. Every recorder page plays its audio (no green screen),
the pages do not differ but in their texts and addresses, and the check's trace is scored
against the true signal.

Screenshots land in ``test-artifacts/``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from apps.annotations.models import Assignment
from apps.demo.continuous import tone_sweep_wav
from apps.items.models import Item
from apps.recruitment.models import Participant
from apps.recruitment.selectors import gold_accuracy
from apps.recruitment.services import gold_answer_set, item_gold_signal_set, recruitment_update
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.factories import StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SECONDS = 3.0


@pytest.fixture
def audio_package(live_server):
    """Three 3-second tones; ``tone-2`` is a hidden check with a true signal."""
    study = StudyFactory()
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key="q",
        prompt="How high is the tone?",
        settings={"allow_seek": True},
    )
    items = []
    for n in range(3):
        item = Item(study=study, external_id=f"tone-{n}", kind=Item.Kind.AUDIO, text=f"Clip {n}.")
        item.media.save(f"tone-{n}.wav", ContentFile(tone_sweep_wav(seconds=SECONDS)), save=False)
        item.position = n
        item.save()
        items.append(item)
    item_gold_signal_set(item=items[2], values=np.linspace(0.1, 0.9, 7), rate_hz=2.0)
    gold_answer_set(item=items[2], question=question, value={}, use="check")
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment = recruitment_update(
        study=study, is_open=True, items_per_participant=2, check_rate=0.5, trace_threshold=0.3
    )
    yield study, recruitment
    for item in items:
        item.media.delete(save=False)


def test_an_audio_check_plays_its_audio_like_the_other_clips(audio_package, open_page, screenshot):
    study, recruitment = audio_package
    page = open_page()
    page.goto(f"/join/{recruitment.token}/?PROLIFIC_PID=tone1&STUDY_ID=s1&SESSION_ID=x")
    expect(page.get_by_role("heading", name="You qualified")).to_be_visible(timeout=20_000)
    page.get_by_role("button", name="Start the task").click()
    participant = Participant.objects.get()
    package = Assignment.objects.filter(annotator=participant.user).count()
    assert package == 3  # two clips and the check

    shapes, stimuli = [], []
    for n in range(package):
        play = page.get_by_role("button", name="Play")
        expect(play).to_be_enabled(timeout=20_000)
        recorder = page.locator("[data-trace-recorder]")
        stimuli.append(
            (
                recorder.locator("audio").count(),
                recorder.locator("canvas.trace-stimulus").count(),
                page.locator(".trace-caption").inner_text(),
            )
        )
        html = recorder.evaluate("e => e.outerHTML")
        shapes.append(re.sub(r">[^<]*<", "><", re.sub(r'="[^"]*"', '=""', html)))
        if n == 2:
            screenshot(page, "recruitment-trace-check-audio")
        play.click()
        expect(page.locator("[data-role=status]")).to_have_text(
            "Trace saved. Thank you!", timeout=30_000
        )
        page.locator("[data-role=next] a").click()

    expect(page.get_by_role("heading", name="Thank you, you are done!")).to_be_visible(
        timeout=20_000
    )
    assert sorted(stimuli) == [(1, 0, "Clip 0."), (1, 0, "Clip 1."), (1, 0, "Clip 2.")]
    assert len(set(shapes)) == 1  # the check's page has the clips' markup
    accuracy = gold_accuracy(study=study)[participant.user_id]
    assert accuracy.checked == 1  # the check's trace was scored against the true signal
