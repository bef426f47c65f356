"""Predicted disagreement before annotation: trained by the pipeline hook, shown and sorted on
the study overview, cross-validated figures equal to scikit-learn's, overlap raised."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone
from sklearn.model_selection import KFold, cross_val_score

from analytics import background
from analytics.metrics import disagreement_prediction as prediction
from analytics.metrics.disagreement_prediction import (
    PAPER_LEVELS,
    MajorityLevel,
    disagreement_regressor,
    level_accuracy,
    predict_disagreement,
    to_levels,
)
from analytics.pipeline import AFTER_UPDATE_HOOKS, quality_process
from apps.adjudication import services
from apps.adjudication.models import DisagreementForecast
from apps.adjudication.services import (
    _forecast_due,
    disagreement_forecast_after_update,
    disagreement_forecast_train,
    disagreement_forecasts_sweep,
    predicted_overlap_raise,
)
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from apps.studies.models import Membership, Question
from apps.studies.services import membership_add
from benchmarks.predicted_disagreement import simulate_text_study
from tests.factories import UserFactory, running_study

KEYS = {-1: "negative", 0: "neutral", 1: "positive"}
N_ITEMS, N_ANSWERED = 40, 30


def _text_study(n_annotators: int = 3):
    """40 simulated text items, the first 30 answered by the three simulated annotators."""
    sim = simulate_text_study(n_items=N_ITEMS, seed=3)
    study, annotators = running_study(n_items=N_ITEMS, n_annotators=n_annotators, overlap=3)
    items = list(study.items.order_by("position"))
    for item, text in zip(items, sim.texts, strict=True):
        item.text = text
    type(items[0]).objects.bulk_update(items, ["text"])
    records = [
        FinishedAnnotation(items[i].external_id, user.username, "sentiment", KEYS[int(label)])
        for user, row in zip(annotators, sim.answers, strict=False)
        for i, label in enumerate(row[:N_ANSWERED])
    ]
    return study, annotators, items, sim, records


@pytest.fixture(autouse=True)
def _forecast_after_every_update(settings):
    """The forecast retrained after every quality update (the suite keeps production's
    ``QUALITY_FORECAST_INTERVAL``: a fit after each of a test's answers cost seconds)."""
    settings.QUALITY_FORECAST_INTERVAL = 0


@pytest.fixture
def text_study(db, django_capture_on_commit_callbacks):
    study, _, items, sim, records = _text_study()
    with django_capture_on_commit_callbacks(execute=True):  # the quality update and its hooks
        annotations_import_finished(study=study, records=records)
    return study, items, sim


def test_the_pipeline_hook_trains_the_forecast_after_a_quality_update(text_study):
    study, items, _ = text_study
    assert disagreement_forecast_after_update in AFTER_UPDATE_HOOKS
    forecast = DisagreementForecast.objects.get(question__study=study)
    assert forecast.n_train == N_ANSWERED
    predicted = dict(forecast.predictions.values_list("item_id", "value"))
    assert set(predicted) == {item.pk for item in items[N_ANSWERED:]}  # the unanswered ones
    assert forecast.levels == pytest.approx(PAPER_LEVELS.tolist(), abs=1e-6)


def test_cross_validated_figures_equal_scikit_learns(text_study):
    study, _, sim = text_study
    forecast = DisagreementForecast.objects.get(question__study=study)
    texts, y = sim.texts[:N_ANSWERED], sim.disagreement[:N_ANSWERED]
    cv = KFold(n_splits=5, shuffle=True, random_state=0)
    mse = -cross_val_score(
        disagreement_regressor(), texts, y, cv=cv, scoring="neg_mean_squared_error"
    )
    assert forecast.cv_mse == pytest.approx(mse.mean())
    baseline = -cross_val_score(
        MajorityLevel(tuple(PAPER_LEVELS)), texts, y, cv=cv, scoring="neg_mean_squared_error"
    )
    assert forecast.baseline_mse == pytest.approx(baseline.mean())
    accuracy = []  # the 4-level accuracy, fold by fold, by hand
    for train, test in cv.split(texts):
        model = disagreement_regressor().fit([texts[i] for i in train], y[train])
        hit = to_levels(model.predict([texts[i] for i in test]), PAPER_LEVELS)
        accuracy.append(np.mean(hit == to_levels(y[test], PAPER_LEVELS)))
    assert forecast.cv_accuracy == pytest.approx(np.mean(accuracy))


def test_predictions_follow_the_words_that_make_items_hard():
    sim = simulate_text_study(n_items=600, seed=0)
    fit = predict_disagreement(sim.texts[:500], sim.disagreement[:500], sim.texts[500:])
    hedged = sim.hedged[500:]
    assert fit.predicted[hedged].mean() > 1.5 * fit.predicted[~hedged].mean()
    assert fit.cv_mse < fit.baseline_mse
    truth = sim.disagreement[500:]
    majority = MajorityLevel().fit(None, sim.disagreement[:500]).predict(truth)
    assert np.mean((fit.predicted - truth) ** 2) < np.mean((majority - truth) ** 2)
    assert level_accuracy(truth, majority, levels=PAPER_LEVELS) == np.mean(truth == 0)


def test_unchanged_training_data_is_not_retrained(text_study, monkeypatch):
    study, _, _ = text_study
    question = study.questions.get()
    before = DisagreementForecast.objects.get(question=question)
    monkeypatch.setattr(
        "analytics.metrics.disagreement_prediction.predict_disagreement",
        lambda *a, **k: pytest.fail("retrained on the same data"),
    )
    assert disagreement_forecast_train(question=question) == before


def test_too_few_answered_items_make_no_forecast(db):
    study, annotators = running_study(n_items=12, n_annotators=2)
    question = study.questions.get()
    items = list(study.items.order_by("position"))
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(item.external_id, user.username, "sentiment", "neutral")
            for item in items[:5]
            for user in annotators
        ],
    )
    assert disagreement_forecast_train(question=question) is None
    assert not DisagreementForecast.objects.exists()


