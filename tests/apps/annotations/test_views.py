"""The annotator queue page (with and without htmx) and the raw annotation downloads."""

from __future__ import annotations

import time
import uuid

import pytest
from django.core import signing
from django.template.loader import render_to_string
from django.urls import reverse

from apps.annotations.forms import TICKET_SALT
from apps.annotations.models import Annotation, Assignment, Revision
from apps.annotations.selectors import assignment_next
from apps.studies.models import Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import ItemFactory, StudyFactory, UserFactory, running_study

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item-area"}


def queue_url(study: Study) -> str:
    return reverse("annotations:queue", args=[study.pk])


def shown_form(client, study: Study) -> dict[str, str]:
    """The hidden fields of the item form the queue page renders now."""
    initial = client.get(queue_url(study)).context["form"].initial
    return {"idempotency_key": str(initial["idempotency_key"]), "ticket": initial["ticket"]}


def answer(client, study: Study, label: str, **extra) -> dict[str, str]:
    question = study.questions.get()
    return {**shown_form(client, study), f"q{question.pk}": label, **extra}


@pytest.fixture
def annotator_client(client, study_setup):
    study, (annotator, *_) = study_setup
    client.force_login(annotator)
    return client, study, annotator


# ---------- Access ----------


def test_anonymous_is_sent_to_login(client, study_setup):
    study, _ = study_setup
    response = client.get(queue_url(study))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_outsider_gets_404(client, study_setup, outsider):
    study, _ = study_setup
    client.force_login(outsider)
    assert client.get(queue_url(study)).status_code == 404
    assert client.post(queue_url(study), {}).status_code == 404


def test_manager_who_is_not_annotator_gets_403(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    assert client.get(queue_url(study)).status_code == 403


# ---------- The page ----------


def test_page_shows_item_labels_shortcuts_and_instructions(annotator_client):
    client, study, annotator = annotator_client
    response = client.get(queue_url(study))
    html = response.content.decode()
    item = assignment_next(annotator=annotator, study=study).item
    assert response.status_code == 200
    assert item.text in html
    assert '<details class="instructions"' in html
    assert "Label each sentence" in html
    assert 'aria-keyshortcuts="1"' in html
    assert "<kbd>1</kbd>" in html
    assert 'aria-live="polite"' in html
    assert 'name="idempotency_key"' in html
    assert 'name="ticket"' in html
    assert "js/queue.js" in html
    assert "{#" not in html  # no template syntax leaks into the page
    assert "{%" not in html
    assert "1 of 6" not in html
    assert "0 of 6 done" in html


def test_instructions_markdown_is_sanitised(client):
    study, (annotator,) = running_study(
        n_items=1, n_annotators=1, instructions="**Bold** <script>alert(1)</script>"
    )
    client.force_login(annotator)
    html = client.get(queue_url(study)).content.decode()
    assert "<strong>Bold</strong>" in html
    assert "<script>alert" not in html


def test_media_items_render_by_kind(client):
    study = StudyFactory()
    question_create(
        study=study,
        key="q",
        prompt="Which?",
        labels=[{"key": "a", "shortcut": "1"}, {"key": "b", "shortcut": "2"}],
    )
    ItemFactory(study=study, kind="audio", text="", url="https://example.org/a.ogg")
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role="annotator")
    study_set_status(study=study, status=Study.Status.RUNNING)
    client.force_login(annotator)
    html = client.get(queue_url(study)).content.decode()
    assert '<audio class="item__media" controls' in html
    assert 'src="https://example.org/a.ogg"' in html


# ---------- Answering without JavaScript (POST/redirect/GET) ----------


def test_plain_post_redirects_to_the_next_item(annotator_client):
    client, study, annotator = annotator_client
    first = assignment_next(annotator=annotator, study=study)
    response = client.post(queue_url(study), answer(client, study, "positive"))
    assert response.status_code == 302
    assert response.url == queue_url(study)
    first.refresh_from_db()
    assert first.completed_at is not None
    revision = Revision.objects.get()
    assert revision.label.key == "positive"
    assert revision.source == Revision.Source.UI
    page = client.get(response.url)
    assert first.item.text not in page.content.decode()
    assert page.context["item"] == assignment_next(annotator=annotator, study=study).item
    assert "1 of 6 done" in page.content.decode()


