"""Suggestions from a model endpoint (issue 28): a real scikit-learn model served over HTTP on
127.0.0.1 labels the question's items in the background; failures, the call budget, retries,
access control and the configuration's validation."""

from __future__ import annotations

import json
import math
import re
import socket
import ssl
import time
from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from analytics import background
from analytics.pipeline import JOBS, quality_sweep
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.items.models import Item
from apps.models_registry.endpoints import EndpointLabel, read_answer
from apps.models_registry.models import (
    EndpointCall,
    ItemPrediction,
    ModelEndpoint,
    ModelRunEvaluation,
)
from apps.models_registry.selectors import (
    endpoint_queue,
    endpoint_status,
    question_labels,
    run_predictions,
)
from apps.models_registry.services import (
    ENDPOINT_JOB,
    Upload,
    model_endpoint_predict_pending,
    model_endpoint_request,
    model_endpoint_save,
    model_endpoints_sweep,
    model_run_register,
)
from apps.models_registry.suggestions import suggestion_drawn
from apps.studies.models import Membership
from apps.studies.services import membership_add, question_update
from tests.apps.annotations.test_views import queue_url
from tests.apps.models_registry.endpoint_server import (
    model_server,
    self_signed_localhost,
    train_on_answers,
)
from tests.apps.models_registry.simulation import jsonl
from tests.factories import UserFactory, running_study

pytestmark = pytest.mark.django_db

WORDS = {
    "positive": ["wonderful", "lovely", "great", "delightful", "superb", "joyful"],
    "negative": ["awful", "terrible", "dreadful", "horrible", "bad", "gloomy"],
    "neutral": ["table", "chair", "window", "paper", "street", "number"],
}
KEYS = list(WORDS)


@pytest.fixture(autouse=True)
def _no_backoff(settings):
    settings.MODEL_ENDPOINT_BACKOFF = 0
    # the served classifier listens on loopback: refused unless listed (as a lab lists it)
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def text_study(*, n_items: int = 30, n_answered: int = 18, seed: int = 3):
    """``(study, question, annotators)``: items whose words carry their sentiment, the first
    ``n_answered`` answered (with that sentiment) by both annotators."""
    study, annotators = running_study(n_items=n_items, n_annotators=2)
    rng = np.random.default_rng(seed)
    truth = {}
    for n, item in enumerate(study.items.order_by("position")):
        key = KEYS[n % 3]
        words = rng.choice(WORDS[key], 2, replace=False)
        filler = rng.choice(WORDS["neutral"]) if key != "neutral" else "thing"
        item.text = f"A {words[0]} {filler}, {words[1]}."
        item.save(update_fields=["text"])
        truth[item.external_id] = key
    answered = list(study.items.order_by("position")[:n_answered])
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(
                item.external_id, user.username, "sentiment", truth[item.external_id]
            )
            for item in answered
            for user in annotators
        ],
    )
    return study, study.questions.get(), annotators


@pytest.fixture
def served():
    """A text study, and its classifier (trained on the answers so far) served over HTTP."""
    study, question, annotators = text_study()
    classifier = train_on_answers(question)
    with model_server(classifier) as server:
        yield study, question, annotators, server


def configure(question, server, *, path: str = "/json", kind: str = "json", **config):
    return model_endpoint_save(
        question=question,
        created_by=question.study.created_by,
        kind=kind,
        url=server.url + path,
        model=config.pop("model", "tfidf-logreg"),
        **config,
    )


def run_job(endpoint) -> int:
    return model_endpoint_predict_pending(endpoint_id=endpoint.pk)


def stored(endpoint) -> dict[str, ItemPrediction]:
    return {
        p.item.external_id: p
        for p in ItemPrediction.objects.filter(run_id=endpoint.run_id).select_related(
            "item", "label"
        )
    }


# ---------- a real model over HTTP ----------


def test_plain_json_endpoint_stores_the_classifiers_labels_and_probabilities(served):
    study, question, _, server = served
    endpoint = configure(question, server)
    assert ItemPrediction.objects.count() == 0  # nothing called inside the saving request
    assert run_job(endpoint) == 30
    items = list(study.items.order_by("position"))
    texts = [item.text for item in items]
    expected = server.classifier.predict(texts)
    expected_p = server.classifier.predict_proba(texts)
    classes = [str(c) for c in server.classifier.classes_]
    found = stored(endpoint)
    assert [found[item.external_id].label.key for item in items] == list(expected)
    for item, row in zip(items, expected_p, strict=True):
        p = found[item.external_id].probabilities
        np.testing.assert_allclose([p[c] for c in classes], row, rtol=1e-12)
    # the body sent: the item and the label keys, in the question's order
    first = server.requests[0]["body"]
    assert first == {
        "item": {"id": items[0].external_id, "text": items[0].text, "metadata": {}},
        "labels": ["negative", "neutral", "positive"],
    }
    endpoint.refresh_from_db()
    assert endpoint.calls_made == 30
    assert endpoint.requested_at is None
    assert endpoint.run.name == "tfidf-logreg"
    assert endpoint.run.version == "1"
    status = endpoint_status(endpoint=endpoint)
    assert (status.n_items, status.predicted, status.failed, status.waiting) == (30, 30, 0, 0)
    assert EndpointCall.objects.filter(outcome="ok").count() == 30


