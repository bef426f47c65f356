"""Training on calibration pairs and on a gold trace, in a real browser: a participant of a
pairwise-only study compares a pair with a known order and sees the feedback, qualifies, is
sent to the comparisons and meets hidden check pairs among them; a participant of a trace
study follows a green stimulus with the slider and sees their kappa_SDA against the truth; on
an audio gold trace the participant hears the audio (the signal is only the known answer) and
the slider follows its clock.

Screenshots land in ``test-artifacts/``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from apps.continuous.services import gold_signal_save
from apps.demo.continuous import tone_sweep_wav
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.preferences.models import Judgement
from apps.recruitment.models import Participant, TrainingAnswer
from apps.recruitment.selectors import gold_accuracy
from apps.recruitment.services import gold_answer_set, item_gold_signal_set, recruitment_update
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.browser.test_preferences import WAIT_FOR_NEXT, shown_pair
from tests.factories import StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Status = Participant.Status
SENTENCES = ["The cat sat on the mat.", "Cat the mat on sat the.", "The dog slept.", "A bird."]


def open_study(kind: str, rows: list[dict], **settings):
    study = StudyFactory()
    extra = {"allow_seek": True} if kind == Question.Kind.CONTINUOUS else {}
    question = question_create(
        study=study, kind=kind, key="q", prompt="Which reads better?", settings=extra
    )
    items_bulk_create(study=study, rows=rows)
    study_set_status(study=study, status=Study.Status.RUNNING)
    options = {"items_per_participant": 3, "check_rate": 0.0, **settings}
    recruitment = recruitment_update(study=study, is_open=True, **options)
    return study, question, recruitment


def arrive(open_page, recruitment, pid: str):
    page = open_page()
    page.goto(f"/join/{recruitment.token}/?PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID=x")
    expect(page.get_by_role("heading", name="Training", exact=True)).to_be_visible()
    return page


def test_pairwise_training_shows_the_expected_order_and_qualifies(
    open_page, screenshot, pinned_pair_seed
):
    rows = [{"external_id": f"s-{n}", "text": text} for n, text in enumerate(SENTENCES)]
    rows += [  # a hidden check pair: "c-4" reads better than "c-5"
        {"external_id": "c-4", "text": "The sun rose."},
        {"external_id": "c-5", "text": "Rose sun the."},
    ]
    study, question, recruitment = open_study(
        Question.Kind.PAIRWISE, rows, qualification_threshold=0.5, check_rate=1.0
    )
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    gold_answer_set(
        item=items["s-0"],
        question=question,
        value={"versus": "s-1", "outcome": 1},
        reason="B scrambles the word order",
        use="training",
    )
    gold_answer_set(
        item=items["s-2"],
        question=question,
        value={"versus": "s-3", "outcome": 1},
        reason="B is not a sentence",
        use="training",
    )
    gold_answer_set(
        item=Item.objects.get(external_id="c-4"),
        question=question,
        value={"versus": "c-5", "outcome": 1},
        use="check",
    )
    page = arrive(open_page, recruitment, "pair1")
    expect(page.locator(".pair__item").first).to_contain_text("The cat sat on the mat.")
    expect(page.locator(".pair__item").last).to_contain_text("Cat the mat on sat the.")
    expect(page.locator("button.label-button", has_text="B is better")).to_be_visible()
    page.keyboard.press("ArrowRight")  # the comparison page's own key for "B is better"
    feedback = page.locator(".feedback")
    expect(feedback.locator("h2")).to_have_text("Not quite.")
    expect(feedback).to_contain_text("You answered B is better.")
    expect(feedback).to_contain_text("The expected answer was A is better")
    expect(feedback).to_contain_text("because B scrambles the word order")
    screenshot(page, "recruitment-pairwise-training-feedback")
    page.get_by_role("link", name="Continue").click()
    page.locator("button.label-button", has_text="A is better").click()
    expect(page.locator(".feedback h2")).to_have_text("Right!")
    page.get_by_role("link", name="Continue").click()
    expect(page.get_by_role("heading", name="You qualified")).to_be_visible()
    page.get_by_role("button", name="Start the task").click()
    expect(page).to_have_url(f"/studies/{study.pk}/compare/q/", timeout=20_000)
    participant = Participant.objects.get()
    assert (participant.status, participant.training_score) == (Status.WORKING, 0.5)

    # the work: at check rate 1, a hidden check pair comes before each scheduler pair, on
    # random sides, looking like any other pair
    shapes: dict[bool, set[str]] = {True: set(), False: set()}
    answers = 0
    while page.locator("[data-compare-form]").count():
        a, b = shown_pair(page)
        check = {a, b} == {"c-4", "c-5"}
        pair = page.locator(".pair").evaluate("e => e.outerHTML")
        shapes[check].add(re.sub(r'>[^<]*<|"[^"]*"', "", pair))  # markup without texts, values
        ticket = page.locator("input[name=ticket]").input_value()
        page.keyboard.press("ArrowRight" if b == "c-4" else "ArrowLeft")  # checks answered right
        page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)
        answers += 1
        assert answers < 20
    # the last answer sends the participant on to the completion code (before: the comparison
    # page said "ranking is complete" with a link back to the staff's home page)
    expect(page.get_by_role("heading", name="Thank you, you are done!")).to_be_visible(
        timeout=20_000
    )
    assert answers >= 4  # at least two checks met
    assert shapes[True] == shapes[False]
    assert "check" not in page.content().lower()
    stored = Judgement.objects.filter(annotator=participant.user)
    assert stored.checks().count() == stored.data().count() == answers / 2
    accuracy = gold_accuracy(study=study)[participant.user_id]
    assert (accuracy.correct, accuracy.checked) == (answers / 2, answers / 2)


def test_trace_training_scores_the_slider_against_the_true_signal(open_page, screenshot):
    gold_signal_save(key="ramp", rate_hz=2.0, values=np.linspace(0.1, 0.9, 7))  # 3 seconds
    rows = [
        {
            "external_id": "green",
            "text": "Follow the green.",
            "metadata": {"stimulus": "green", "signal": "ramp"},
        },
        {"external_id": "clip", "text": "A clip.", "metadata": {"duration": 3.0}},
    ]
    _, question, recruitment = open_study(
        Question.Kind.CONTINUOUS, rows, trace_threshold=0.3, qualification_threshold=1.0
    )
    gold_answer_set(
        item=Item.objects.get(external_id="green"),
        question=question,
        value={},
        reason="the green brightens steadily",
        use="training",
    )
    page = arrive(open_page, recruitment, "trace1")
    submit = page.get_by_role("button", name="Check my trace")
    expect(submit).to_be_disabled()
    screenshot(page, "recruitment-trace-training")
    page.get_by_role("button", name="Start").click()
    expect(submit).to_be_enabled(timeout=20_000)  # the stimulus played to its end
    submit.click()
    feedback = page.locator(".feedback")
    expect(feedback.locator("h2")).to_have_text("Not quite.")  # the slider never moved
    expect(feedback).to_contain_text("0.30 or more was expected")
    screenshot(page, "recruitment-trace-training-feedback")
    page.get_by_role("link", name="Continue").click()
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    assert Participant.objects.get().status == Status.SCREENED_OUT


@pytest.fixture
def audio_gold_trace(live_server):
    """A trace study whose training item is a 3-second tone with an uploaded true signal."""
    rows = [{"external_id": "clip", "text": "A clip.", "metadata": {"duration": 3.0}}]
    study, question, recruitment = open_study(
        Question.Kind.CONTINUOUS, rows, trace_threshold=0.3, qualification_threshold=1.0
    )
    item = Item(study=study, external_id="tone", kind=Item.Kind.AUDIO, text="A rising tone.")
    item.media.save("tone.wav", ContentFile(tone_sweep_wav(seconds=3.0)), save=False)
    item.save()
    item_gold_signal_set(item=item, values=np.linspace(0.1, 0.9, 7), rate_hz=2.0)
    gold_answer_set(item=item, question=question, value={}, use="training")
    yield recruitment
    item.media.delete(save=False)


def test_trace_training_on_an_audio_gold_trace_plays_the_audio(
    audio_gold_trace, open_page, screenshot
):
    page = arrive(open_page, audio_gold_trace, "trace2")
    stimulus = page.locator("audio[data-training-stimulus]")
    expect(stimulus).to_have_count(1)
    expect(page.locator("canvas.trace-stimulus")).to_have_count(0)  # no green screen
    expect(page.locator(".trace-caption")).to_have_text("A rising tone.")
    submit = page.get_by_role("button", name="Check my trace")
    page.get_by_role("button", name="Start").click()
    expect(submit).to_be_enabled(timeout=20_000)  # the audio played to its end
    assert stimulus.evaluate("a => a.ended")
    screenshot(page, "recruitment-trace-training-audio")
    submit.click()
    feedback = page.locator(".feedback")
    expect(feedback.locator("h2")).to_have_text("Not quite.")  # the slider never moved
    expect(feedback).to_contain_text("0.30 or more was expected")
    assert TrainingAnswer.objects.get().correct is False
