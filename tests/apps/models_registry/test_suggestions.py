"""A categorical question suggests a registered model run's label on the queue page, holds it
back for a random share of (annotator, item) pairs, and records with each answer what the page
showed (issue 28)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.test.utils import override_settings

from apps.annotations.models import Revision
from apps.models_registry.models import Suggestion
from apps.models_registry.services import model_run_delete
from apps.models_registry.suggestions import (
    DEFAULT_HELD_OUT,
    clean_suggestion_settings,
    suggestion_drawn,
)
from apps.studies.services import question_create, question_update
from tests.apps.annotations.test_hot_paths import ANSWER_QUERIES, captured_answer
from tests.apps.annotations.test_views import answer, queue_url
from tests.apps.models_registry.suggesting import suggesting_study
from tests.factories import SENTIMENT_LABELS, StudyFactory, running_study
from tests.query_plans import full_scans, sorted_reads

pytestmark = pytest.mark.django_db


# ---------- settings ----------


def test_settings_fill_the_default_held_out_share_and_refuse_bad_values():
    assert clean_suggestion_settings({}) == {}
    assert clean_suggestion_settings({"suggestion_run": 3}) == {
        "suggestion_run": 3,
        "suggestion_held_out": DEFAULT_HELD_OUT,
    }
    for bad in (
        {"suggestion_run": "3"},
        {"suggestion_run": 0},
        {"suggestion_run": 3, "suggestion_held_out": 1.0},
        {"suggestion_run": 3, "suggestion_held_out": 0.0},
        {"suggestion_held_out": 0.4},  # a share without a run
    ):
        with pytest.raises(ValidationError):
            clean_suggestion_settings(bad)


def test_a_question_cannot_suggest_from_another_questions_run():
    study, _, run = suggesting_study(n_items=3)
    other = question_create(
        study=study, key="other", prompt="Other?", labels=SENTIMENT_LABELS, position=1
    )
    with pytest.raises(ValidationError, match="not registered for this question"):
        question_update(question=other, settings={"suggestion_run": run.pk})
    with pytest.raises(ValidationError, match="not registered for this question"):
        question_create(
            study=StudyFactory(),
            key="new",
            prompt="New?",
            labels=SENTIMENT_LABELS,
            settings={"suggestion_run": run.pk},
        )


def test_categorical_questions_still_refuse_unknown_settings():
    study = StudyFactory()
    with pytest.raises(ValidationError, match="no setting colour"):
        question_create(
            study=study, key="q", prompt="Q?", labels=SENTIMENT_LABELS, settings={"colour": 1}
        )


def test_the_api_validates_the_settings(client):
    study, _, run = suggesting_study(n_items=3)
    question = study.questions.get()
    client.force_login(study.created_by)
    url = f"/api/studies/{study.pk}/questions/{question.pk}/"
    bad = client.patch(
        url,
        {"settings": {"suggestion_run": run.pk, "suggestion_held_out": 2}},
        content_type="application/json",
    )
    assert bad.status_code == 400, bad.content
    assert "held-out share" in bad.content.decode()
    good = client.patch(
        url,
        {"settings": {"suggestion_run": run.pk, "suggestion_held_out": 0.3}},
        content_type="application/json",
    )
    assert good.status_code == 200, good.content
    question.refresh_from_db()
    assert question.settings == {"suggestion_run": run.pk, "suggestion_held_out": 0.3}


# ---------- the held-out draw ----------


def test_the_draw_is_reproducible_and_holds_out_the_share_asked():
    draws = np.array(
        [
            suggestion_drawn(question_id=7, item_id=i, annotator_id=k, held_out=0.2)
            for i in range(400)
            for k in range(10)
        ]
    )
    again = [
        suggestion_drawn(question_id=7, item_id=3, annotator_id=k, held_out=0.2) for k in range(10)
    ]
    assert again == list(draws[30:40])
    # 4,000 Bernoulli(0.8) draws: mean 0.8, sd 0.0063; 5 sd either side
    assert abs(draws.mean() - 0.8) < 0.032
    # per annotator, not per item: the same item is held out for some annotators only
    by_item = draws.reshape(400, 10)
    assert (by_item.any(axis=1) & ~by_item.all(axis=1)).mean() > 0.5


def test_the_draw_depends_on_the_secret_key_not_on_the_item_alone():
    with override_settings(SECRET_KEY="a" * 50):
        first = [
            suggestion_drawn(question_id=1, item_id=i, annotator_id=1, held_out=0.5)
            for i in range(64)
        ]
    with override_settings(SECRET_KEY="b" * 50):
        second = [
            suggestion_drawn(question_id=1, item_id=i, annotator_id=1, held_out=0.5)
            for i in range(64)
        ]
    assert first != second


# ---------- the queue page and the record ----------


def _page_state(html: str) -> str | None:
    """The suggested label key the page shows, or None."""
    match = re.search(r'data-suggestion="([^"]+)"', html)
    return match.group(1) if match else None


def test_the_page_shows_the_suggestion_or_holds_it_out_and_the_answer_records_which(client):
    study, (annotator, _), run = suggesting_study(n_items=12, held_out=0.5)
    question = study.questions.get()
    client.force_login(annotator)
    seen = []
    for _ in range(12):
        page = client.get(queue_url(study))
        html = page.content.decode()
        item = page.context["item"]
        drawn = suggestion_drawn(
            question_id=question.pk, item_id=item.pk, annotator_id=annotator.pk, held_out=0.5
        )
        if drawn:
            assert _page_state(html) == "negative"
            assert "Model suggests: <strong>Negative</strong>" in html
            assert html.count("label-button--suggested") == 1
            assert 'aria-describedby="suggestion-q' in html
        else:
            assert _page_state(html) is None
            assert "Model suggests" not in html
            assert "label-button--suggested" not in html
        form = page.context["form"].initial
        client.post(
            queue_url(study),
            {
                "idempotency_key": str(form["idempotency_key"]),
                "ticket": form["ticket"],
                f"q{question.pk}": "positive",
            },
        )
        revision = Revision.objects.get(annotation__item=item, annotation__annotator=annotator)
        seen.append((revision.suggestion.shown, drawn))
        assert revision.suggestion.run_id == run.pk
        assert revision.suggestion.label.key == "negative"
    assert all(shown == drawn for shown, drawn in seen)
    assert {shown for shown, _ in seen} == {True, False}  # both kinds among 12 items


def test_a_question_without_a_suggestion_records_nothing(client):
    study, (annotator, *_) = running_study(n_items=2)
    client.force_login(annotator)
    html = client.get(queue_url(study)).content.decode()
    assert "Model suggests" not in html
    client.post(queue_url(study), answer(client, study, "positive"))
    assert Revision.objects.count() == 1
    assert Suggestion.objects.count() == 0


def test_a_replayed_answer_records_its_suggestion_once(client):
    study, (annotator, _), _ = suggesting_study(n_items=3)
    client.force_login(annotator)
    data = answer(client, study, "positive")
    client.post(queue_url(study), data)
    client.post(queue_url(study), data)
    assert Revision.objects.count() == 1
    assert Suggestion.objects.count() == 1


def test_the_record_outlives_a_deleted_run(client):
    study, (annotator, _), run = suggesting_study(n_items=3)
    client.force_login(annotator)
    client.post(queue_url(study), answer(client, study, "positive"))
    model_run_delete(run=run)
    record = Suggestion.objects.get()
    assert record.run_id is None
    assert record.label.key == "negative"
    html = client.get(queue_url(study)).content.decode()
    assert "Model suggests" not in html  # the run's predictions went with it


def test_the_suggestion_costs_one_query_to_show_and_one_to_record(client):
    """The hot path with a suggestion: the htmx answer stays within ANSWER_QUERIES + 2 (one
    write of the record, one read of the next item's predictions); without one the pinned
    figure holds (tests/apps/annotations/test_hot_paths.py)."""
    study, (annotator, _), _ = suggesting_study(n_items=20)
    client.force_login(annotator)
    _, queries = captured_answer(client, study, after=5)
    sqls = [q["sql"] for q in queries]
    assert len(sqls) <= ANSWER_QUERIES + 2, [s[:80] for s in sqls]
    assert sum("models_registry_suggestion" in s for s in sqls) == 1
    assert sum("models_registry_prediction" in s for s in sqls) == 1
    assert full_scans(queries) == []
    assert sorted_reads(queries) == []


# ---------- the question editor ----------


def test_the_question_editor_saves_the_settings_and_names_a_foreign_run_at_its_field(client):
    from tests.apps.studies.test_question_editor import field_errors, page, posted

    study, _, run = suggesting_study(n_items=3)
    question = study.questions.get()
    question_update(question=question, settings={})
    client.force_login(study.created_by)
    editor = client.get(page(study, question)).content.decode()
    assert 'name="settings-suggestion_run"' in editor
    assert "Held-out share" in editor
    data = posted(key="sentiment") | {
        "settings-suggestion_run": str(run.pk),
        "settings-suggestion_held_out": "0.3",
    }
    assert client.post(page(study, question), data).status_code == 302
    question.refresh_from_db()
    assert question.settings == {"suggestion_run": run.pk, "suggestion_held_out": 0.3}

    other = question_create(
        study=study, key="other", prompt="Other?", labels=SENTIMENT_LABELS, position=1
    )
    data = posted(key="other") | {"settings-suggestion_run": str(run.pk)}
    response = client.post(page(study, other), data)
    assert response.status_code == 422
    assert "not registered for this question" in field_errors(response, "settings-suggestion_run")
    other.refresh_from_db()
    assert other.settings == {}


def test_a_held_out_page_does_not_carry_the_models_label_in_clear(client):
    """The ticket is signed, not encrypted: anyone can base64-decode the hidden field. On a
    held-out item it must not tell the annotator the label the model would have suggested."""
    from django.core import signing

    from apps.annotations.forms import TICKET_SALT

    study, (annotator, _), _ = suggesting_study(n_items=12, held_out=0.5)
    question = study.questions.get()
    negative = question.labels.get(key="negative")
    client.force_login(annotator)
    held_out_seen = 0
    for _ in range(12):
        page = client.get(queue_url(study))
        form = page.context["form"].initial
        payload = signing.loads(form["ticket"], salt=TICKET_SALT)
        _run_id, label_field, shown = payload["suggested"][str(question.pk)]
        if not shown:
            held_out_seen += 1
            assert label_field != negative.pk
        client.post(
            queue_url(study),
            {
                "idempotency_key": str(form["idempotency_key"]),
                "ticket": form["ticket"],
                f"q{question.pk}": "positive",
            },
        )
    assert held_out_seen
    # and the record still names the label withheld
    assert set(Suggestion.objects.values_list("label__key", flat=True)) == {"negative"}


def test_the_run_page_names_the_id_the_editor_asks_for(client):
    from django.urls import reverse

    study, _, run = suggesting_study(n_items=3)
    client.force_login(study.created_by)
    html = client.get(reverse("models_registry:run", args=[study.pk, run.pk])).content.decode()
    assert f'run id <strong id="run-id">{run.pk}</strong>' in html
    assert "Suggest from model run" in html