def test_openai_compatible_endpoint_reads_the_label_from_the_chat_answer(served):
    study, question, _, server = served
    endpoint = configure(
        question, server, path="/v1/chat/completions", kind="openai", model="gpt-test"
    )
    assert run_job(endpoint) == 30
    items = list(study.items.order_by("position"))
    expected = server.classifier.predict([item.text for item in items])
    found = stored(endpoint)
    assert [found[item.external_id].label.key for item in items] == list(expected)
    assert all(found[item.external_id].probabilities is None for item in items)
    body = server.requests[0]["body"]
    assert body["model"] == "gpt-test"
    assert body["temperature"] == 0
    system, user = body["messages"]
    assert system["role"] == "system"
    assert "- negative: Negative" in system["content"]
    assert user["content"].endswith("Item:\n" + items[0].text)
    assert "What is the sentiment?" in user["content"]
    # the key upper-cased is read too
    server.behaviour.openai_case = "key"
    ItemPrediction.objects.all().delete()
    model_endpoint_request(endpoint=endpoint)
    assert run_job(endpoint) == 30


def test_openai_logprobs_become_the_label_probabilities(served):
    study, question, _, server = served
    endpoint = configure(
        question, server, path="/v1/chat/completions", kind="openai", logprobs=True, max_calls=12
    )
    assert run_job(endpoint) == 12
    body = server.requests[0]["body"]
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)
    found = stored(endpoint)
    items = [item for item in study.items.order_by("position") if item.external_id in found]
    # the oracle: the classifier's own probabilities, in its classes' order
    expected = server.classifier.predict_proba([item.text for item in items])
    classes = [str(c) for c in server.classifier.classes_]
    for item, row in zip(items, expected, strict=True):
        got = found[item.external_id].probabilities
        assert got is not None
        assert [got[key] for key in classes] == pytest.approx(list(row), abs=1e-9)
        assert found[item.external_id].label.key == classes[int(np.argmax(row))]
    # off (the default): the field is not sent, no probabilities
    question_endpoint = configure(
        question, server, path="/v1/chat/completions", kind="openai", model="plain"
    )
    server.requests.clear()
    run_job(question_endpoint)
    assert "logprobs" not in server.requests[0]["body"]
    assert all(p.probabilities is None for p in stored(question_endpoint).values())


