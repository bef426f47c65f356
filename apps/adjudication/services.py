"""Every write of the adjudication app: record an adjudication, set or remove an overlap rule,
train the disagreement forecast and give predicted-hard items more annotators."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

import numpy as np
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from analytics import background
from analytics.config import duty_rest, quality_config
from analytics.models import QualityState
from apps.adjudication.models import (
    Adjudication,
    DisagreementForecast,
    OverlapRule,
    PredictedDisagreement,
)
from apps.adjudication.selectors import curated_aggregates
from apps.annotations.models import QueueOrder
from apps.annotations.ordering import queue_order_follow
from apps.annotations.services import assignments_extend_disputed, assignments_fill
from apps.categorical.indicators import label_scale
from apps.items.models import Item
from apps.studies.access import ADJUDICATOR_ROLES, MANAGER_ROLE
from apps.studies.models import Question
from apps.studies.selectors import question_items, study_role
from core.types import Account


def _check_categorical(question: Question) -> None:
    if question.kind != Question.Kind.CATEGORICAL:
        raise ValidationError({"question": "Only categorical questions are adjudicated."})


@transaction.atomic
def adjudication_record(
    *,
    adjudicator: Account,
    question: Question,
    item: Item,
    label_key: str | None,
    note: str = "",
    suggestion: dict[str, Any] | None = None,
) -> Adjudication:
    """Settle one item of a categorical question: ``label_key`` is the final label, ``None``
    marks it genuinely ambiguous (``note`` then says why).

    Append-only: an earlier adjudication of the item stays; the new one is the latest.
    ``suggestion`` keeps the aggregate the adjudicator saw. Managers and reviewers only.
    """
    if study_role(user=adjudicator, study=question.study) not in ADJUDICATOR_ROLES:
        raise PermissionDenied("Only managers and reviewers of this study adjudicate.")
    _check_categorical(question)
    label = None
    if label_key is not None:
        label = question.labels.filter(key=label_key).first()
        if label is None:
            raise ValidationError({"label": f"{label_key!r} is not a label of this question."})
    adjudication = Adjudication(
        question=question,
        item=item,
        adjudicator=adjudicator,
        label=label,
        ambiguous=label is None,
        note=note.strip(),
        suggestion=suggestion or {},
    )
    adjudication.full_clean()
    adjudication.save()
    return adjudication


@transaction.atomic
def overlap_rule_set(
    *,
    manager: Account,
    question: Question,
    base_k: int,
    k_max: int,
    threshold: float,
    measure: str = OverlapRule.Measure.AAD_RMSE,
) -> OverlapRule:
    """Give a question adaptive overlap (or change its rule). Managers only.

    ``measure`` reads an item's disagreement (:class:`OverlapRule.Measure`; the question's kind
    decides which apply: ``OverlapRule.MEASURES_OF_KIND``). Items already answered that the rule
    asks more of get their extra annotator at once."""
    if study_role(user=manager, study=question.study) not in MANAGER_ROLE:
        raise PermissionDenied("Only managers of this study change its overlap.")
    if question.kind not in OverlapRule.MEASURES_OF_KIND:
        raise ValidationError(
            {"question": "Adaptive overlap needs a categorical or trace question."}
        )
    rule = OverlapRule.objects.filter(question=question).first() or OverlapRule(question=question)
    rule.base_k, rule.k_max, rule.threshold, rule.measure = base_k, k_max, threshold, measure
    rule.full_clean()
    rule.save()
    question.overlap_rule = rule  # what the question reads from now on
    assignments_extend_disputed(question=question)
    return rule


@transaction.atomic
def overlap_rule_remove(*, manager: Account, question: Question) -> bool:
    """Return the question to fixed overlap; whether it had a rule. Managers only."""
    if study_role(user=manager, study=question.study) not in MANAGER_ROLE:
        raise PermissionDenied("Only managers of this study change its overlap.")
    deleted, _ = OverlapRule.objects.filter(question=question).delete()
    relation = Question._meta.get_field("overlap_rule")
    if relation.is_cached(question):
        relation.delete_cached_value(question)
    return bool(deleted)


def _forecast_data(question: Question) -> tuple[list[int], list[str], np.ndarray, list[int], int]:
    """Training items (text items with two counted answers or more), their texts and AAD-RMSE,
    the text items to predict (the others), and the typical number of answers."""
    found = curated_aggregates(question=question)
    agg = found.aggregates
    texts = dict(  # the text items the question asks about (its scope)
        question_items(question)
        .filter(kind=Item.Kind.TEXT)
        .order_by("id")
        .values_list("id", "text")
    )
    observed = (agg.n_answers >= 2) & np.isfinite(agg.disagreement)
    observed &= np.isin(found.item_ids, list(texts))
    train_ids = [int(i) for i in found.item_ids[observed]]
    taken = set(train_ids)
    new_ids = [item_id for item_id in texts if item_id not in taken]
    n_answers = int(np.median(agg.n_answers[observed])) if observed.any() else 3
    y = agg.disagreement[observed]
    return train_ids, [texts[i] for i in train_ids], y, new_ids, max(2, n_answers)


def disagreement_forecast_train(*, question: Question) -> DisagreementForecast | None:
    """Predict, from their text, the AAD-RMSE of the question's text items not yet answered
    twice, with a model trained on the items that were (excluded annotators left out).

    Runs off the request path (an :data:`analytics.pipeline.AFTER_UPDATE_HOOKS` hook: after
    each quality update). Returns ``None`` below ``MIN_TRAIN`` training items; unchanged
    training data (same items, same disagreement) keeps the forecast as it is.
    """
    if question.kind != Question.Kind.CATEGORICAL:
        return None
    started = time.thread_time()
    try:
        return _forecast_fit(question)
    finally:
        _FORECAST_TOOK[question.pk] = time.thread_time() - started


def _forecast_fit(question: Question) -> DisagreementForecast | None:
    """:func:`disagreement_forecast_train` past its checks."""
    # imported here: scikit-learn costs a process about 90 MB and 0.45 s, and only the quality
    # worker trains the forecast (a web process imports this module, never calls this)
    from analytics.metrics.disagreement_prediction import (
        MIN_TRAIN,
        attainable_levels,
        predict_disagreement,
    )

    train_ids, train_texts, y, new_ids, n_answers = _forecast_data(question)
    if len(train_ids) < MIN_TRAIN:
        return None
    digest = hashlib.sha256(np.asarray(train_ids, dtype=np.int64).tobytes())
    digest.update(np.round(y, 9).tobytes())
    digest.update(np.asarray(new_ids, dtype=np.int64).tobytes())
    fingerprint = digest.hexdigest()
    current = DisagreementForecast.objects.filter(question=question).first()
    if current is not None and current.fingerprint == fingerprint:
        # found current: the throttle (QUALITY_FORECAST_INTERVAL) counts from now
        DisagreementForecast.objects.filter(pk=current.pk).update(trained_at=timezone.now())
        return current
    keys = list(question.labels.order_by("position", "id").values_list("key", flat=True))
    levels = attainable_levels(label_scale(question, keys).points, n_answers=n_answers)
    new_texts = dict(Item.objects.filter(pk__in=new_ids).values_list("id", "text"))
    fit = predict_disagreement(train_texts, y, [new_texts[i] for i in new_ids], levels=levels)
    with transaction.atomic():
        forecast, _ = DisagreementForecast.objects.update_or_create(
            question=question,
            defaults={
                "n_train": fit.n_train,
                "folds": fit.folds,
                "cv_mse": fit.cv_mse,
                "cv_accuracy": fit.cv_accuracy,
                "baseline_mse": fit.baseline_mse,
                "baseline_accuracy": fit.baseline_accuracy,
                "levels": [round(float(level), 6) for level in fit.levels],
                "fingerprint": fingerprint,
            },
        )
        forecast.predictions.all().delete()
        PredictedDisagreement.objects.bulk_create(
            PredictedDisagreement(forecast=forecast, item_id=item_id, value=float(value))
            for item_id, value in zip(new_ids, fit.predicted, strict=True)
        )
        queue_order_follow(study_id=question.study_id, mode=QueueOrder.Mode.DISAGREEMENT)
    return forecast


#: The background thread's queue of forecast retrainings (:mod:`analytics.background`).
FORECAST_JOB = "adjudication.forecast"


def disagreement_forecast_after_update(question_id: int) -> None:
    """The pipeline hook: retrain the question's forecast if it is categorical, at most every
    ``QUALITY_FORECAST_INTERVAL`` seconds (0: after every update); an update inside the
    interval is caught up by :func:`disagreement_forecasts_sweep` once it has passed.

    In the quality worker (``QUALITY_SLOW_WORK_APART``) the retraining runs on its background
    thread, as the intervals' bootstraps: in the pass it took 3.4 s with 10,000 answers on
    16,000 text items, during which no question was updated nor any dashboard pushed.
    """
    question = (
        Question.objects.filter(pk=question_id, kind=Question.Kind.CATEGORICAL)
        .select_related("disagreement_forecast")
        .first()
    )
    if question is None or not _forecast_due(question):
        return
    if not quality_config().slow_work_apart:
        disagreement_forecast_train(question=question)
    else:  # due until it has run: asked once
        background.enqueue(
            question_id, _forecast_retrain, queue=FORECAST_JOB, drain=False, once=True
        )


def _forecast_retrain(question_id: int) -> None:
    question = Question.objects.filter(pk=question_id).first()
    if question is not None:
        disagreement_forecast_train(question=question)


# question id -> monotonic time of this process's last try of a question without a forecast
# (fewer than MIN_TRAIN items answered twice: nothing stored to tell when it was tried)
_FORECAST_TRIED: dict[int, float] = {}
# question id -> CPU seconds this process's last retraining of its forecast took (on its thread)
_FORECAST_TOOK: dict[int, float] = {}


def _forecast_due(question: Question) -> bool:
    """Whether the question's forecast may be retrained now (see the hook): its interval has
    passed, and the last retraining's time divided by ``QUALITY_FORECAST_DUTY``."""
    config = quality_config()
    interval = config.forecast_interval
    if not interval:
        return True
    try:
        forecast = question.disagreement_forecast
    except DisagreementForecast.DoesNotExist:
        forecast = None
    if forecast is not None:
        rest = max(interval, duty_rest(_FORECAST_TOOK.get(question.pk, 0.0), config.forecast_duty))
        return bool(forecast.trained_at <= timezone.now() - timedelta(seconds=rest))
    now = time.monotonic()
    tried = _FORECAST_TRIED.get(question.pk)
    if tried is not None and now - tried < interval:
        return False
    _FORECAST_TRIED[question.pk] = now
    return True


