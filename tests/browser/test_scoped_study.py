"""A recruited participant of a mixed study in a real browser (issue 24, questions scoped to
items): a Likert question on sentences, a trace question on audio clips and a green
calibration screen, a pairwise question on sentences, each with its own instructions. The
package holds sentences and traced items; the participant labels only sentences, traces only
the clip and the calibration screen, compares only sentences, and each page shows its own
question's instructions, never another's. Screenshots land in ``test-artifacts/``.

Before scoping, this participant got the label queue alone (every item in it, the calibration
screen as the text "Calibration: follow the green"), with the study's one set of
instructions."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from apps.annotations.models import Assignment
from apps.demo.continuous import tone_sweep_wav
from apps.items.models import Item
from apps.preferences.models import Judgement
from apps.recruitment.models import GoldAnswer, Participant
from apps.recruitment.services import gold_answer_set, item_gold_signal_set, recruitment_update
from apps.studies.models import Question, Study
from apps.studies.services import question_create, question_update, study_set_status
from tests.factories import SENTIMENT_LABELS, StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SECONDS = 3.0
LIKERT_HELP = "Pick the sentiment of the sentence with a key."
TRACE_HELP = "Move the slider while the clip plays."
PAIR_HELP = "Choose the more positive sentence."
STUDY_HELP = "Press u to undo."


@pytest.fixture
def mixed(live_server):
    study = StudyFactory(instructions=STUDY_HELP)
    sentences = {"metadata": {"group": "sentence"}}
    question_create(
        study=study, key="likert", prompt="How positive is it?", ordered=True,
        labels=SENTIMENT_LABELS, scope=sentences, instructions=LIKERT_HELP,
    )  # fmt: skip
    question_create(
        study=study, key="arousal", prompt="Trace the arousal", kind=Question.Kind.CONTINUOUS,
        settings={"allow_seek": True}, scope={"metadata": {"group": ["clip", "calibration"]}},
        instructions=TRACE_HELP,
    )  # fmt: skip
    question_create(
        study=study, key="better", prompt="Which is more positive?",
        kind=Question.Kind.PAIRWISE, scope=sentences, instructions=PAIR_HELP,
    )  # fmt: skip
    items = [
        Item(
            study=study, external_id=f"s{n}", text=text, metadata={"group": "sentence"}, position=n
        )
        for n, text in enumerate(["What a lovely morning.", "The bus was late again."])
    ]
    items.append(
        Item(
            study=study,
            external_id="cal0",
            text="Calibration: follow the green",
            metadata={"group": "calibration"},
            position=2,
        )
    )
    items.append(
        Item(
            study=study,
            external_id="t0",
            text="Training: what a wonderful gift.",
            metadata={"group": "sentence"},
            position=5,
        )
    )
    for item in items:
        item.save()
    item_gold_signal_set(item=items[2], values=np.linspace(0.1, 0.9, 7), rate_hz=2.0)
    likert = study.questions.get(key="likert")
    gold_answer_set(
        item=items[3], question=likert, value={"label": "positive"},
        reason="the sentence praises the gift", use=GoldAnswer.Use.TRAINING,
    )  # fmt: skip
    clips = []
    for n in range(2):
        clip = Item(
            study=study, external_id=f"clip{n}", kind=Item.Kind.AUDIO, text=f"Clip {n}.",
            metadata={"group": "clip"}, position=3 + n,
        )  # fmt: skip
        clip.media.save(f"scope-{n}.wav", ContentFile(tone_sweep_wav(seconds=SECONDS)), save=False)
        clip.save()
        clips.append(clip)
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment = recruitment_update(
        study=study, is_open=True, items_per_participant=4, check_rate=0.0,
        completion_code="MIXED0K", consent_text="Three short tasks: label, trace, compare.",
    )  # fmt: skip
    yield study, recruitment
    for clip in clips:
        clip.media.delete(save=False)


def test_a_participant_gets_scoped_label_trace_and_pairwise_work(mixed, open_page, screenshot):
    _study, recruitment = mixed
    page = open_page(viewport={"width": 390, "height": 844})
    page.goto(f"/join/{recruitment.token}/?PROLIFIC_PID=mix1&STUDY_ID=s1&SESSION_ID=a1")
    expect(page.get_by_text("Three short tasks: label, trace, compare.")).to_be_visible()
    page.get_by_role("button", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Training", exact=True)).to_be_visible()
    expect(page.get_by_text("Training: what a wonderful gift.")).to_be_visible()
    page.locator("button.label-button", has_text="Positive").click()  # the task's own buttons
    expect(page.locator(".feedback h2")).to_have_text("Right!")
    page.get_by_role("link", name="Continue").click()
    expect(page.get_by_role("heading", name="You qualified")).to_be_visible(timeout=20_000)
    page.get_by_role("button", name="Start the task").click()
    participant = Participant.objects.get()
    package = set(
        Assignment.objects.filter(annotator=participant.user).values_list(
            "item__external_id", flat=True
        )
    )
    assert package == {"s0", "s1", "cal0", "clip0"}  # two sentences, two traced items

    # the label queue: sentences only, with the Likert question's instructions
    labelled = []
    for n in range(2):
        text = page.locator(".item__text")
        expect(text).to_be_visible()
        labelled.append(text.inner_text())
        expect(page.locator(".instructions")).to_contain_text(LIKERT_HELP)
        expect(page.get_by_text(STUDY_HELP)).to_have_count(0)
        if n == 0:
            screenshot(page, "scoped-label-queue")
        page.locator(".label-button", has_text="Neutral").click()
        if n == 0:
            expect(page.locator(".item__text")).not_to_have_text(labelled[0])
    assert sorted(labelled) == ["The bus was late again.", "What a lovely morning."]

    # traces: the calibration screen, then the clip, with the trace question's instructions
    stimuli = []
    for n in range(2):
        play = page.get_by_role("button", name="Play")
        expect(play).to_be_enabled(timeout=20_000)
        expect(page.locator(".instructions")).to_contain_text(TRACE_HELP)
        expect(page.get_by_text(LIKERT_HELP)).to_have_count(0)
        expect(page.get_by_role("link", name="My studies")).to_have_count(0)  # no staff chrome
        recorder = page.locator("[data-trace-recorder]")
        stimuli.append(
            (recorder.locator("audio").count(), recorder.locator("canvas.trace-stimulus").count())
        )
        screenshot(page, f"scoped-trace-{n}")
        play.click()
        expect(page.locator("[data-role=status]")).to_have_text(
            "Trace saved. Thank you!", timeout=30_000
        )
        page.locator("[data-role=next] a").click()
    assert sorted(stimuli) == [(0, 1), (1, 0)]  # the green screen and the clip

    # comparisons: the two sentences, with the pairwise question's instructions
    expect(page.get_by_role("button", name="A is better")).to_be_visible(timeout=20_000)
    expect(page.locator(".instructions")).to_contain_text(PAIR_HELP)
    expect(page.get_by_text(TRACE_HELP)).to_have_count(0)
    screenshot(page, "scoped-compare")
    page.get_by_role("button", name="A is better").click()

    expect(page.get_by_role("heading", name="Thank you, you are done!")).to_be_visible(
        timeout=20_000
    )
    expect(page.locator("[data-code]")).to_have_text("MIXED0K")
    screenshot(page, "scoped-done")
    judged = Judgement.objects.filter(annotator=participant.user)
    assert {j.item_a.external_id for j in judged} | {j.item_b.external_id for j in judged} == {
        "s0",
        "s1",
    }
    participant.refresh_from_db()
    assert participant.status == Participant.Status.DONE
    # the manager's payment file names the participant with their completion code
    manager = Client()
    manager.force_login(_study.created_by)
    payments = manager.get(reverse("recruitment:payments", args=[_study.pk]))
    text = b"".join(payments.streaming_content if payments.streaming else [payments.content])
    assert b"mix1" in text
    assert b"MIXED0K" in text


def test_the_manager_sees_what_each_question_covers_and_what_a_package_holds(
    mixed, open_page, sign_in, screenshot
):
    study, _ = mixed
    likert = study.questions.get(key="likert")
    question_update(question=likert, scope={})  # as before scoping: every item
    page = open_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/questions/{likert.pk}/edit/")
    expect(page.locator("#scope-coverage")).to_contain_text(
        "Applies to 6 items (every item): 3 text, 2 audio, 1 calibration."
    )
    expect(page.locator("#scope-mixed")).to_be_visible()
    screenshot(page, "scoped-editor-mixed-warning")
    page.get_by_label("Items tagged").fill("group = sentence")
    page.get_by_role("button", name="Save question").click()
    page.goto(f"/studies/{study.pk}/questions/{likert.pk}/edit/")
    # the two sentences and the training sentence
    expect(page.locator("#scope-coverage")).to_contain_text("Applies to 3 items")
    expect(page.locator("#scope-mixed")).to_have_count(0)
    screenshot(page, "scoped-editor-scoped")
    page.goto(f"/studies/{study.pk}/recruitment/")
    plan = page.locator("#package-plan")
    expect(plan).to_contain_text("for likert (labelled), better (compared)")
    expect(plan).to_contain_text("for arousal (traced)")
    screenshot(page, "scoped-recruitment-plan")
