"""The members page (issue #16, point 12): a new invitation link is shown whole, not cut off;
removing a member takes their access at once and keeps their answers; a revoked invitation's
link says so. On a desktop and on a phone."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1366, "height": 850}}


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_the_invitation_link_is_shown_whole(device, open_page, sign_in, screenshot):
    study, _ = running_study(n_items=2, n_annotators=1)
    page = open_page(**(PHONE if device == "phone" else DESKTOP))
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/annotators/")
    page.get_by_role("button", name="Create invitation link").click()
    field = page.locator("#invitation-link")
    expect(field).to_be_visible()
    screenshot(page, f"invitation-link-{device}")
    link = field.input_value()
    assert "/invite/" in link
    overflow = field.evaluate(
        "e => [e.scrollWidth - e.clientWidth, e.scrollHeight - e.clientHeight]"
    )
    assert overflow == [0, 0]  # nothing hidden sideways or below
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_a_removed_member_loses_access_at_once_and_keeps_their_answers(
    device, open_page, sign_in, screenshot
):
    study, (leaver, _) = running_study(n_items=4, n_annotators=2)
    question = study.questions.get()
    assignment = Assignment.objects.filter(annotator=leaver).first()
    annotations_submit(
        annotator=leaver,
        assignment=assignment,
        answers={question: question.labels.first().key},
        idempotency_key=uuid.uuid4(),
    )
    options = PHONE if device == "phone" else DESKTOP
    annotator = open_page(**options)
    annotator.set_default_timeout(30_000)
    sign_in(annotator, leaver.username)
    queue = f"/studies/{study.pk}/annotate/"
    assert annotator.goto(queue).status == 200

    manager = open_page(**options)
    manager.set_default_timeout(30_000)
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/annotators/")
    remove = manager.get_by_role("link", name=f"Remove {leaver.username}")
    box, table = remove.bounding_box(), manager.locator(".table-wrap").first.bounding_box()
    assert box["x"] + box["width"] <= table["x"] + table["width"]  # in sight, not scrolled off
    remove.click()
    expect(manager.get_by_role("heading", name=f"Remove {leaver.username} from")).to_be_visible()
    expect(manager.locator("main")).to_contain_text("Their 1 answer stays")
    screenshot(manager, f"member-remove-confirm-{device}")
    manager.get_by_role("button", name=f"Remove {leaver.username}").click()
    expect(manager.locator("#messages")).to_contain_text(
        f"{leaver.username} is no longer a member; their answers stay."
    )
    members = manager.locator("table").first
    expect(members).not_to_contain_text(leaver.username)
    screenshot(manager, f"member-removed-{device}")
    assert manager.evaluate("document.documentElement.scrollWidth") <= options["viewport"]["width"]

    # the open session of the removed annotator no longer reaches the study
    assert annotator.goto(queue).status == 404
    expect(annotator.get_by_role("heading", name="Page not found")).to_be_visible()
    assert Annotation.objects.filter(annotator=leaver, question=question).count() == 1


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_a_revoked_invitation_link_says_so(device, open_page, sign_in, screenshot):
    study, _ = running_study(n_items=2, n_annotators=1)
    options = PHONE if device == "phone" else DESKTOP
    manager = open_page(**options)
    manager.set_default_timeout(30_000)
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/annotators/")
    manager.get_by_role("button", name="Create invitation link").click()
    link = manager.locator("#invitation-link").input_value()
    manager.goto(f"/studies/{study.pk}/annotators/")  # the list of invitations, reloaded
    manager.get_by_role("button", name="Revoke this invitation").click()
    expect(manager.locator("#messages")).to_contain_text("Invitation revoked")
    expect(manager.locator("#invitation")).to_contain_text("revoked")
    screenshot(manager, f"invitation-revoked-list-{device}")

    visitor = open_page(**options)
    visitor.set_default_timeout(30_000)
    assert visitor.goto(link).status == 410
    expect(visitor.get_by_role("heading", name="This invitation was revoked")).to_be_visible()
    screenshot(visitor, f"invitation-revoked-link-{device}")