def test_the_logprobs_option_through_the_api(api_client):
    study, _ = running_study(n_items=2)
    _as(api_client, study.created_by)
    made = api_client.post(_api(study), {**GOOD, "kind": "openai"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["logprobs"] is False
    pk = made.json()["id"]
    changed = api_client.patch(f"{_api(study)}{pk}/", {"logprobs": True}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["logprobs"] is True
    kept = api_client.patch(f"{_api(study)}{pk}/", {"timeout": 5}, format="json")
    assert kept.json()["logprobs"] is True  # a PATCH without it keeps it


def test_logprobs_are_matched_to_labels_and_renormalised():
    labels = [EndpointLabel(k, k.title()) for k in ("negative", "neutral", "positive")]

    def answer(top) -> bytes:
        choice = {
            "message": {"content": "positive"},
            "logprobs": {"content": [{"token": "x", "top_logprobs": top}]},
        }
        return json.dumps({"choices": [choice]}).encode()

    top = [
        {"token": " Positive", "logprob": -0.2},
        {"token": "pos", "logprob": -2.0},  # a label's first piece: not a label
        {"token": "NEUTRAL.", "logprob": -3.0},
        {"token": "positive", "logprob": -4.0},  # a second spelling adds to the same label
    ]
    label, probabilities = read_answer("openai", answer(top), labels=labels)
    mass = {"positive": math.exp(-0.2) + math.exp(-4.0), "neutral": math.exp(-3.0)}
    total = sum(mass.values())
    assert label == "positive"
    assert probabilities == pytest.approx(
        {"negative": 0.0, "neutral": mass["neutral"] / total, "positive": mass["positive"] / total}
    )
    assert (
        read_answer("openai", answer([{"token": "pos", "logprob": -0.1}]), labels=labels)[1] is None
    )
    with pytest.raises(ValueError, match="logprob <= 0"):
        read_answer("openai", answer([{"token": "positive", "logprob": "high"}]), labels=labels)
    with pytest.raises(ValueError, match="logprob <= 0"):
        read_answer("openai", answer([{"token": "positive", "logprob": 0.5}]), labels=labels)


def test_the_job_is_scheduled_after_the_commit(served, django_capture_on_commit_callbacks):
    _, question, _, server = served
    with django_capture_on_commit_callbacks(execute=True):
        endpoint = configure(question, server)
    assert ItemPrediction.objects.filter(run_id=endpoint.run_id).count() == 30
    # and the run is evaluated on its item predictions (DIC/BAE as for any run)
    evaluation = ModelRunEvaluation.objects.get(run_id=endpoint.run_id)
    assert evaluation.figures["n_cells"] == 2 * 18  # two annotators x answered items


def test_an_item_prediction_counts_for_every_annotator_who_answered(served):
    _, question, _, server = served
    endpoint = configure(question, server)
    run_job(endpoint)
    labels = question_labels(question=question)
    codes = run_predictions(run=endpoint.run, labels=labels)
    answered = ~np.isnan(labels.ratings)
    assert np.array_equal(~np.isnan(codes), answered)
    found = stored(endpoint)
    external = dict(Item.objects.values_list("pk", "external_id"))
    for column, item_id in enumerate(labels.item_ids):
        key = found[external[int(item_id)]].label.key
        got = codes[answered[:, column], column]
        assert list(got) == [labels.value_keys.index(key)] * int(answered[:, column].sum())


def test_a_new_version_starts_a_new_run_and_the_old_keeps_its_labels(served):
    _, question, _, server = served
    first = configure(question, server)
    run_job(first)
    second = configure(question, server, version="2")
    assert second.pk == first.pk
    assert second.run_id != first.run_id
    assert ItemPrediction.objects.filter(run_id=first.run_id).count() == 30
    assert run_job(second) == 30


# ---------- suggestions from the endpoint's run ----------


def _suggested(html: str) -> str | None:
    match = re.search(r'data-suggestion="([^"]+)"', html)
    return match.group(1) if match else None


def test_the_queue_page_suggests_the_endpoints_label(served, client):
    study, question, _annotators, server = served
    endpoint = configure(question, server)
    run_job(endpoint)
    question_update(
        question=question, settings={"suggestion_run": endpoint.run_id, "suggestion_held_out": 0.05}
    )
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    client.force_login(annotator)
    found = stored(endpoint)
    shown = 0
    for _ in range(6):
        page = client.get(queue_url(study))
        item = page.context["item"]
        html = page.content.decode()
        drawn = suggestion_drawn(
            question_id=question.pk, item_id=item.pk, annotator_id=annotator.pk, held_out=0.05
        )
        expected = found[item.external_id].label.key if drawn else None
        assert _suggested(html) == expected
        shown += drawn
        form = page.context["form"].initial
        client.post(
            queue_url(study),
            {
                "idempotency_key": str(form["idempotency_key"]),
                "ticket": form["ticket"],
                f"q{question.pk}": "neutral",
            },
        )
    assert shown >= 1


# ---------- failures ----------


def _queue_page_without_suggestion(client, study, question, endpoint, annotator, server):
    """The annotator's page is served at once, with no suggestion and no call."""
    question_update(
        question=question, settings={"suggestion_run": endpoint.run_id, "suggestion_held_out": 0.05}
    )
    client.force_login(annotator)
    before = len(server.requests)
    started = time.monotonic()
    page = client.get(queue_url(study))
    assert page.status_code == 200
    assert time.monotonic() - started < 2.0
    assert _suggested(page.content.decode()) is None
    assert "Model suggests" not in page.content.decode()
    assert len(server.requests) == before


def test_a_timeout_leaves_the_items_without_a_label_and_says_so(client):
    study, question, _annotators = text_study(n_items=4, n_answered=4)
    new = UserFactory()
    membership_add(study=study, user=new, role=Membership.Role.ANNOTATOR)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.sleep = 0.6
        endpoint = configure(question, server, timeout=0.2, retries=1)
        started = time.monotonic()
        assert run_job(endpoint) == 0
        elapsed = time.monotonic() - started
        calls = list(EndpointCall.objects.order_by("id"))
        assert [c.outcome for c in calls] == ["timeout"] * 8  # 4 items x (1 try + 1 retry)
        assert [c.attempt for c in calls] == [1, 2] * 4
        assert all(0.15 < c.seconds < 0.5 for c in calls)
        assert elapsed < 8 * 0.5
        status = endpoint_status(endpoint=endpoint)
        assert (status.predicted, status.failed, status.waiting) == (0, 4, 0)
        assert [(f.reason, f.n_items) for f in status.failures] == [("timed out", 4)]
        assert "0.2 s" in status.failures[0].example
        _queue_page_without_suggestion(client, study, question, endpoint, new, server)


def test_http_500_is_retried_then_recorded_with_its_status(client):
    study, question, _annotators = text_study(n_items=3, n_answered=3)
    new = UserFactory()
    membership_add(study=study, user=new, role=Membership.Role.ANNOTATOR)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.status = 500
        endpoint = configure(question, server, retries=2)
        assert run_job(endpoint) == 0
        assert len(server.requests) == 9  # 3 items x 3 attempts
        calls = EndpointCall.objects.order_by("id")
        assert {(c.outcome, c.http_status) for c in calls} == {("http", 500)}
        endpoint.refresh_from_db()
        assert endpoint.calls_made == 9
        status = endpoint_status(endpoint=endpoint)
        assert [(f.reason, f.n_items) for f in status.failures] == [("HTTP 500", 3)]
        assert status.last_call.http_status == 500
        _queue_page_without_suggestion(client, study, question, endpoint, new, server)
        # the manager's page says what happened
        client.force_login(study.created_by)
        html = client.get(
            reverse("models_registry:leaderboard", args=[study.pk, question.key])
        ).content.decode()
        assert "3 HTTP 500" in html
        assert "0 of 3 items" in html
        assert "9 of 1000 calls made, 991 left" in html


def test_a_4xx_is_not_retried_and_a_flaky_server_succeeds_on_retry():
    _, question, _ = text_study(n_items=2, n_answered=2)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.status = 404
        endpoint = configure(question, server, retries=2)
        run_job(endpoint)
        assert len(server.requests) == 2
        server.behaviour = type(server.behaviour)(status=503, fail_first=2)
        server.requests.clear()
        model_endpoint_request(endpoint=endpoint)
        assert run_job(endpoint) == 2
        # first item: 503, 503, then its second retry answers; the second item at once
        assert len(server.requests) == 4
        attempts = EndpointCall.objects.filter(http_status=503).values_list("attempt", flat=True)
        assert sorted(attempts) == [1, 2]
        ok = EndpointCall.objects.filter(outcome="ok").order_by("id")
        assert [c.attempt for c in ok] == [3, 1]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<html>oops</html>", "not JSON"),
        (b'{"label": "ecstatic"}', "unknown label 'ecstatic'"),
        (b'{"verdict": "positive"}', 'no "label"'),
        (b'{"label": "positive", "probabilities": {"positive": 0.7}}', "sum to 0.700"),
        (b'{"label": "positive", "probabilities": {"joy": 1.0}}', "unknown labels joy"),
    ],
)
def test_a_malformed_answer_leaves_the_item_without_a_label(body, detail):
    _, question, _ = text_study(n_items=2, n_answered=2)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.body = body
        endpoint = configure(question, server, retries=2)
        assert run_job(endpoint) == 0
        assert len(server.requests) == 2  # not retried
        calls = list(EndpointCall.objects.all())
        assert {c.outcome for c in calls} == {"malformed"}
        assert all(detail in c.detail for c in calls)
        status = endpoint_status(endpoint=endpoint)
        assert [(f.reason, f.n_items) for f in status.failures] == [("malformed answer", 2)]


def test_an_unreachable_endpoint_is_recorded():
    _, question, _ = text_study(n_items=2, n_answered=2)
    with model_server(train_on_answers(question)) as server:
        url = server.url
    endpoint = model_endpoint_save(
        question=question,
        created_by=question.study.created_by,
        kind="json",
        url=url + "/json",
        model="gone",
        retries=0,
    )
    run_job(endpoint)
    calls = list(EndpointCall.objects.all())
    assert [c.outcome for c in calls] == ["unreachable"] * 2
    assert endpoint_status(endpoint=endpoint).failures[0].reason == "unreachable"


# ---------- budget and order ----------


def test_the_budget_stops_the_calls_and_a_new_request_is_refused(served, client):
    study, question, _, server = served
    endpoint = configure(question, server, max_calls=5)
    assert run_job(endpoint) == 5
    assert len(server.requests) == 5
    # items not yet predicted first, in queue order
    first = list(study.items.order_by("position", "id")[:5].values_list("external_id", flat=True))
    assert sorted(stored(endpoint)) == sorted(first)
    endpoint.refresh_from_db()
    status = endpoint_status(endpoint=endpoint)
    assert status.budget_spent
    assert status.waiting == 25
    with pytest.raises(ValidationError, match="call budget is spent"):
        model_endpoint_request(endpoint=endpoint)
    assert run_job(endpoint) == 0
    assert len(server.requests) == 5
    client.force_login(study.created_by)
    url = reverse("models_registry:leaderboard", args=[study.pk, question.key])
    assert "budget spent: no more calls" in client.get(url).content.decode()
    answer = client.post(reverse("models_registry:endpoint_predict", args=[study.pk, "sentiment"]))
    assert answer.status_code == 302
    assert "call budget is spent" in client.get(url).content.decode()
    # raising the budget lets the rest through
    configure(question, server, max_calls=100)
    assert run_job(endpoint) == 25


def test_retries_count_against_the_budget():
    _, question, _ = text_study(n_items=5, n_answered=5)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.status = 500
        endpoint = configure(question, server, retries=2, max_calls=4)
        run_job(endpoint)
        assert len(server.requests) == 4
        assert list(EndpointCall.objects.values_list("attempt", flat=True)) == [1, 2, 3, 1]


def test_failed_items_come_after_the_items_never_asked_about(served):
    study, question, _, server = served
    server.behaviour.status = 500
    endpoint = configure(question, server, retries=0, max_calls=2)
    run_job(endpoint)
    items = list(study.items.order_by("position", "id").values_list("pk", flat=True))
    assert endpoint_queue(endpoint=endpoint) == items[2:] + items[:2]


def test_the_sweep_dispatches_endpoints_left_waiting(served):
    _, question, _, server = served
    endpoint = configure(question, server)
    assert model_endpoints_sweep() == [endpoint.pk]
    run_job(endpoint)
    assert model_endpoints_sweep() == []
    assert ENDPOINT_JOB in JOBS


def test_an_endpoint_being_called_elsewhere_is_not_called_twice(served, settings):
    settings.MODEL_REGISTRY_EVALUATION_TIMEOUT = 60
    _, question, _, server = served
    endpoint = configure(question, server)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(started_at=timezone.now())
    assert run_job(endpoint) == 0  # claimed by another process
    assert server.requests == []
    # a claim older than the time-out counts as abandoned and is taken over
    old = timezone.now() - timedelta(seconds=61)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(started_at=old)
    assert run_job(endpoint) == 30


def test_on_the_background_thread_a_pass_gives_the_thread_back_and_asks_again(served, settings):
    _, question, _, server = served
    endpoint = configure(question, server)
    settings.QUALITY_UPDATES = "thread"
    settings.MODEL_ENDPOINT_SLICE = 0  # one item per pass
    assert run_job(endpoint) == 1
    endpoint.refresh_from_db()
    assert endpoint.requested_at is not None  # the rest: asked for again
    assert endpoint.started_at is None
    assert run_job(endpoint) == 1
    assert len(server.requests) == 2


# ---------- access, secrecy, validation ----------


def _as(api_client, user) -> None:
    _, token = AuthToken.objects.create(user=user)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")


def _api(study) -> str:
    return f"/api/studies/{study.pk}/model-endpoints/"


GOOD = {"question": "sentiment", "kind": "json", "url": "http://127.0.0.1:9/json", "model": "m"}


def test_annotators_and_outsiders_cannot_configure(api_client, client):
    study, (annotator, *_) = running_study(n_items=2)
    outsider = UserFactory()
    _as(api_client, annotator)
    assert api_client.post(_api(study), GOOD, format="json").status_code == 403
    assert api_client.get(_api(study)).status_code == 403
    _as(api_client, outsider)
    assert api_client.post(_api(study), GOOD, format="json").status_code == 404
    client.force_login(annotator)
    page = reverse("models_registry:endpoint", args=[study.pk, "sentiment"])
    assert (
        client.post(page, {**GOOD, "timeout": 10, "retries": 2, "max_calls": 5}).status_code == 403
    )
    assert not ModelEndpoint.objects.exists()


def test_the_api_key_is_stored_sent_and_never_rendered(api_client, client, served):
    study, question, _, server = served
    secret = "sk-very-secret-123"
    _as(api_client, study.created_by)
    made = api_client.post(
        _api(study),
        {**GOOD, "url": server.url + "/json", "api_key": secret, "max_calls": 3},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert secret not in made.content.decode()
    assert made.json()["api_key_set"] is True
    endpoint = ModelEndpoint.objects.get()
    run_job(endpoint)
    assert {r["authorization"] for r in server.requests} == {f"Bearer {secret}"}
    pk = made.json()["id"]
    for answer in (
        api_client.get(_api(study)),
        api_client.get(f"{_api(study)}{pk}/"),
        api_client.patch(f"{_api(study)}{pk}/", {"timeout": 5}, format="json"),
    ):
        assert answer.status_code == 200, answer.content
        assert secret not in answer.content.decode()
    assert ModelEndpoint.objects.get().api_key == secret  # a PATCH without a key keeps it
    client.force_login(study.created_by)
    html = client.get(
        reverse("models_registry:leaderboard", args=[study.pk, question.key])
    ).content.decode()
    assert secret not in html
    assert "stored (not shown)" in html
    # the page's form keeps the key when left blank, and removes it when asked
    page = reverse("models_registry:endpoint", args=[study.pk, question.key])
    form = {**GOOD, "url": server.url + "/json", "version": "1", "timeout": 5, "retries": 2}
    assert client.post(page, {**form, "max_calls": 3}).status_code == 302
    assert ModelEndpoint.objects.get().api_key == secret
    assert client.post(page, {**form, "max_calls": 3, "remove_api_key": "on"}).status_code == 302
    assert ModelEndpoint.objects.get().api_key == ""


def test_a_key_from_an_environment_variable(served, monkeypatch):
    _, question, _, server = served
    monkeypatch.setenv("ENDPOINT_TEST_KEY", "from-env")
    endpoint = configure(question, server, api_key_env="ENDPOINT_TEST_KEY", max_calls=1)
    run_job(endpoint)
    assert server.requests[0]["authorization"] == "Bearer from-env"


def test_bad_configuration_is_refused_with_field_messages(api_client, client):
    study, _ = running_study(n_items=2)
    _as(api_client, study.created_by)
    bad = {
        "question": "sentiment",
        "kind": "grpc",
        "url": "ftp://models.example/x",
        "model": "m",
        "timeout": 0,
        "retries": 9,
        "max_calls": -1,
    }
    answer = api_client.post(_api(study), bad, format="json")
    assert answer.status_code == 400
    assert set(answer.json()) >= {"kind"}
    answer = api_client.post(_api(study), {**bad, "kind": "json"}, format="json")
    assert answer.status_code == 400, answer.content
    errors = answer.json()
    assert "http:// or https://" in str(errors["url"])
    assert "between 0.1 and 120" in str(errors["timeout"])
    assert "0 and 5 retries" in str(errors["retries"])
    assert "max_calls" in errors
    missing = api_client.post(_api(study), {"question": "sentiment"}, format="json")
    assert missing.status_code == 400
    assert {"kind", "url", "model"} <= set(missing.json())
    nope = api_client.post(_api(study), {**GOOD, "question": "nope"}, format="json")
    assert nope.status_code == 400
    assert "question" in nope.json()
    assert not ModelEndpoint.objects.exists()
    # the page shows the same messages on its form (422)
    client.force_login(study.created_by)
    page = reverse("models_registry:endpoint", args=[study.pk, "sentiment"])
    shown = client.post(
        page, {**bad, "kind": "json", "version": "1", "timeout": 0, "max_calls": 3, "retries": 1}
    )
    assert shown.status_code == 422
    assert "http:// or https://" in shown.content.decode()
    assert not ModelEndpoint.objects.exists()


def test_a_second_endpoint_for_a_question_and_a_taken_run_name_are_refused(api_client, served):
    study, question, annotators, _server = served
    _as(api_client, study.created_by)
    assert api_client.post(_api(study), GOOD, format="json").status_code == 201
    again = api_client.post(_api(study), GOOD, format="json")
    assert again.status_code == 400
    assert "already has a model endpoint" in str(again.json())
    item = study.items.first()
    model_run_register(
        study=study,
        question=question,
        name="uploaded",
        version="1",
        created_by=study.created_by,
        predictions=Upload(
            jsonl(
                [
                    {
                        "item": item.external_id,
                        "annotator": annotators[0].username,
                        "label": "neutral",
                    }
                ]
            ),
            "jsonl",
        ),
    )
    pk = ModelEndpoint.objects.get().pk
    taken = api_client.patch(f"{_api(study)}{pk}/", {"model": "uploaded"}, format="json")
    assert taken.status_code == 400
    assert "already registered" in str(taken.json()["version"])


def test_the_predict_action_answers_202_then_400_when_the_budget_is_spent(api_client, served):
    study, _question, _, server = served
    _as(api_client, study.created_by)
    made = api_client.post(
        _api(study), {**GOOD, "url": server.url + "/json", "max_calls": 2}, format="json"
    )
    endpoint = ModelEndpoint.objects.get(pk=made.json()["id"])
    run_job(endpoint)
    answer = api_client.post(f"{_api(study)}{endpoint.pk}/predict/")
    assert answer.status_code == 400
    assert "call budget is spent" in str(answer.json()["max_calls"])
    api_client.patch(f"{_api(study)}{endpoint.pk}/", {"max_calls": 40}, format="json")
    run_job(endpoint)
    answer = api_client.post(f"{_api(study)}{endpoint.pk}/predict/")
    assert answer.status_code == 202
    body = answer.json()
    assert body["status"]["predicted"] == 30
    assert body["budget_left"] == 10
    assert body["predicting"] is True


# ---------- where the calls run ----------


def test_worker_mode_leaves_the_calls_to_the_workers_sweep(
    served, settings, django_capture_on_commit_callbacks
):
    _, question, _, server = served
    settings.QUALITY_UPDATES = "worker"
    with django_capture_on_commit_callbacks(execute=True):
        endpoint = configure(question, server)
    assert server.requests == []  # the saving request called nothing
    settings.QUALITY_UPDATES = "inline"  # what `manage.py quality_worker` sets for itself
    with django_capture_on_commit_callbacks(execute=True):
        quality_sweep()
    assert ItemPrediction.objects.filter(run_id=endpoint.run_id).count() == 30


@pytest.mark.postgres  # SQLite's in-memory test database locks tables across threads at once
@pytest.mark.django_db(transaction=True)
def test_thread_mode_calls_on_the_background_thread_and_the_request_does_not_wait(settings):
    """Served mode: the API's request returns before the first call is answered; the calls
    run on the background thread, in slices."""
    settings.QUALITY_UPDATES = "thread"
    settings.MODEL_ENDPOINT_SLICE = 0.5
    study, question, _ = text_study(n_items=3, n_answered=3)
    with model_server(train_on_answers(question)) as server:
        server.behaviour.sleep = 1.5
        api = APIClient()
        api.force_authenticate(study.created_by)
        started = time.monotonic()
        made = api.post(_api(study), {**GOOD, "url": server.url + "/json"}, format="json")
        took = time.monotonic() - started
        assert made.status_code == 201, made.content
        assert made.json()["predicting"] is True
        assert made.json()["status"]["predicted"] == 0
        assert took < 1.5  # no call answered inside the request
        assert background.idle(timeout=60)
        endpoint = ModelEndpoint.objects.get()
        assert ItemPrediction.objects.filter(run_id=endpoint.run_id).count() == 3
        assert len(server.requests) == 3
        endpoint.refresh_from_db()
        assert not endpoint.predicting


def test_a_queue_ordered_by_the_endpoints_uncertainty_follows_its_new_labels(
    served, django_capture_on_commit_callbacks
):
    """The endpoint's probabilities feed the queue's active order (docs/active_ordering.md):
    items labelled after the order was set take their places once the job has stored them."""
    from apps.annotations.models import QueueOrder
    from apps.studies.services import question_update

    study, question, _, server = served
    endpoint = configure(question, server)
    with django_capture_on_commit_callbacks(execute=True):
        question_update(
            question=question,
            settings={"queue_order": "uncertainty", "queue_order_run": endpoint.run_id},
        )
    state = QueueOrder.objects.get(study=study)
    assert state.mode == "natural"  # nothing labelled yet: it falls back
    with django_capture_on_commit_callbacks(execute=True):
        run_job(endpoint)
    state.refresh_from_db()
    assert (state.mode, state.fallback) == ("uncertainty", "")
    assert state.n_ordered > 0  # the open items, placed by the endpoint's entropy


# ---------- addresses the server may not call (SSRF) ----------

METADATA = "http://169.254.169.254/latest/meta-data/"


def _resolving(monkeypatch, names: dict[str, str]) -> list[str]:
    """``socket.getaddrinfo`` answering ``names`` (host -> IP) and the real resolver for the
    rest; returns the list of names asked about."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def fake(host, port, *args, **kwargs):
        asked.append(host)
        if host in names:
            ip = names[host]
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (ip, port or 80))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return asked


def _no_connection(monkeypatch) -> list[object]:
    """Record every outgoing connection attempt (and make none)."""
    attempts: list[object] = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise ConnectionRefusedError("the test allows no connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def _pointed_at(endpoint, url: str) -> None:
    """An endpoint saved before the guard existed (or whose name now resolves elsewhere)."""
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(url=url)
    endpoint.refresh_from_db()


@pytest.mark.parametrize(
    "url",
    [
        METADATA,
        "http://[fe80::1]/x",
        "http://[::ffff:169.254.169.254]/x",  # the metadata address mapped into IPv6
        "http://0.0.0.0:8000/x",
        "http://224.0.0.1/x",
    ],
)
def test_link_local_unspecified_and_multicast_addresses_are_refused_even_when_listed(
    api_client, settings, url
):
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    study, _ = running_study(n_items=2)
    _as(api_client, study.created_by)
    answer = api_client.post(_api(study), {**GOOD, "url": url}, format="json")
    assert answer.status_code == 400, answer.content
    assert "may not be called" in str(answer.json()["url"])
    assert not ModelEndpoint.objects.exists()


def test_the_metadata_address_is_refused_at_call_time_without_a_connection(
    served, monkeypatch, settings
):
    _, question, _, server = served
    endpoint = configure(question, server, max_calls=10)
    _pointed_at(endpoint, METADATA)
    attempts = _no_connection(monkeypatch)
    assert run_job(endpoint) == 0
    assert attempts == []
    calls = list(EndpointCall.objects.all())
    # refused, not retried, and the pass stops there instead of spending the budget
    assert [(c.outcome, c.attempt) for c in calls] == [("refused", 1)]
    assert "169.254.169.254" in calls[0].detail
    status = endpoint_status(endpoint=endpoint)
    assert [f.reason for f in status.failures] == ["refused (address not allowed)"]


def test_loopback_is_refused_unless_listed(api_client, settings):
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = []
    study, _ = running_study(n_items=2)
    _as(api_client, study.created_by)
    for url in ("http://127.0.0.1:8000/json", "http://10.1.2.3/json", "http://[::1]:80/json"):
        answer = api_client.post(_api(study), {**GOOD, "url": url}, format="json")
        assert answer.status_code == 400, url
        assert "MODEL_ENDPOINT_ALLOWED_NETWORKS" in str(answer.json()["url"])
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["10.0.0.0/8", "127.0.0.1/32"]
    made = api_client.post(_api(study), {**GOOD, "url": "http://10.1.2.3/json"}, format="json")
    assert made.status_code == 201, made.content


def test_loopback_listed_by_name_is_called(served, settings):
    _, question, _, server = served
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["localhost"]
    port = server.url.rsplit(":", 1)[1]
    endpoint = model_endpoint_save(
        question=question,
        created_by=question.study.created_by,
        kind="json",
        url=f"http://localhost:{port}/json",
        model="m",
        max_calls=2,
    )
    run_job(endpoint)
    assert [c.outcome for c in EndpointCall.objects.all()] == ["ok", "ok"]


def test_a_hostname_resolving_to_a_private_address_is_refused(
    api_client, served, monkeypatch, settings
):
    study, question, _, server = served
    asked = _resolving(monkeypatch, {"models.lab.example": "10.0.0.5"})
    _as(api_client, study.created_by)
    url = "http://models.lab.example/json"
    answer = api_client.post(_api(study), {**GOOD, "url": url}, format="json")
    assert answer.status_code == 400, answer.content
    assert "10.0.0.5" in str(answer.json()["url"])
    assert "models.lab.example" in asked
    # at call time too: a name that resolved to a public address when saved, privately now
    endpoint = configure(question, server, max_calls=10)
    _pointed_at(endpoint, "http://models.lab.example:8080/json")
    attempts = _no_connection(monkeypatch)
    run_job(endpoint)
    assert attempts == []
    call = EndpointCall.objects.get()
    assert call.outcome == "refused"
    assert "10.0.0.5" in call.detail


def test_a_socket_whose_peer_is_not_allowed_sends_nothing(served, monkeypatch, settings):
    """The name resolves to a public address, but the connection lands on loopback (as a
    rebinding resolver or a redirecting network could arrange): the socket's peer address
    is checked before the request is sent."""
    _, question, _, server = served
    endpoint = configure(question, server, max_calls=10)
    port = int(server.url.rsplit(":", 1)[1])
    _pointed_at(endpoint, f"http://public.example:{port}/json")
    _resolving(monkeypatch, {"public.example": "93.184.215.14"})
    real = socket.create_connection
    dialled: list[object] = []

    def elsewhere(address, *args, **kwargs):
        dialled.append(address)
        return real(("127.0.0.1", port), *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", elsewhere)
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = []
    run_job(endpoint)
    assert dialled == [("93.184.215.14", port)]  # the checked address, not the name
    assert server.requests == []
    call = EndpointCall.objects.get()
    assert call.outcome == "refused"
    assert "127.0.0.1" in call.detail


def test_a_name_resolving_to_loopback_is_called_only_when_listed(served, monkeypatch, settings):
    _, question, _, server = served
    endpoint = configure(question, server, max_calls=10)
    port = int(server.url.rsplit(":", 1)[1])
    _pointed_at(endpoint, f"http://rebind.example:{port}/json")
    _resolving(monkeypatch, {"rebind.example": "127.0.0.1"})
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = []
    run_job(endpoint)
    assert server.requests == []
    assert EndpointCall.objects.get().outcome == "refused"
    # listed: the same name is called, at the address it resolved to
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    model_endpoint_request(endpoint=endpoint)
    assert run_job(endpoint) > 0
    assert server.requests


def test_https_goes_through_the_checked_connection_and_verifies_the_name(
    monkeypatch, settings, tmp_path
):
    """Over TLS the socket is checked as over HTTP, and the certificate is still verified
    against the URL's name (the certificate names ``localhost``, not 127.0.0.1)."""
    _, question, _ = text_study(n_items=3, n_answered=3)
    certificate, key = self_signed_localhost(tmp_path)
    trusting = ssl.create_default_context(cafile=str(certificate))
    monkeypatch.setattr(ssl, "_create_default_https_context", lambda *a, **k: trusting)
    settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.1/32", "::1/128"]  # localhost
    with model_server(train_on_answers(question), tls=(certificate, key)) as server:
        assert server.url.startswith("https://localhost:")
        endpoint = configure(question, server, max_calls=10)
        assert run_job(endpoint) == 3
        assert len(server.requests) == 3
        # not listed: refused before the handshake
        settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = []
        ItemPrediction.objects.all().delete()
        model_endpoint_request(endpoint=endpoint)
        assert run_job(endpoint) == 0
        assert len(server.requests) == 3
        assert EndpointCall.objects.order_by("id").last().outcome == "refused"


def test_a_public_address_is_accepted_at_save(api_client, monkeypatch):
    _resolving(monkeypatch, {"api.models.example": "93.184.215.14"})
    study, _ = running_study(n_items=2)
    _as(api_client, study.created_by)
    made = api_client.post(
        _api(study), {**GOOD, "url": "https://93.184.215.14/v1/chat/completions"}, format="json"
    )
    assert made.status_code == 201, made.content
    url = "https://api.models.example/v1"
    changed = api_client.patch(f"{_api(study)}{made.json()['id']}/", {"url": url}, format="json")
    assert changed.status_code == 200, changed.content
