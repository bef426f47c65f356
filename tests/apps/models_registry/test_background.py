"""Runs are evaluated off the request: outbox, claim, the three dispatch modes, the sweep."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from analytics import background
from analytics.pipeline import SWEEP_HOOKS, quality_sweep
from analytics.worker import quality_worker_run
from apps.models_registry import services
from apps.models_registry.models import ModelRun, ModelRunEvaluation
from apps.models_registry.services import (
    Upload,
    model_run_register,
    model_runs_evaluate_pending,
    model_runs_request,
)
from tests.apps.models_registry.simulation import jsonl, prediction_rows, simulated_study


def _register(sim, name: str = "oracle") -> ModelRun:
    return model_run_register(
        study=sim.study,
        question=sim.question,
        name=name,
        version="1",
        created_by=sim.study.created_by,
        predictions=Upload(jsonl(prediction_rows(sim, sim.ratings)), "jsonl"),
    )


def _spy_evaluations(monkeypatch) -> list[str]:
    """Record the thread each evaluation runs on."""
    threads: list[str] = []
    real = services.model_run_evaluate

    def spy(**kwargs):
        threads.append(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(services, "model_run_evaluate", spy)
    return threads


def test_registering_stores_the_run_pending_and_evaluates_only_after_the_commit(
    sim, monkeypatch, django_capture_on_commit_callbacks
):
    threads = _spy_evaluations(monkeypatch)
    with django_capture_on_commit_callbacks() as callbacks:
        run = _register(sim)
    assert threads == []  # the registering call evaluated nothing
    run.refresh_from_db()
    assert run.evaluating
    assert run.evaluation_started_at is None
    assert len(callbacks) == 1
    callbacks[0]()  # inline mode: the commit's callback evaluates
    run.refresh_from_db()
    assert not run.evaluating
    assert len(threads) == 1
    assert run.evaluations.get().figures["dic"] == 0.0


def test_requests_during_an_evaluation_wait_for_it_and_are_served_once_after(
    sim, register, monkeypatch
):
    """A second evaluator finds the run claimed and leaves it; two presses while it runs
    give one more evaluation after it, never a concurrent one."""
    run = register("oracle", sim.ratings)
    real = services.model_run_evaluate
    nested: list[int] = []
    running = threading.Event()

    def evaluate_while_pressed(**kwargs):
        assert not running.is_set(), "two evaluations of the run at once"
        running.set()
        try:
            if not nested:  # Recompute pressed twice during the first evaluation...
                model_runs_request(question_id=sim.question.pk)
                model_runs_request(question_id=sim.question.pk)
                # ...and a second evaluator (another worker) woken by them
                nested.append(model_runs_evaluate_pending(question_id=sim.question.pk))
            return real(**kwargs)
        finally:
            running.clear()

    monkeypatch.setattr(services, "model_run_evaluate", evaluate_while_pressed)
    model_runs_request(question_id=sim.question.pk)
    assert model_runs_evaluate_pending(question_id=sim.question.pk) == 2
    assert nested == [0]  # the run was claimed: the second evaluator did nothing
    assert run.evaluations.count() == 3  # registration, the first press, one for the two more
    run.refresh_from_db()
    assert not run.evaluating
    assert model_runs_evaluate_pending(question_id=sim.question.pk) == 0  # nothing left


def test_a_failing_evaluation_releases_its_claim(sim, register, monkeypatch, caplog):
    run = register("oracle", sim.ratings)

    def fail(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "model_run_evaluate", fail)
    model_runs_request(question_id=sim.question.pk)
    assert model_runs_evaluate_pending(question_id=sim.question.pk) == 0
    run.refresh_from_db()
    assert not run.evaluating  # not stuck "evaluating…"
    assert "evaluation of model run" in caplog.text


def test_the_sweep_dispatches_runs_left_waiting_and_abandoned_claims(
    sim, register, settings, django_capture_on_commit_callbacks
):
    """A request no evaluator took (worker down) and a claim whose process died are picked up
    by the quality sweep; a claim younger than the timeout is left to its evaluator."""
    assert services.model_runs_sweep in SWEEP_HOOKS
    waiting, abandoned = register("waiting", sim.ratings), register("abandoned", sim.ratings)
    ModelRun.objects.filter(pk=waiting.pk).update(evaluation_requested_at=timezone.now())
    settings.MODEL_REGISTRY_EVALUATION_TIMEOUT = 600
    ModelRun.objects.filter(pk=abandoned.pk).update(
        evaluation_started_at=timezone.now() - timedelta(seconds=601)
    )
    with django_capture_on_commit_callbacks(execute=True):  # (served: no transaction open)
        assert services.model_runs_sweep() == [sim.question.pk]
    for run in (waiting, abandoned):
        run.refresh_from_db()
        assert not run.evaluating
        assert run.evaluations.count() == 2
    now = timezone.now()  # claimed by a live evaluator, and asked for again meanwhile
    ModelRun.objects.filter(pk=waiting.pk).update(
        evaluation_started_at=now, evaluation_requested_at=now
    )
    with django_capture_on_commit_callbacks(execute=True):
        quality_sweep()  # runs the registry's hook too
    waiting.refresh_from_db()
    assert waiting.evaluating
    assert waiting.evaluations.count() == 2


@pytest.mark.django_db(transaction=True)  # the worker closes old connections, as served
def test_worker_mode_leaves_the_job_to_the_quality_workers_next_pass(settings):
    settings.QUALITY_UPDATES = "worker"
    sim = simulated_study()
    run = _register(sim)  # committed: nothing ran in this (web) process
    assert run.evaluating
    assert not run.evaluations.exists()
    settings.QUALITY_UPDATES = "inline"  # what `manage.py quality_worker` sets for itself
    assert quality_worker_run(interval=0, stop=threading.Event(), passes=1) == 1
    run.refresh_from_db()
    assert not run.evaluating
    assert run.evaluations.get().figures["dic"] == 0.0


@pytest.mark.postgres  # SQLite's in-memory test database locks tables across threads at once
@pytest.mark.django_db(transaction=True)
def test_thread_mode_evaluates_on_the_background_thread_and_the_page_shows_it(
    settings, monkeypatch
):
    """Served mode (``QUALITY_UPDATES=thread``): the API's register request returns with the
    run pending; the evaluation runs on the background thread; then the figures are shown."""
    settings.QUALITY_UPDATES = "thread"
    sim = simulated_study()
    threads = _spy_evaluations(monkeypatch)
    gate = threading.Event()
    real = services.model_run_evaluate

    def held(**kwargs):  # hold the evaluation until the response has been checked
        assert gate.wait(timeout=60)
        return real(**kwargs)

    monkeypatch.setattr(services, "model_run_evaluate", held)
    api = APIClient()
    api.force_authenticate(sim.study.created_by)
    predictions = jsonl(prediction_rows(sim, sim.ratings))
    predictions.name = "p.jsonl"
    data = {"question": sim.question.key, "name": "oracle", "version": "1"}
    url = f"/api/studies/{sim.study.pk}/model-runs/"
    response = api.post(url, {**data, "predictions": predictions}, format="multipart")
    assert response.status_code == 201
    assert (response.json()["evaluating"], response.json()["evaluation"]) == (True, None)
    run = ModelRun.objects.get(pk=response.json()["id"])
    assert not ModelRunEvaluation.objects.filter(run=run).exists()
    # two presses of Recompute while the first evaluation is held: no second one at once
    pressed = api.post(f"{url}{run.pk}/recompute/")
    assert pressed.status_code == 202
    gate.set()
    assert background.idle(timeout=120)
    assert set(threads) == {"quality-updates"}
    run.refresh_from_db()
    assert not run.evaluating
    assert run.evaluations.count() in (1, 2)  # the press came before or after the claim
    assert len(threads) == run.evaluations.count()
    page_client = Client()
    page_client.force_login(sim.study.created_by)
    page = page_client.get(reverse("models_registry:run", args=[sim.study.pk, run.pk]))
    html = page.content.decode()
    assert 'id="figure-dic">0.000' in html
    assert 'id="mr-evaluating"' not in html


def test_runs_stay_asked_for_when_the_answers_cannot_be_read(sim, register, monkeypatch):
    """The database away while reading the answers: the claims are given back as requests,
    so the next dispatch or sweep evaluates the runs (not stuck "running" until the timeout)."""
    run = register("oracle", sim.ratings)

    def away(**kwargs):
        raise ConnectionError("database away")

    monkeypatch.setattr(services, "question_answers", away)
    model_runs_request(question_id=sim.question.pk)
    with pytest.raises(ConnectionError):
        model_runs_evaluate_pending(question_id=sim.question.pk)
    run.refresh_from_db()
    assert run.evaluation_started_at is None
    assert run.evaluation_requested_at is not None
    monkeypatch.undo()
    assert model_runs_evaluate_pending(question_id=sim.question.pk) == 1
    run.refresh_from_db()
    assert not run.evaluating
