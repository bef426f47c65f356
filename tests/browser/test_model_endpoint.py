"""Suggestions from a model endpoint in a real browser (issue 28): the manager configures the
endpoint on the question's model registry page (a scikit-learn model served over HTTP on
127.0.0.1), reads its status there, and the annotator's page shows the model's label.
Screenshots in ``test-artifacts/``."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.items.models import Item
from apps.models_registry.models import ModelEndpoint
from apps.models_registry.suggestions import suggestion_drawn
from apps.studies.models import Membership
from apps.studies.services import membership_add, question_update
from tests.apps.models_registry.endpoint_server import model_server, train_on_answers
from tests.apps.models_registry.test_endpoints import text_study
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_manager_configures_an_endpoint_and_the_annotator_sees_its_suggestion(
    open_page, sign_in, screenshot, settings
):
    settings.MODEL_ENDPOINT_BACKOFF = 0
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the model served on loopback
    study, question, _ = text_study(n_items=12, n_answered=9)
    classifier = train_on_answers(question)
    with model_server(classifier) as server:
        manager = open_page()
        sign_in(manager, study.created_by.username)
        manager.goto(f"/studies/{study.pk}/models/{question.key}/")
        card = manager.locator("#model-endpoint")
        card.get_by_label("Format").select_option("json")
        card.get_by_label("URL").fill(server.url + "/json")
        card.get_by_label("Model", exact=True).fill("tfidf-logreg")
        card.get_by_label("API key", exact=True).fill("sk-browser-secret")
        card.get_by_role("button", name="Save the endpoint").click()
        # QUALITY_UPDATES=inline in the tests: the calls ran after the commit
        card = manager.locator("#model-endpoint")
        expect(card).to_contain_text("12 of 12 items")
        expect(card).to_contain_text("12 of 1000 calls made, 988 left")
        expect(card).to_contain_text("stored (not shown)")
        assert "sk-browser-secret" not in manager.content()
        screenshot(manager, "model-endpoint-card")
    endpoint = ModelEndpoint.objects.get()
    question_update(
        question=question, settings={"suggestion_run": endpoint.run_id, "suggestion_held_out": 0.05}
    )
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    texts = {item.text: item for item in Item.objects.filter(study=study)}
    names = {"negative": "Negative", "neutral": "Neutral", "positive": "Positive"}
    shown = 0
    for n in range(1, 5):
        item = texts[page.locator(".item__text").inner_text()]
        name = names[str(classifier.predict([item.text])[0])]
        drawn = suggestion_drawn(
            question_id=question.pk, item_id=item.pk, annotator_id=annotator.pk, held_out=0.05
        )
        note = page.locator(".suggestion-note")
        if drawn:
            expect(note).to_have_text(f"Model suggests: {name}")
            expect(page.locator(".label-button--suggested")).to_contain_text(name)
            if not shown:
                screenshot(page, "queue-suggestion-from-endpoint")
            shown += 1
        else:
            expect(note).to_have_count(0)
        page.keyboard.press("2")
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 12 done")
    assert shown