def _overview(client, study, **query):
    return client.get(reverse("studies:overview", args=[study.pk]), query).content.decode()


def test_the_overview_shows_the_figures_and_sorts_by_predicted_disagreement(client, text_study):
    study, _, _ = text_study
    forecast = DisagreementForecast.objects.get(question__study=study)
    client.force_login(study.created_by)
    html = _overview(client, study)
    assert 'id="predicted-disagreement"' in html
    assert f"{forecast.cv_mse:.3f}" in html
    assert f"{round(forecast.cv_accuracy * 100)}%" in html
    assert f"{forecast.baseline_mse:.3f}" in html
    hardest = forecast.predictions.order_by("-value", "item__position").first().item
    sorted_html = _overview(client, study, question="sentiment", sort="predicted")
    first_row = sorted_html.split("<tbody>")[-1].split("</tr>")[0]  # the coverage table
    assert hardest.external_id in first_row
    assert 'aria-sort="descending"' in sorted_html
    fragment = client.get(
        reverse("studies:overview", args=[study.pk]),
        {"question": "sentiment", "sort": "predicted", "page": "2"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert fragment.lstrip().startswith('<section class="card" id="coverage"')
    assert "sort=predicted" in fragment  # the pages keep the order


def test_predicted_hard_items_get_more_annotators(text_study):
    study, items, _ = text_study
    question = study.questions.get()
    forecast = DisagreementForecast.objects.get(question=question)
    threshold = float(np.median(list(forecast.predictions.values_list("value", flat=True))))
    hard = set(forecast.predictions.filter(value__gt=threshold).values_list("item_id", flat=True))
    assert hard
    # three annotators and overlap 3: a fourth annotator gives room for a higher k
    membership_add(study=study, user=UserFactory(), role=Membership.Role.ANNOTATOR)
    before = {item.pk: Assignment.objects.filter(item=item, round=1).count() for item in items}
    added = predicted_overlap_raise(
        manager=study.created_by, question=question, threshold=threshold, k=4
    )
    after = {item.pk: Assignment.objects.filter(item=item, round=1).count() for item in items}
    assert added == sum(after[i] - before[i] for i in after)
    assert all(after[i] == 4 for i in hard)
    assert all(after[i] == before[i] for i in after if i not in hard)


def test_raising_the_overlap_checks_its_input_and_the_role(text_study):
    study, _, _ = text_study
    question = study.questions.get()
    annotator = study.memberships.filter(role="annotator").first().user
    with pytest.raises(PermissionDenied):
        predicted_overlap_raise(manager=annotator, question=question, threshold=0.5, k=4)
    with pytest.raises(ValidationError):
        predicted_overlap_raise(manager=study.created_by, question=question, threshold=-1, k=4)


def _training_threads(monkeypatch) -> list[str]:
    """The names of the threads the forecast is fitted on from now, in order."""
    trained_on: list[str] = []
    real = prediction.predict_disagreement

    def spy(*args, **kwargs):
        trained_on.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(prediction, "predict_disagreement", spy)
    return trained_on


def _answer_next_item(question, annotators, item, sim) -> None:
    """Each simulated annotator answers ``item`` (the first not answered at the import)."""
    for user, row in zip(annotators, sim.answers, strict=True):
        annotations_submit(
            annotator=user,
            assignment=Assignment.objects.get(item=item, annotator=user, round=1),
            answers={question: KEYS[int(row[N_ANSWERED])]},
            idempotency_key=uuid.uuid4(),
        )


@pytest.mark.postgres  # SQLite's in-memory test database locks tables across threads at once
@pytest.mark.django_db(transaction=True)
def test_answers_retrain_the_forecast_on_the_background_thread(settings, monkeypatch):
    """In the served mode (``QUALITY_UPDATES=thread``) a submit only records the answer; the
    quality update and the forecast's retraining run on the background thread."""
    settings.QUALITY_UPDATES = "thread"
    study, annotators, items, sim, records = _text_study()
    annotations_import_finished(study=study, records=records)  # a bulk import rebuilds inline
    assert background.idle(timeout=60)
    trained_on = _training_threads(monkeypatch)
    question = study.questions.get()
    item = items[N_ANSWERED]
    _answer_next_item(question, annotators, item, sim)
    assert background.idle(timeout=60)
    assert trained_on
    assert set(trained_on) == {"quality-updates"}
    forecast = DisagreementForecast.objects.get(question=question)
    assert forecast.n_train == N_ANSWERED + 1
    assert not forecast.predictions.filter(item=item).exists()


@pytest.mark.django_db(transaction=True)  # the background thread reads what was committed
def test_the_quality_worker_retrains_the_forecast_beside_its_passes(settings, monkeypatch):
    """The retraining ran in the quality worker's pass, after the publish: 3.4 s of the pass
    with 10,000 answers on 16,000 text items, every ``QUALITY_FORECAST_INTERVAL``, during
    which no question's answers were analysed and no dashboard was pushed. The worker
    (``QUALITY_SLOW_WORK_APART``) now leaves it to its background thread, as the intervals'
    bootstraps."""
    study, annotators, items, sim, records = _text_study()
    annotations_import_finished(study=study, records=records)
    question = study.questions.get()
    trained_on = _training_threads(monkeypatch)
    settings.QUALITY_UPDATES = "worker"  # the answers wait in the outbox for the pass
    item = items[N_ANSWERED]
    _answer_next_item(question, annotators, item, sim)
    settings.QUALITY_UPDATES, settings.QUALITY_SLOW_WORK_APART = "inline", True  # the worker's
    assert quality_process(question_id=question.pk) == len(annotators)  # the pass
    assert threading.current_thread().name not in trained_on  # not in the pass
    # (the in-memory test database allows one thread at a time: wait before reading)
    assert background.idle(timeout=60)
    assert trained_on == ["quality-updates"]
    assert DisagreementForecast.objects.get(question=question).n_train == N_ANSWERED + 1


@pytest.mark.django_db(transaction=True)  # the background thread reads the question
def test_the_worker_asks_for_a_retraining_once_until_it_has_run(settings, monkeypatch):
    """Every pass until the retraining has run on the background thread finds it due; each
    asked for it again, so a retraining that outlasted a pass ran a second time right after
    the first (the worker's CPU per answer 4.4-5.4 -> 5.1-5.6 ms at 32 clients)."""
    study, *_ = _text_study()
    question = study.questions.get()
    settings.QUALITY_SLOW_WORK_APART = True
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def slow_training(*, question):  # the fit itself, without the database
        runs.append(question.pk)
        started.set()
        release.wait(timeout=30)

    monkeypatch.setattr(services, "disagreement_forecast_train", slow_training)
    disagreement_forecast_after_update(question.pk)
    assert started.wait(timeout=30)
    disagreement_forecast_after_update(question.pk)  # the next pass, while it runs
    release.set()
    assert background.idle(timeout=30)
    assert runs == [question.pk]
    disagreement_forecast_after_update(question.pk)  # due again (interval 0): asked again
    assert background.idle(timeout=30)
    assert runs == [question.pk, question.pk]


def test_a_slow_retraining_rests_its_time_over_the_duty(text_study, settings, monkeypatch):
    """The retraining's cost grows with the question (a Dawid-Skene aggregation of every
    answer, a cross-validated fit over every answered item: 3.4 s with 10,000 answers on
    16,000 items), and a fixed ``QUALITY_FORECAST_INTERVAL`` let it take any share of the
    worker. It now rests at least its own time over ``QUALITY_FORECAST_DUTY``, as the
    intervals do: 0.3 s at a tenth of a core rests 3 s, though the interval is 0.5 s. Its
    time is CPU time: its thread runs at the lowest priority in the worker, and the time it
    waits for a core is not work."""
    study, _, _ = text_study
    question = study.questions.get()
    settings.QUALITY_FORECAST_INTERVAL, settings.QUALITY_FORECAST_DUTY = 0.5, 0.1
    real = prediction.predict_disagreement

    def slow(*args, **kwargs):
        until = time.thread_time() + 0.3
        while time.thread_time() < until:
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(prediction, "predict_disagreement", slow)
    DisagreementForecast.objects.filter(question=question).update(fingerprint="stale")
    assert disagreement_forecast_train(question=question).fingerprint != "stale"

    def due_after(seconds: float) -> bool:
        DisagreementForecast.objects.filter(question=question).update(
            trained_at=timezone.now() - timedelta(seconds=seconds)
        )
        return _forecast_due(Question.objects.get(pk=question.pk))

    took = services._FORECAST_TOOK[question.pk]  # the work, the data and the fit
    assert took >= 0.3
    assert not due_after(1.0)  # past the interval, within the rest (at least 3 s)
    assert due_after(took / 0.1 + 0.5)
    settings.QUALITY_FORECAST_DUTY = 0  # no rest: the interval alone
    assert due_after(1.0)


def test_the_items_list_shows_and_sorts_by_predicted_disagreement(client, text_study):
    study, _, _ = text_study
    forecast = DisagreementForecast.objects.get(question__study=study)
    expected = list(
        forecast.predictions.order_by("-value", "item__position").values_list(
            "item__external_id", flat=True
        )
    )
    client.force_login(study.created_by)
    url = reverse("items:list", args=[study.pk])
    page = client.get(url, {"sort": "-predicted"})
    assert page.status_code == 200
    rows = page.context["rows"]
    assert [item.external_id for item in rows[: len(expected)]] == expected
    assert all(item.predicted is None for item in rows[len(expected) :])  # answered: none
    assert "Predicted disagreement" in page.content.decode()
    assert f'data-predicted="{rows[0].predicted}"' in page.content.decode()


def test_the_forecast_predicts_only_the_items_the_question_applies_to(text_study):
    """Issue 24: a question scoped to some items gets no prediction for the others (a
    calibration screen is no sentence to forecast)."""
    from apps.studies.services import question_update

    study, items, _ = text_study
    question = study.questions.get()
    kept = [item.external_id for item in items[:35]]
    question_update(question=question, scope={"items": kept})
    forecast = disagreement_forecast_train(question=question)
    predicted = set(forecast.predictions.values_list("item_id", flat=True))
    assert predicted == {item.pk for item in items[N_ANSWERED:35]}


def test_a_busy_question_retrains_its_forecast_at_most_every_interval(
    db, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """Retraining cost the quality worker about 300 ms of every pass for 2,000 items (a
    Dawid-Skene aggregation, a cross-validated fit, a row per unanswered item): answers
    inside ``QUALITY_FORECAST_INTERVAL`` leave it for the sweep, which retrains once the
    interval has passed, so the forecast still ends on the latest answers."""
    study, annotators, items, sim, records = _text_study()
    with django_capture_on_commit_callbacks(execute=True):
        annotations_import_finished(study=study, records=records)
    question = study.questions.get()
    assert DisagreementForecast.objects.get(question=question).n_train == N_ANSWERED
    settings.QUALITY_FORECAST_INTERVAL = 30
    fits: list[int] = []
    real = prediction.predict_disagreement
    monkeypatch.setattr(
        prediction, "predict_disagreement", lambda *a, **k: fits.append(1) or real(*a, **k)
    )
    item = items[N_ANSWERED]
    with django_capture_on_commit_callbacks(execute=True):  # the quality updates and hooks
        _answer_next_item(question, annotators, item, sim)
    assert fits == []  # inside the interval: not retrained
    assert DisagreementForecast.objects.get(question=question).n_train == N_ANSWERED
    assert disagreement_forecasts_sweep() == []  # nor by the sweep, yet
    DisagreementForecast.objects.filter(question=question).update(
        trained_at=timezone.now() - timedelta(seconds=31)
    )
    assert disagreement_forecasts_sweep() == [question.pk]
    assert fits == [1]
    forecast = DisagreementForecast.objects.get(question=question)
    assert forecast.n_train == N_ANSWERED + 1
    assert not forecast.predictions.filter(item=item).exists()
    assert disagreement_forecasts_sweep() == []  # current again