def test_time_spent_comes_from_the_signed_ticket(annotator_client):
    client, study, annotator = annotator_client
    assignment = assignment_next(annotator=annotator, study=study)
    shown_at = int(time.time() * 1000) - 4_000
    ticket = signing.dumps({"assignment": assignment.pk, "shown_at": shown_at}, salt=TICKET_SALT)
    data = {**answer(client, study, "neutral"), "ticket": ticket}
    client.post(queue_url(study), data)
    assert 4_000 <= Revision.objects.get().time_spent_ms < 60_000


def test_tampered_ticket_is_refused(annotator_client):
    client, study, _ = annotator_client
    data = {**answer(client, study, "neutral"), "ticket": "forged"}
    response = client.post(queue_url(study), data)
    assert response.status_code == 422
    assert "out of date" in response.content.decode()
    assert not Revision.objects.exists()


def test_someone_elses_assignment_is_refused(annotator_client, study_setup):
    client, study, _ = annotator_client
    other = study_setup[1][1]
    theirs = Assignment.objects.filter(annotator=other).first()
    ticket = signing.dumps({"assignment": theirs.pk, "shown_at": 0}, salt=TICKET_SALT)
    response = client.post(queue_url(study), {**answer(client, study, "neutral"), "ticket": ticket})
    assert response.status_code == 422
    assert "not in your queue" in response.content.decode()
    assert not Revision.objects.exists()


def test_unknown_label_is_refused(annotator_client):
    client, study, _ = annotator_client
    response = client.post(queue_url(study), answer(client, study, "furious"))
    assert response.status_code == 422
    assert "Select a valid choice" in response.content.decode()


# ---------- Answering with htmx ----------


