"""The quality dashboard with its indicator intervals, as a manager sees it (screenshot kept in
test-artifacts/dashboard-intervals.png)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from analytics.pipeline import quality_rebuild
from tests.browser.test_dashboard import _seed_answers
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_dashboard_shows_intervals_evidence_and_freshness(open_page, sign_in, screenshot, settings):
    settings.QUALITY_MIN_EVIDENCE = 20
    settings.QUALITY_INTERVAL_SECONDS = 120
    study, annotators = running_study(n_items=40, n_annotators=5)
    _seed_answers(study, annotators)
    quality_rebuild(question_id=study.questions.get().pk)  # a rebuild recomputes the intervals
    page = open_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/quality/")
    table = page.locator("#quality-annotators")
    interval = re.compile(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]")
    expect(table).to_contain_text(interval)
    expect(table).to_contain_text("40 items")
    expect(page.locator(".quality-intervals")).to_contain_text(
        re.compile(r"intervals from (just now|1 min ago), 200 answers")
    )
    expect(page.locator("#quality-summary")).to_contain_text(interval)  # alpha
    expect(page.locator("body")).to_contain_text(
        re.compile(r"kappa with others -?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\], below")
    )
    # error bars: one chart per indicator with intervals, the kappa floor drawn as a line
    charts = page.locator("#quality-intervals svg.interval-plot")
    expect(charts.first).to_be_visible(timeout=15_000)
    expect(page.locator("#quality-intervals h3")).to_contain_text(
        ["Kappa with others", "Mean AAD", "Dawid-Skene competence"]
    )
    expect(page.locator("#quality-intervals .interval-floor")).to_have_count(1)
    expect(page.locator("#quality-intervals .errorbar--flagged").first).to_be_attached()
    screenshot(page, "dashboard-intervals")
