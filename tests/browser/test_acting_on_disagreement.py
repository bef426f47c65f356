"""Issue #14 in the browser: a manager sorts the items by predicted disagreement on the study
overview, and invites a reviewer from the annotators page (who then opens the adjudication)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.adjudication.services import disagreement_forecast_train
from apps.annotations.importing import annotations_import_finished
from apps.studies.models import Membership
from tests.apps.adjudication.test_forecast import _text_study
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_manager_sorts_items_by_predicted_disagreement(open_page, sign_in, screenshot):
    study, _, _, _, records = _text_study()
    annotations_import_finished(study=study, records=records)
    forecast = disagreement_forecast_train(question=study.questions.get())
    assert forecast is not None
    expected = list(
        forecast.predictions.order_by("-value", "item__position").values_list(
            "item__external_id", flat=True
        )
    )
    page = open_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/")
    card = page.locator("#predicted-disagreement")
    expect(card).to_contain_text("4-level accuracy")
    expect(card.locator('[data-figure="cv-mse"]')).to_have_text(f"{forecast.cv_mse:.3f}")
    screenshot(page, "predicted-disagreement-card")
    page.locator("#sort-predicted").click()  # htmx swaps the coverage table
    coverage = page.locator("#coverage")
    expect(coverage.locator("th[aria-sort=descending]")).to_be_visible()
    rows = coverage.locator("tbody tr th[scope=row]")
    expect(rows.first).to_have_text(expected[0])
    shown = [text.strip() for text in rows.all_inner_texts()]
    assert shown[: len(expected)] == expected  # the predicted-hardest first, in order
    values = [
        float(v)
        for v in coverage.locator("td[data-predicted]").evaluate_all(
            "cells => cells.map(c => c.dataset.predicted).filter(v => v !== '')"
        )
    ]
    assert values == sorted(values, reverse=True)
    coverage.scroll_into_view_if_needed()
    screenshot(page, "predicted-disagreement-sorted")


def test_a_reviewer_is_invited_from_the_members_page(open_page, sign_in, screenshot):
    study, _, _, _, records = _text_study()
    annotations_import_finished(study=study, records=records)
    reviewer = UserFactory()
    page = open_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/annotators/")
    page.locator("#id_add-username").fill(reviewer.username)
    page.locator("#id_add-role").select_option("reviewer")
    screenshot(page, "reviewer-invite-form")
    page.get_by_role("button", name="Invite", exact=True).click()
    expect(page.get_by_text("(reviewer)")).to_be_visible()
    invitation = study.invitations.get()
    assert invitation.role == Membership.Role.REVIEWER

    guest = open_page()
    sign_in(guest, reviewer.username)
    guest.goto("/")
    guest.get_by_role("button", name="Join").click()
    guest.goto(f"/studies/{study.pk}/adjudicate/sentiment/")
    expect(guest.get_by_role("heading", level=1)).to_contain_text("Adjudicate")
    screenshot(guest, "reviewer-adjudication")
    assert study.memberships.get(user=reviewer).role == Membership.Role.REVIEWER
