"""The Content-Security-Policy in a real browser: the main pages work under it, with no
violation, no console error or warning and no uncaught script error.

Each page is used, not only loaded: the queue and the comparison are answered by keyboard
(htmx swaps), the recorder records, the dashboard takes a websocket update, an invitation link
is made and copied, and the API docs render Swagger UI and its operations. The pages come from
uvicorn as the studio runs it (websockets), with the policy the settings define.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from tests.apps.preferences.conftest import make_pairwise_study
from tests.browser.contexts import close_contexts
from tests.browser.test_continuous import short_green_study
from tests.browser.test_dashboard import _seed_answers
from tests.factories import UserFactory, running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolation(
    `${event.effectiveDirective} blocked ${event.blockedURI || "inline"} ` +
      `at ${event.sourceFile}:${event.lineNumber}`
  );
});
"""


@dataclass
class Watched:
    """A page, and every policy violation, console error or warning and page error it saw."""

    page: Page
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def watched(chromium: Browser, asgi_url: str) -> Iterator[Callable[[], Watched]]:
    contexts = []

    def open_() -> Watched:
        context = chromium.new_context(
            base_url=asgi_url,
            viewport={"width": 1280, "height": 900},
            permissions=["clipboard-read", "clipboard-write"],
        )
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        seen = Watched(page)
        page.expose_function("__cspViolation", lambda text: seen.problems.append(f"CSP {text}"))
        page.add_init_script(REPORT_VIOLATIONS)
        page.on("console", lambda message: seen.problems.extend(_complaint(message)))
        page.on("pageerror", lambda error: seen.problems.append(f"page error: {error}"))
        return seen

    yield open_
    close_contexts(contexts)


def _complaint(message: ConsoleMessage) -> list[str]:
    """A console error or warning, but the browser's own request for /favicon.ico (none)."""
    if message.type not in ("error", "warning"):
        return []
    if message.location.get("url", "").endswith("/favicon.ico"):
        return []
    return [f"console {message.type}: {message.text} ({message.location.get('url')})"]


def seed_answers(study, annotators) -> None:
    """Every assignment of ``annotators`` answered with the first label."""
    question = study.questions.get()
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user, round=1):
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: "negative"},
                idempotency_key=uuid.uuid4(),
            )


def test_queue_by_keyboard_and_the_live_dashboard(watched, sign_in):
    study, annotators = running_study(n_items=8, n_annotators=3)
    seed_answers(study, annotators[:2])
    manager = watched()
    sign_in(manager.page, study.created_by.username)
    manager.page.goto(f"/studies/{study.pk}/")
    manager.page.goto(f"/studies/{study.pk}/quality/")
    ratings = manager.page.locator("#quality-summary dd").nth(1)
    expect(ratings).to_have_text("16")
    expect(manager.page.locator("[ws-connect]")).to_have_count(1)

    annotator = watched()
    sign_in(annotator.page, annotators[2].username)
    annotator.page.goto(f"/studies/{study.pk}/annotate/")
    for n, key in enumerate(["1", "2", "3"], start=1):
        annotator.page.keyboard.press(key)
        expect(annotator.page.locator(".progress__text").first).to_contain_text(f"{n} of 8 done")
        expect(ratings).to_have_text(str(16 + n))  # pushed over the websocket
    annotator.page.keyboard.press("u")
    expect(annotator.page.locator("#messages")).to_contain_text("Undone: ")
    assert manager.problems == []
    assert annotator.problems == []


def test_comparison_by_keyboard_and_results(watched, sign_in):
    setup = make_pairwise_study(
        n_items=4, n_annotators=1, settings={"calibration_triplets": 0, "audit_rate": 0.0}
    )
    annotator = watched()
    sign_in(annotator.page, setup.annotators[0].username)
    annotator.page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    for _ in range(2):
        ticket = annotator.page.locator("input[name=ticket]")
        before = ticket.input_value()
        annotator.page.keyboard.press("ArrowLeft")
        expect(ticket).not_to_have_value(before)  # the next pair, swapped in by htmx
        # keys pressed before htmx has settled the pair in are dropped (preferences.js)
        busy = annotator.page.locator(".htmx-request, .htmx-swapping, .htmx-settling")
        expect(busy).to_have_count(0)
    manager = watched()
    sign_in(manager.page, setup.manager.username)
    manager.page.goto(f"/studies/{setup.study.pk}/preferences/{setup.question.key}/")
    expect(manager.page.get_by_role("heading", name="Scores")).to_be_visible()
    assert annotator.problems == []
    assert manager.problems == []