def test_htmx_post_returns_only_the_item_area_with_the_next_item(annotator_client):
    client, study, annotator = annotator_client
    first = assignment_next(annotator=annotator, study=study)
    response = client.post(queue_url(study), answer(client, study, "negative"), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert "<body" not in html
    nxt = assignment_next(annotator=annotator, study=study)
    assert nxt.item.text in html
    assert first.item.text not in html
    assert 'id="messages" class="messages"' in html
    assert 'hx-swap-oob="innerHTML"' in html
    assert "1 of 6 done" in html


def test_htmx_error_is_swapped_in_with_422(annotator_client):
    client, study, _ = annotator_client
    response = client.post(queue_url(study), {**answer(client, study, "x"), "ticket": "x"}, **HTMX)
    assert response.status_code == 422
    assert "<html" not in response.content.decode()
    assert 'role="alert"' in response.content.decode()


def test_double_post_with_the_same_key_makes_one_revision(annotator_client):
    client, study, _ = annotator_client
    data = answer(client, study, "positive")
    assert client.post(queue_url(study), data).status_code == 302
    assert client.post(queue_url(study), data, **HTMX).status_code == 200
    assert Revision.objects.count() == 1
    assert Annotation.objects.count() == 1


def test_two_tabs_never_make_two_annotations(annotator_client):
    client, study, _ = annotator_client
    tab_a, tab_b = answer(client, study, "positive"), answer(client, study, "negative")
    client.post(queue_url(study), tab_a)
    client.post(queue_url(study), tab_b)
    annotation = Annotation.objects.get()
    assert annotation.current_revision.value == {"label": "negative"}
    assert annotation.revisions.count() == 2


# ---------- Skip, undo, done, closed ----------


def test_skip_moves_the_item_behind_the_others(annotator_client):
    client, study, annotator = annotator_client
    first = assignment_next(annotator=annotator, study=study)
    response = client.post(queue_url(study), {**shown_form(client, study), "action": "skip"})
    assert response.status_code == 302
    first.refresh_from_db()
    assert first.skip_count == 1
    assert first.completed_at is None
    page = client.get(queue_url(study))
    assert page.context["item"] != first.item
    assert "Skipped" in page.content.decode()
    assert not Revision.objects.exists()


def test_undo_retracts_the_last_answer_and_shows_it_again(annotator_client):
    client, study, annotator = annotator_client
    first = assignment_next(annotator=annotator, study=study)
    client.post(queue_url(study), answer(client, study, "positive"))
    page = client.get(queue_url(study))
    assert 'aria-keyshortcuts="u"' in page.content.decode()
    undo = {
        "action": "undo",
        "idempotency_key": str(page.context["undo_form"].initial["idempotency_key"]),
    }
    response = client.post(queue_url(study), undo, **HTMX)
    assert response.status_code == 200
    assert first.item.text in response.content.decode()
    assert "Undone: ‘Positive’" in response.content.decode()
    client.post(queue_url(study), undo, **HTMX)  # a repeated undo changes nothing more
    assert [r.value for r in Revision.objects.order_by("id")] == [{"label": "positive"}, None]
    first.refresh_from_db()
    assert first.completed_at is None


def test_finished_queue_says_thank_you(client):
    study, (annotator,) = running_study(n_items=2, n_annotators=1)
    client.force_login(annotator)
    for _ in range(2):
        client.post(queue_url(study), answer(client, study, "neutral"))
    html = client.get(queue_url(study)).content.decode()
    assert "Thank you, all done" in html
    assert "2 of 2 done" in html
    assert 'name="ticket"' not in html


def test_study_not_running_shows_a_message_and_refuses_answers(annotator_client):
    client, study, _ = annotator_client
    data = answer(client, study, "neutral")
    study_set_status(study=study, status=Study.Status.CLOSED)
    page = client.get(queue_url(study))
    assert "not open for annotation" in page.content.decode()
    assert "closed" in page.content.decode()
    response = client.post(queue_url(study), data)
    assert response.status_code == 422
    assert "not running" in response.content.decode()
    assert not Revision.objects.exists()


def test_annotator_never_sees_other_annotators_labels(annotator_client, study_setup):
    client, study, _ = annotator_client
    other = study_setup[1][1]
    client.force_login(other)
    client.post(queue_url(study), answer(client, study, "positive"))
    client.force_login(study_setup[1][0])
    html = client.get(queue_url(study)).content.decode()
    assert other.username not in html
    assert "agreement" not in html.lower()


# ---------- Several questions ----------


@pytest.fixture
def two_question_study(db):
    study, (annotator,) = running_study(n_items=2, n_annotators=1)
    question_create(
        study=study,
        key="intensity",
        prompt="How intense?",
        labels=[{"key": "low", "shortcut": "7"}, {"key": "high", "shortcut": "8"}],
    )
    return study, annotator


def test_several_questions_render_as_radio_groups_and_need_every_answer(client, two_question_study):
    study, annotator = two_question_study
    client.force_login(annotator)
    html = client.get(queue_url(study)).content.decode()
    assert html.count('type="radio"') == 5
    assert "Submit answers" in html
    first, second = study.questions.all()
    data = {**shown_form(client, study), f"q{first.pk}": "positive", "action": "answer"}
    response = client.post(queue_url(study), data)
    assert response.status_code == 422
    assert "Please answer every question" in response.content.decode()
    data = {**shown_form(client, study), f"q{first.pk}": "positive", f"q{second.pk}": "high"}
    assert client.post(queue_url(study), data).status_code == 302
    assert Revision.objects.count() == 2


def test_the_undo_names_every_question_s_label_in_question_order(client, two_question_study):
    """The undo button and the reopened item's earlier answer come from one read of both
    assignments' labels: each assignment keeps its own labels, in question order."""
    study, annotator = two_question_study
    client.force_login(annotator)
    first, second = study.questions.order_by("position")
    items = []
    for labels in [("negative", "low"), ("positive", "high")]:
        items.append(assignment_next(annotator=annotator, study=study).item)
        data = {**shown_form(client, study), f"q{first.pk}": labels[0], f"q{second.pk}": labels[1]}
        assert client.post(queue_url(study), data).status_code == 302
    page = client.get(queue_url(study))
    assert f"Undo: ‘Positive’, ‘high’ on item {items[1].external_id}" in page.content.decode()
    html = client.post(queue_url(study), _undo_data(page), **HTMX).content.decode()
    assert f"Undone: ‘Positive’, ‘high’ on item {items[1].external_id}" in html
    assert "Your answer before the undo: ‘Positive’, ‘high’" in html
    assert f"Undo: ‘Negative’, ‘low’ on item {items[0].external_id}" in html


# ---------- Downloads ----------


@pytest.mark.parametrize(("fmt", "content_type"), [("csv", "text/csv"), ("jsonl", "json")])
def test_manager_downloads_annotations(annotator_client, manager, fmt, content_type):
    client, study, _ = annotator_client
    client.post(queue_url(study), answer(client, study, "positive"))
    client.force_login(manager)
    url = reverse("annotations:export", args=[study.pk, fmt])
    response = client.get(url)
    assert response.status_code == 200
    assert content_type in response["Content-Type"]
    assert "attachment" in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    assert "positive" in body
    history = client.get(url + "?history=1")
    assert "history" in history["Content-Disposition"]


def test_annotators_cannot_download(annotator_client):
    client, study, _ = annotator_client
    assert client.get(reverse("annotations:export", args=[study.pk, "csv"])).status_code == 403


def _undo_data(page) -> dict[str, str]:
    """The undo form the queue page shows: its key and the answer it undoes."""
    form = page.context["undo_form"]
    return {
        "action": "undo",
        "idempotency_key": str(form.initial["idempotency_key"]),
        "assignment": str(form.initial["assignment"]),
    }


def test_undo_goes_back_several_steps_naming_each_answer(annotator_client):
    client, study, annotator = annotator_client
    items = []
    for label in ["negative", "neutral", "positive"]:
        items.append(assignment_next(annotator=annotator, study=study).item)
        client.post(queue_url(study), answer(client, study, label))
    page = client.get(queue_url(study))
    assert f"Undo: ‘Positive’ on item {items[2].external_id}" in page.content.decode()
    for undone, name, earlier in [(2, "Positive", "Neutral"), (1, "Neutral", "Negative")]:
        data = _undo_data(page)
        response = client.post(queue_url(study), data, **HTMX)
        html = response.content.decode()
        assert response.status_code == 200
        assert f"Undone: ‘{name}’ on item {items[undone].external_id}" in html
        assert items[undone].text in html  # the undone item is shown again ...
        assert f"Your answer before the undo: ‘{name}’" in html  # ... with the earlier answer
        assert f"Undo: ‘{earlier}’ on item {items[undone - 1].external_id}" in html
        assert client.post(queue_url(study), data, **HTMX).status_code == 200  # resent: no-op
        page = client.get(queue_url(study))
    values = [r.value for r in Revision.objects.order_by("annotation__item__position", "number")]
    assert values == [
        {"label": "negative"},
        {"label": "neutral"},
        None,
        {"label": "positive"},
        None,
    ]


def test_a_stale_undo_with_a_new_key_undoes_nothing_else(annotator_client):
    """A second tab's undo names an answer that is no longer the latest: 422, nothing written."""
    client, study, _ = annotator_client
    for label in ["negative", "positive"]:
        client.post(queue_url(study), answer(client, study, label))
    stale = _undo_data(client.get(queue_url(study)))
    client.post(queue_url(study), stale, **HTMX)
    before = Revision.objects.count()
    response = client.post(
        queue_url(study), {**stale, "idempotency_key": str(uuid.uuid4())}, **HTMX
    )
    assert response.status_code == 422
    assert "already undone" in response.content.decode()
    assert Revision.objects.count() == before


# ---------- Label controls rendered once per content ----------


@pytest.mark.parametrize("questions", [1, 2])
def test_the_cached_label_controls_are_what_the_template_renders(client, questions):
    """The queue's controls come from a per-process cache of rendered HTML
    (apps/annotations/templatetags/question_controls.py), keyed on what the template reads of
    each label: they equal the template's own rendering of the label objects, for buttons (one
    question) and radios (several)."""
    study, (annotator,) = running_study(n_items=2, n_annotators=1)
    if questions == 2:
        question_create(
            study=study,
            key="intensity",
            prompt="How intense?",
            labels=[{"key": "lo"}, {"key": "hi"}],
        )
    client.force_login(annotator)
    html = client.get(queue_url(study)).content.decode()
    for question in study.questions.all():
        own = render_to_string(
            "annotations/_question.html",
            {
                "prompt": question.prompt,
                "ordered": question.ordered,
                "labels": list(question.labels.all()),
                "field_name": f"q{question.pk}",
                "single_question": questions == 1,
            },
        )
        assert own in html


def test_an_edited_label_shows_on_the_next_item(annotator_client):
    client, study, _ = annotator_client
    before = client.post(queue_url(study), answer(client, study, "negative"), **HTMX)
    assert "<span>Positive</span>" in before.content.decode()
    label = study.questions.get().labels.get(key="positive")
    label.name, label.shortcut = "Upbeat", "9"
    label.save()
    html = client.post(queue_url(study), answer(client, study, "negative"), **HTMX).content
    assert "<span>Upbeat</span>" in html.decode()
    assert 'data-shortcut="9"' in html.decode()
    assert "<span>Positive</span>" not in html.decode()