def disagreement_forecasts_sweep() -> list[int]:
    """Retrain the forecasts left behind by the throttle: categorical questions whose quality
    state changed after their forecast was trained, once the interval has passed; returns
    their ids. A sweep hook (:data:`analytics.pipeline.SWEEP_HOOKS`): one query per pass."""
    interval = quality_config().forecast_interval
    if not interval:
        return []
    due = list(
        QualityState.objects.filter(
            question__kind=Question.Kind.CATEGORICAL,
            question__disagreement_forecast__trained_at__lt=F("updated_at"),
            question__disagreement_forecast__trained_at__lte=timezone.now()
            - timedelta(seconds=interval),
        ).values_list("question_id", flat=True)
    )
    for question_id in due:
        disagreement_forecast_after_update(question_id)
    return due


@transaction.atomic
def predicted_overlap_raise(
    *, manager: Account, question: Question, threshold: float, k: int
) -> int:
    """Give every item whose predicted disagreement exceeds ``threshold`` ``k`` first-round
    annotators from the start (more than the study's overlap; never fewer than it has).
    Managers only. Returns the number of assignments added."""
    if study_role(user=manager, study=question.study) not in MANAGER_ROLE:
        raise PermissionDenied("Only managers of this study change its overlap.")
    if threshold < 0:
        raise ValidationError({"threshold": "The threshold cannot be negative."})
    if k < 2:
        raise ValidationError({"k": "At least two annotators per item."})
    hard = PredictedDisagreement.objects.filter(
        forecast__question=question, value__gt=threshold
    ).values_list("item_id", flat=True)
    return assignments_fill(study=question.study, overlap_for=dict.fromkeys(hard, k))