def test_recorder_and_trace_overlay(watched, sign_in):
    study, question, annotator_user = short_green_study()
    annotator = watched()
    sign_in(annotator.page, annotator_user.username)
    annotator.page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    play = annotator.page.get_by_role("button", name="Play")
    expect(play).to_be_enabled()
    play.click()
    for _ in range(3):
        annotator.page.wait_for_timeout(300)
        annotator.page.keyboard.press("PageUp")
    recorder = annotator.page.locator("[data-trace-recorder]")
    expect(recorder).to_have_attribute("data-saved-chunks", re.compile("[1-9]"), timeout=8000)
    # the recording stops before the manager's page reads it: on SQLite's shared in-memory test
    # database a chunk's write still open locks the table for that read ("database table is
    # locked", seen in CI on a slow machine)
    close_contexts([annotator.page.context])
    manager = watched()
    sign_in(manager.page, study.created_by.username)
    manager.page.goto(f"/studies/{study.pk}/traces/{question.key}/")
    expect(manager.page.locator("svg.trace-overlay")).to_be_visible()
    assert annotator.problems == []
    assert manager.problems == []


def test_invitation_link_is_made_and_copied(watched, sign_in):
    study, _ = running_study(n_items=2, n_annotators=1)
    manager = watched()
    sign_in(manager.page, study.created_by.username)
    manager.page.goto(f"/studies/{study.pk}/annotators/")
    manager.page.get_by_role("button", name="Create invitation link").click()
    link = manager.page.locator("#invitation-link")
    expect(link).to_be_visible()
    copy = manager.page.locator("button[data-copy]")
    expect(copy).to_have_text("Copy")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert manager.page.evaluate("navigator.clipboard.readText()") == link.input_value()
    assert manager.problems == []


def test_api_docs_render_swagger_ui(watched, sign_in):
    docs = watched()
    sign_in(docs.page, UserFactory().username)  # the docs are for signed-in users
    docs.page.goto("/api/docs/")
    expect(docs.page.locator(".swagger-ui .info .title")).to_contain_text("Annotation Studio API")
    expect(docs.page.locator(".opblock").first).to_be_visible()
    docs.page.locator(".opblock-summary").first.click()
    expect(docs.page.locator(".opblock-body").first).to_be_visible()
    assert docs.problems == []


def test_manager_pages_with_a_live_push_and_htmx_swaps(watched, sign_in):
    """Issue #27, point 9: the dashboard taking a push while an Exclude form is open, then
    excluding and undoing (htmx swaps), the items list filtered (a swap), adjudication moving
    to another item (a swap), and the recruitment page, all without a violation."""
    study, annotators = running_study(n_items=30, n_annotators=4)
    _seed_answers(study, annotators, held_back=1)
    question = study.questions.get()
    spammer = annotators[-1].username
    manager = watched()
    manager.page.set_default_timeout(30_000)
    sign_in(manager.page, study.created_by.username)
    manager.page.goto(f"/studies/{study.pk}/quality/")
    ratings = manager.page.locator("#quality-summary dd").nth(1)
    expect(ratings).to_have_text("119")
    expect(manager.page.locator("[ws-connect]")).to_have_count(1)
    row = manager.page.locator("#quality-annotators tbody", has_text=spammer)
    row.locator("summary").click()
    row.get_by_label(f"Why exclude {spammer}?").fill("labels at random")

    annotator = watched()
    sign_in(annotator.page, annotators[0].username)
    annotator.page.goto(f"/studies/{study.pk}/annotate/")
    annotator.page.keyboard.press("2")
    expect(ratings).to_have_text("120")  # pushed over the websocket, the form kept open
    row.get_by_role("button", name=f"Confirm exclusion of {spammer}").click()
    expect(row.locator("th")).to_contain_text("excluded")  # the table swapped by htmx
    row.get_by_role("button", name=f"Undo exclusion of {spammer}").click()
    expect(row.locator("th")).not_to_contain_text("excluded")

    manager.page.goto(f"/studies/{study.pk}/items/")
    results = manager.page.locator("#item-results")
    manager.page.get_by_label("Disputed").check()
    expect(manager.page).to_have_url(re.compile("disputed=on"))
    expect(results).to_be_visible()

    manager.page.goto(f"/studies/{study.pk}/adjudicate/{question.key}/")
    links = manager.page.locator(".adjudication__list a")
    expect(links.first).to_be_visible()
    links.nth(1).click()
    expect(manager.page.locator(".adjudication tr.is-current")).to_have_count(1)

    manager.page.goto(f"/studies/{study.pk}/recruitment/")
    expect(manager.page.get_by_role("heading", level=1)).to_be_visible()
    assert manager.problems == []
    assert annotator.problems == []
