"""The question editor (issue #16, point 7) in a real browser, on a desktop and on a phone:
the kind picker shows only that kind's fields, label rows are added and removed in place,
the preview follows what is typed, and errors sit at their field."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.studies.models import Question
from tests.factories import StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
TIMEOUT = 15_000  # ms: the CI machine is loaded


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_a_question_is_built_with_its_preview(device, open_page, sign_in, screenshot):
    study = StudyFactory()
    page = open_page(
        **(PHONE if device == "phone" else {"viewport": {"width": 1366, "height": 850}})
    )
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/questions/new/")
    preview = page.locator("#preview")

    page.locator("#id_key").fill("emotion")
    page.get_by_label("Prompt").fill("Which emotion?")
    rows = page.locator("[data-label-row]")
    expect(rows).to_have_count(2)
    for i, (key, name, shortcut) in enumerate([("joy", "Joy", "j"), ("anger", "Anger", "a")]):
        page.locator(f"#id_labels-{i}-key").fill(key)
        page.locator(f"#id_labels-{i}-name").fill(name)
        page.locator(f"#id_labels-{i}-shortcut").fill(shortcut)
    expect(preview.get_by_text("Which emotion?")).to_be_visible(timeout=TIMEOUT)
    expect(preview.locator(".label-button")).to_have_count(2, timeout=TIMEOUT)

    page.get_by_role("button", name="Add a label").click()
    expect(rows).to_have_count(3, timeout=TIMEOUT)
    expect(page.locator("#id_labels-0-key")).to_have_value("joy")  # typed rows kept
    page.locator("#id_labels-2-key").fill("calm")
    page.locator("#id_labels-2-shortcut").fill("s")  # kept for skip
    expect(preview.locator(".label-button")).to_have_count(3, timeout=TIMEOUT)
    expect(preview.locator(".label-button").nth(2)).to_contain_text("calm")
    page.get_by_role("button", name="Remove label 2").click()
    expect(rows).to_have_count(2, timeout=TIMEOUT)
    expect(preview.locator(".label-button")).to_contain_text(["Joy", "calm"], timeout=TIMEOUT)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.wait_for_load_state("networkidle")  # no preview still on its way
    expect(preview.locator(".label-button")).to_contain_text(["Joy", "calm"])
    screenshot(page, f"question-editor-categorical-{device}")

    page.get_by_role("button", name="Add question").click()
    error = page.locator("#id_labels-1-shortcut_error")
    expect(error).to_contain_text("kept for skip (s) and undo (u)", timeout=TIMEOUT)
    page.locator("#id_labels-1-shortcut").fill("c")
    page.get_by_role("button", name="Add question").click()
    expect(page.get_by_text("Question added.")).to_be_visible(timeout=TIMEOUT)
    question = Question.objects.get(study=study)
    assert list(question.labels.values_list("key", "shortcut")) == [("joy", "j"), ("calm", "c")]


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_each_kind_shows_its_own_settings_and_preview(device, open_page, sign_in, screenshot):
    study = StudyFactory()
    page = open_page(
        **(PHONE if device == "phone" else {"viewport": {"width": 1366, "height": 850}})
    )
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/questions/new/")
    page.get_by_label("Prompt").fill("Which reads better?")
    page.get_by_label("Pairwise preference").check()
    expect(page).to_have_url(re.compile(r"\?kind=pairwise"), timeout=TIMEOUT)
    expect(page.get_by_label("Prompt")).to_have_value("Which reads better?")  # kept
    expect(page.get_by_text("Ordered scale")).to_have_count(0)
    preview = page.locator("#preview")
    expect(preview.get_by_role("button", name="Equal")).to_have_count(1)
    page.get_by_label("Strict preference").check()
    expect(preview.get_by_role("button", name="Equal")).to_have_count(0, timeout=TIMEOUT)
    page.get_by_label("Transitivity floor").fill("2")
    page.get_by_role("button", name="Add question").click()
    expect(page.locator("#id_settings-kappa_floor_error")).to_contain_text(
        "Give a number in [-3, 1].", timeout=TIMEOUT
    )
    screenshot(page, f"question-editor-pairwise-{device}")

    page.get_by_label("Continuous slider trace").check()
    expect(page.get_by_label("High end label")).to_be_visible(timeout=TIMEOUT)
    page.get_by_label("High end label").fill("Very tense")
    page.get_by_label("Orientation").select_option("vertical")
    expect(preview.locator(".trace-recorder--vertical")).to_be_visible(timeout=TIMEOUT)
    expect(preview.get_by_text("Very tense")).to_be_visible(timeout=TIMEOUT)
    page.locator("summary", has_text="Advanced").click()
    page.get_by_label("Advanced settings (JSON)").fill('{\n  "quality": {,}\n}')
    page.locator("#id_key").fill("tension")
    page.get_by_role("button", name="Add question").click()
    expect(page.locator("#id_advanced_error")).to_contain_text("Line 2, column 15", timeout=TIMEOUT)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    screenshot(page, f"question-editor-continuous-{device}")
