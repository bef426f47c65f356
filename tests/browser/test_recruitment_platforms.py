"""Recruited participants in a real browser, the cases that cost money or trust: an MTurk HIT
from its frame to the submitted code, a second browser naming someone else's id, a study with
no place left, and a package whose time runs out mid-task.

Screenshots land in ``test-artifacts/`` for review.
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Assignment
from apps.recruitment.models import Participant
from tests.apps.recruitment.setup import recruiting_study
from tests.browser.test_recruitment import link, train

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Status = Participant.Status
SANDBOX = "https://workersandbox.mturk.com"


def answer_package(page, total: int, *, count: int | None = None) -> None:
    """Answer ``count`` items (all by default) of a package of ``total``, "Neutral" each."""
    for n in range(total if count is None else count):
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of {total} done")
        text = page.locator(".item__text").inner_text()
        page.locator(".label-button", has_text="Neutral").click()
        if n < total - 1:
            expect(page.locator(".item__text")).not_to_have_text(text)


def test_an_mturk_hit_from_its_frame_to_the_submitted_code(open_page, screenshot):
    _, recruitment = recruiting_study(
        platform="mturk", n_regular=4, n_checks=0, items_per_participant=3
    )
    hit = open_page()
    submitted: list[dict[str, list[str]]] = []

    def mturk(route) -> None:  # MTurk's externalSubmit endpoint, recorded
        submitted.append(parse_qs(route.request.post_data or ""))
        route.fulfill(status=200, body="<h1>HIT submitted</h1>", content_type="text/html")

    hit.route(f"{SANDBOX}/mturk/externalSubmit", mturk)
    query = f"workerId=W7Q&assignmentId=3A9&hitId=H1&turkSubmitTo={SANDBOX}"
    hit.goto(f"/join/{recruitment.token}/?{query}")
    expect(hit.get_by_role("heading", name="This HIT")).to_be_visible()
    screenshot(hit, "recruitment-mturk-frame")
    assert not Participant.objects.exists()  # the frame signs no one in

    with hit.context.expect_page() as opened:
        hit.get_by_role("link", name="Open the task in a new tab").click()
    task = opened.value
    train(task, ["Positive", "Positive"])
    task.get_by_role("button", name="Start the task").click()
    answer_package(task, 3)
    expect(task.get_by_role("heading", name="Thank you, you are done!")).to_be_visible()
    code = task.locator("[data-code]").inner_text()
    assert code == "C0MPLETE"
    screenshot(task, "recruitment-mturk-done")
    participant = Participant.objects.get()
    assert (participant.platform_id, participant.platform_session_id) == ("W7Q", "3A9")
    assert participant.status == Status.DONE

    hit.get_by_label("When the task shows your completion code, enter it here:").fill(code)
    hit.get_by_role("button", name="Submit the HIT").click()
    expect(hit.get_by_role("heading", name="HIT submitted")).to_be_visible()
    assert submitted == [{"assignmentId": ["3A9"], "completion_code": ["C0MPLETE"]}]


def test_someone_elses_id_in_another_browser_gets_no_work(open_page, screenshot):
    _, recruitment = recruiting_study(n_regular=4, n_checks=0, items_per_participant=4)
    victim = open_page()
    victim.goto(link(recruitment, "victim1"))
    train(victim, ["Positive", "Positive"])
    victim.get_by_role("button", name="Start the task").click()
    answer_package(victim, 4, count=1)

    # another browser names the same Prolific id, with a session id of its own
    intruder = open_page()
    response = intruder.goto(
        f"/join/{recruitment.token}/?PROLIFIC_PID=victim1&STUDY_ID=65a1&SESSION_ID=forged"
    )
    assert response is not None
    assert response.status == 409
    expect(
        intruder.get_by_role("heading", name="This participant id has already started")
    ).to_be_visible()
    screenshot(intruder, "recruitment-id-taken")
    intruder.goto("/")  # and is signed in as no one
    expect(intruder).to_have_url(re.compile("/accounts/login/"))
    participant = Participant.objects.get()
    done = Assignment.objects.filter(annotator=participant.user, completed_at__isnull=False)
    assert done.count() == 1  # the victim's work is untouched and still theirs
    expect(victim.locator(".progress__text").first).to_contain_text("1 of 4 done")


def test_a_full_study_gives_the_screen_out_code_before_consent(open_page, screenshot):
    _, recruitment = recruiting_study(
        n_regular=2, n_checks=0, items_per_participant=2, max_participants=1
    )
    first = open_page()
    first.goto(link(recruitment, "first1"))
    expect(first.get_by_role("heading", name="Training", exact=True)).to_be_visible()
    late = open_page()
    late.goto(link(recruitment, "late1"))
    expect(late.get_by_role("heading", name="This study is full")).to_be_visible()
    expect(late.locator("[data-code]")).to_have_text("SCREEN0UT")
    expect(late.locator("[data-return]")).to_have_attribute(
        "href", "https://app.prolific.com/submissions/complete?cc=SCREEN0UT"
    )
    expect(late.get_by_role("heading", name="Before you start")).to_have_count(0)
    screenshot(late, "recruitment-full")
    assert list(Participant.objects.values_list("platform_id", flat=True)) == ["first1"]


def test_time_running_out_mid_task_ends_the_visit_with_the_screen_out_code(open_page, screenshot):
    _, recruitment = recruiting_study(
        n_regular=4, n_checks=0, items_per_participant=4, time_limit_minutes=30
    )
    page = open_page()
    page.goto(link(recruitment, "slow1"))
    train(page, ["Positive", "Positive"])
    page.get_by_role("button", name="Start the task").click()
    answer_package(page, 4, count=2)
    participant = Participant.objects.get()
    # 31 minutes pass before the next key
    Participant.objects.filter(pk=participant.pk).update(
        started_at=participant.started_at - timedelta(minutes=31)
    )
    page.keyboard.press("2")  # Neutral
    expect(page.get_by_role("heading", name="Time is up")).to_be_visible()
    expect(page.locator("[data-code]")).to_have_text("SCREEN0UT")
    screenshot(page, "recruitment-time-up")
    participant.refresh_from_db()
    assert participant.status == Status.TIMED_OUT
    answered = Assignment.objects.filter(annotator=participant.user)
    # the two answers before the deadline stay; the late one was refused and the rest released
    assert answered.count() == answered.filter(completed_at__isnull=False).count() == 2
