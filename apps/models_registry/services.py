"""Every write of the model registry: registering a run from its uploads, evaluating runs.

Cost and throttling of :func:`model_runs_recompute` (meant for the live pipeline, after
annotations of a question changed): one aggregate query decides which runs are stale; only
then are the human answers read, once for all of them. Each stale run costs one read of its
predictions and a handful of vectorised agreement matrices (its own, the humans', ten Random
draws, Consensus) plus at most three small MDS fits: milliseconds to a few tenths of a second
for tens of annotators. A run is skipped when its latest evaluation saw the same answers (same
fingerprint), or when it is younger than ``settings.MODEL_REGISTRY_RECOMPUTE_INTERVAL``
seconds (default 60), so a burst of answers costs at most one evaluation per run and interval.
Figures may therefore lag the answers by up to that interval (until the next call);
``force=True`` (the "Recompute" button) ignores both checks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import IO, Any, NamedTuple

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.continuous.config import trace_settings
from apps.continuous.models import VALUE_DTYPE, pack
from apps.models_registry.evaluation import evaluate_run, evaluate_trace_run
from apps.models_registry.importing import (
    PREDICTION_FIELDS,
    TRACE_FIELDS,
    VECTOR_FIELDS,
    MeanVectors,
    UploadError,
    clean_predictions,
    clean_vectors,
    label_value,
    read_rows,
    trace_value,
)
from apps.models_registry.models import (
    AnnotatorVector,
    ModelRun,
    ModelRunEvaluation,
    Prediction,
    TracePrediction,
)
from apps.models_registry.selectors import (
    MODEL_RUN_KINDS,
    QuestionLabels,
    QuestionTraces,
    answers_fingerprint,
    latest_evaluation,
    question_labels,
    question_traces,
    run_predictions,
    run_trace_predictions,
    run_vectors,
    trace_lengths,
    upload_axes,
)
from apps.studies.models import Question, Study
from core.types import Account

BATCH_SIZE = 5000
DEFAULT_RECOMPUTE_INTERVAL = 60


class Upload(NamedTuple):
    """An uploaded file and its format (``csv``, ``jsonl`` or ``npz``)."""

    stream: IO[bytes] | IO[str]
    fmt: str


@transaction.atomic
def model_run_register(
    *,
    study: Study,
    question: Question,
    name: str,
    version: str,
    created_by: Account,
    predictions: Upload,
    features: Upload | None = None,
    attention: Upload | None = None,
    metadata: dict[str, Any] | None = None,
) -> ModelRun:
    """Validate a run's uploads, store them and evaluate the run; all or nothing.

    Every file is checked in full before anything is written; problems raise one
    ``ValidationError`` keyed by file (``predictions``, ``features``, ``attention``), each
    message naming line and field. The question must be a categorical or continuous question
    of the study, and (question, name, version) new.
    """
    if question.study_id != study.pk or question.kind not in MODEL_RUN_KINDS:
        raise ValidationError(
            {"question": "Choose a categorical or continuous question of this study."}
        )
    traces = question.kind == Question.Kind.CONTINUOUS
    run = ModelRun(
        study=study,
        question=question,
        name=name.strip(),
        version=version.strip(),
        metadata=metadata or {},
        created_by=created_by,
    )
    run.full_clean(exclude=["study", "question", "created_by"])
    if ModelRun.objects.filter(question=question, name=run.name, version=run.version).exists():
        raise ValidationError(
            {"version": f"{run.name} {run.version} is already registered for {question.key}."}
        )
    axes = upload_axes(study=study, question=question)
    errors: dict[str, list[str]] = {}
    predicted: list[tuple[int, int, Any]] = []
    if traces:
        value = trace_value(
            trace_lengths(question=question), rate_hz=trace_settings(question).analysis_rate_hz
        )
    else:
        value = label_value(axes)
    try:
        required = TRACE_FIELDS if traces else PREDICTION_FIELDS
        rows = read_rows(
            predictions.stream, fmt=predictions.fmt, required=required, max_rows=axes.max_rows
        )
        predicted = clean_predictions(rows, axes=axes, value=value)
    except UploadError as exc:
        errors["predictions"] = exc.messages
    vectors: dict[str, MeanVectors] = {}
    kinds = (
        ("features", AnnotatorVector.Kind.FEATURE, features),
        ("attention", AnnotatorVector.Kind.ATTENTION, attention),
    )
    for field, kind, upload in kinds:
        if upload is None:
            continue
        try:
            rows = read_rows(
                upload.stream, fmt=upload.fmt, required=VECTOR_FIELDS, max_rows=axes.max_rows
            )
            vectors[kind.value] = clean_vectors(rows, axes=axes)
        except UploadError as exc:
            errors[field] = exc.messages
    if errors:
        raise ValidationError(errors)
    run.save()
    if traces:
        TracePrediction.objects.bulk_create(
            (
                TracePrediction(
                    run=run,
                    item_id=item,
                    annotator_id=user,
                    values=pack(trace, VALUE_DTYPE),
                    n_samples=trace.size,
                )
                for item, user, trace in predicted
            ),
            batch_size=BATCH_SIZE // 10,
        )
    else:
        Prediction.objects.bulk_create(
            (
                Prediction(run=run, item_id=item, annotator_id=user, label_id=label)
                for item, user, label in predicted
            ),
            batch_size=BATCH_SIZE,
        )
    AnnotatorVector.objects.bulk_create(
        AnnotatorVector(
            run=run,
            annotator_id=annotator,
            kind=kind,
            values=AnnotatorVector.packed(vector),
            dim=vector.size,
            n_items=n_items,
        )
        for kind, mean in vectors.items()
        for annotator, vector, n_items in zip(
            mean.annotator_ids, mean.vectors, mean.n_items, strict=True
        )
    )
    model_run_evaluate(run=run)
    return run


Answers = QuestionLabels | QuestionTraces


def question_answers(*, question: Question) -> Answers:
    """The human side of a question, read once for all its runs (labels or traces)."""
    if question.kind == Question.Kind.CONTINUOUS:
        return question_traces(question=question)
    return question_labels(question=question)


@transaction.atomic
def model_run_evaluate(*, run: ModelRun, answers: Answers | None = None) -> ModelRunEvaluation:
    """Compute and store a new evaluation of ``run`` (earlier ones are kept as history).

    ``answers`` (from :func:`question_answers`) may be passed in when several runs of the same
    question are evaluated together.
    """
    question = run.question
    answers = answers or question_answers(question=question)
    vectors = run_vectors(run=run, annotator_ids=answers.annotator_ids)
    figures: dict[str, Any] = {"n_cells": 0}
    if isinstance(answers, QuestionTraces):
        predicted = run_trace_predictions(run=run, traces=answers)
        if set(predicted) & set(answers.traces):
            figures = evaluate_trace_run(
                human=answers.traces,
                predicted=predicted,
                n_annotators=len(answers.annotator_ids),
                tol=answers.tol,
                vectors=vectors,
            )
    else:
        codes = run_predictions(run=run, labels=answers)
        if (~np.isnan(answers.ratings) & ~np.isnan(codes)).any():
            figures = evaluate_run(
                human=answers.ratings,
                predicted=codes,
                n_labels=len(answers.value_keys),
                ordered=question.ordered,
                min_overlap=settings.QUALITY_MIN_OVERLAP,
                vectors=vectors,
            )
    figures["annotators"] = answers.annotator_ids
    return ModelRunEvaluation.objects.create(
        run=run,
        n_annotations=answers.n_annotations,
        fingerprint=answers.fingerprint,
        figures=figures,
    )


def model_runs_recompute(*, question_id: int, force: bool = False) -> int:
    """Re-evaluate the question's runs whose figures are out of date; returns how many were.

    Safe to call after every batch of answers (see the module docstring for the throttle).
    Each run is evaluated in its own transaction.
    """
    runs = list(ModelRun.objects.filter(question_id=question_id).select_related("question__study"))
    interval = getattr(settings, "MODEL_REGISTRY_RECOMPUTE_INTERVAL", DEFAULT_RECOMPUTE_INTERVAL)
    recent = timezone.now() - timedelta(seconds=interval)
    latest = {run.pk: latest_evaluation(run=run) for run in runs}
    # Cheap checks first: the fingerprint aggregates the question's answers, so it is only
    # read when some run is unevaluated or old enough to be refreshed.
    due = [r for r in runs if force or (e := latest[r.pk]) is None or e.computed_at <= recent]
    if not due:
        return 0
    _, fingerprint = answers_fingerprint(question_id=question_id)
    runs = [
        run for run in due if force or (e := latest[run.pk]) is None or e.fingerprint != fingerprint
    ]
    if runs:  # the answers are read only when some run needs them, once for all
        answers = question_answers(question=runs[0].question)
        for run in runs:
            model_run_evaluate(run=run, answers=answers)
    return len(runs)


@transaction.atomic
def model_run_delete(*, run: ModelRun) -> None:
    """Delete a run with its predictions, vectors and evaluations (the leaderboard forgets it)."""
    run.delete()
