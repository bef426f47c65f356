"""Every write of the model registry: registering a run from its uploads, evaluating runs.

Evaluation runs off the request path. Registering a run (or pressing "Recompute") only stores
the run and marks it: ``ModelRun.evaluation_requested_at`` is an outbox inside the row, so a
request is not lost if the process dies. After the commit :func:`model_runs_schedule` hands the
question to :func:`analytics.pipeline.job_schedule`, which runs :func:`model_runs_evaluate_pending`
where ``QUALITY_UPDATES`` says (``inline`` in the committing thread, ``thread`` on the
background thread, ``worker`` on a quality worker's next pass), like the quality updates. An
evaluation costs about 10 s for 50 annotators x 2,000 items (``benchmarks/model_runs.py``), so
no request waits for it; the pages say "evaluating…" with the previous figures meanwhile.

Race safety: a run is claimed by one conditional ``UPDATE`` (requested and not running ->
``evaluation_started_at`` set, request cleared), so of two concurrent evaluators only one gets
it (PostgreSQL re-checks the condition after the row lock; SQLite serialises writes). A request
that arrives while the run is being evaluated sets the outbox again, and the evaluator claims the
run once more when it is done, so the last request always gets figures on the answers of its
time. A claim older than ``settings.MODEL_REGISTRY_EVALUATION_TIMEOUT`` seconds (default 1,800)
counts as abandoned (its process died); :func:`model_runs_sweep`, run by the quality sweep,
dispatches runs left waiting.

Cost and throttling of :func:`model_runs_recompute` (the live pipeline's hook, already off the
request path, after answers of a question changed): one aggregate query decides which runs are
stale; only then are the human answers read, once for all of them. Each stale run costs one read
of its predictions and a handful of vectorised agreement matrices (its own, the humans', ten
Random draws, Consensus) plus at most three small MDS fits and the item bootstrap. A run is
skipped when its latest evaluation saw the same answers (same fingerprint), or when it is younger
than ``settings.MODEL_REGISTRY_RECOMPUTE_INTERVAL`` seconds (default 60), so a burst of answers
costs at most one evaluation per run and interval. Figures may therefore lag the answers by up to
that interval (until the next call); "Recompute" (:func:`model_runs_request`) ignores both checks.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import IO, Any, NamedTuple

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from analytics.pipeline import job_schedule
from apps.continuous.config import trace_settings
from apps.continuous.models import VALUE_DTYPE, pack
from apps.models_registry.evaluation import evaluate_run, evaluate_trace_run
from apps.models_registry.importing import (
    ITEM_PREDICTION_FIELDS,
    PREDICTION_FIELDS,
    TRACE_FIELDS,
    VECTOR_FIELDS,
    MeanVectors,
    UploadError,
    clean_item_predictions,
    clean_predictions,
    clean_vectors,
    label_value,
    predicts_per_item,
    read_rows,
    trace_value,
)
from apps.models_registry.models import (
    AnnotatorVector,
    ItemPrediction,
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
DEFAULT_EVALUATION_TIMEOUT = 1800
#: The off-request job (analytics.pipeline.JOBS, registered in apps.py) evaluating the pending
#: runs of a question.
EVALUATION_JOB = "model_runs.evaluate"
logger = logging.getLogger(__name__)


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
    """Validate a run's uploads and store them, all or nothing; the run is evaluated after
    the commit, off the request (see the module docstring), and ``evaluating`` until then.

    A categorical question's predictions may be per item with label probabilities
    (:func:`~apps.models_registry.importing.predicts_per_item`: stored as
    :class:`ItemPrediction` rows, which the queue's uncertainty order reads).
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
        evaluation_requested_at=timezone.now(),
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
    per_item = not traces and predicts_per_item(predictions.stream, fmt=predictions.fmt)
    try:
        required: tuple[str, ...] = ITEM_PREDICTION_FIELDS
        if not per_item:
            required = TRACE_FIELDS if traces else PREDICTION_FIELDS
        rows = read_rows(
            predictions.stream, fmt=predictions.fmt, required=required, max_rows=axes.max_rows
        )
        if per_item:
            predicted = clean_item_predictions(rows, axes=axes)
        else:
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
    elif per_item:
        ItemPrediction.objects.bulk_create(
            (
                ItemPrediction(run=run, item_id=item, label_id=label, probabilities=probabilities)
                for item, label, probabilities in predicted
            ),
            batch_size=BATCH_SIZE,
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
    model_runs_schedule(question_id=question.pk)
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


def model_runs_schedule(*, question_id: int) -> None:
    """Evaluate the question's pending runs after this commit, off the request."""
    job_schedule(job=EVALUATION_JOB, key=question_id)


@transaction.atomic
def model_runs_request(*, question_id: int, run_ids: list[int] | None = None) -> int:
    """Ask for a fresh evaluation of the question's runs (all, or those of ``run_ids``) on the
    current answers ("Recompute"); returns how many were asked for. Costs one ``UPDATE``: the
    evaluation itself runs after the commit (:func:`model_runs_schedule`). Pressing again while
    one is pending or running asks for one more evaluation after it, never a concurrent one."""
    runs = ModelRun.objects.filter(question_id=question_id)
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    count = runs.update(evaluation_requested_at=timezone.now())
    if count:
        model_runs_schedule(question_id=question_id)
    return count


def _timeout() -> timedelta:
    seconds = getattr(settings, "MODEL_REGISTRY_EVALUATION_TIMEOUT", DEFAULT_EVALUATION_TIMEOUT)
    return timedelta(seconds=seconds)


def _claimable(now: Any) -> Q:
    """Runs waiting for an evaluation: asked for and not running, or claimed too long ago."""
    requested = Q(evaluation_requested_at__isnull=False, evaluation_started_at__isnull=True)
    return requested | Q(evaluation_started_at__lt=now - _timeout())


def _claim(run_id: int) -> Any:
    """Claim a waiting run for this evaluator: the claim time, or ``None`` if another
    evaluator has it or nothing is asked for (one conditional UPDATE, atomic)."""
    now = timezone.now()
    claimed = ModelRun.objects.filter(_claimable(now), pk=run_id).update(
        evaluation_started_at=now, evaluation_requested_at=None
    )
    return now if claimed else None


def model_runs_evaluate_pending(*, question_id: int) -> int:
    """Evaluate every waiting run of the question (the job :data:`EVALUATION_JOB`); returns
    how many evaluations were stored. The answers are read once per round; a run asked for
    again while it was evaluated is taken again in the next round."""
    done = 0
    while True:
        waiting = list(
            ModelRun.objects.filter(_claimable(timezone.now()), question_id=question_id)
            .select_related("question__study")
            .order_by("pk")
        )
        claimed = [(run, at) for run in waiting if (at := _claim(run.pk)) is not None]
        if not claimed:
            return done
        try:
            answers = question_answers(question=claimed[0][0].question)
        except Exception:  # the database away: give the runs back to the next dispatch
            for run, at in claimed:
                _release(run, at, again=True)
            raise
        for run, at in claimed:
            try:
                model_run_evaluate(run=run, answers=answers)
                done += 1
            except Exception:  # one failing run must not stop the others; its claim is dropped
                logger.exception("evaluation of model run %s failed", run.pk)
            finally:
                _release(run, at)


def _release(run: ModelRun, claimed_at: Any, *, again: bool = False) -> None:
    """Drop our claim of ``run`` (only ours: a timed-out one may have been taken over);
    ``again`` asks for the evaluation anew (it could not run)."""
    changes: dict[str, Any] = {"evaluation_started_at": None}
    if again:
        changes["evaluation_requested_at"] = timezone.now()
    ModelRun.objects.filter(pk=run.pk, evaluation_started_at=claimed_at).update(**changes)


def model_runs_sweep() -> list[int]:
    """Dispatch the questions with runs still waiting for an evaluation (a worker down, a
    process that died mid-evaluation); returns their ids. An ``analytics.pipeline.SWEEP_HOOKS``
    hook."""
    questions = sorted(
        set(
            ModelRun.objects.filter(_claimable(timezone.now()))
            .order_by()
            .values_list("question_id", flat=True)
        )
    )
    for question_id in questions:
        model_runs_schedule(question_id=question_id)
    return questions


def model_runs_recompute(*, question_id: int) -> int:
    """Re-evaluate the question's runs whose figures are out of date; returns how many were.

    The live pipeline's hook, called off the request after answers changed (see the module
    docstring for the throttle). Stale runs are marked as asked for and evaluated here through
    the same claim as every other evaluation, so a run being evaluated elsewhere is not
    evaluated twice at once.
    """
    runs = list(ModelRun.objects.filter(question_id=question_id))
    interval = getattr(settings, "MODEL_REGISTRY_RECOMPUTE_INTERVAL", DEFAULT_RECOMPUTE_INTERVAL)
    recent = timezone.now() - timedelta(seconds=interval)
    latest = {run.pk: latest_evaluation(run=run) for run in runs}
    # Cheap checks first: the fingerprint aggregates the question's answers, so it is only
    # read when some run is unevaluated or old enough to be refreshed.
    due = [r for r in runs if (e := latest[r.pk]) is None or e.computed_at <= recent]
    if not due:
        return 0
    _, fingerprint = answers_fingerprint(question_id=question_id)
    stale = [r.pk for r in due if (e := latest[r.pk]) is None or e.fingerprint != fingerprint]
    if not stale:
        return 0
    ModelRun.objects.filter(pk__in=stale).update(evaluation_requested_at=timezone.now())
    return model_runs_evaluate_pending(question_id=question_id)


@transaction.atomic
def model_run_delete(*, run: ModelRun) -> None:
    """Delete a run with its predictions, vectors and evaluations (the leaderboard forgets it;
    a queue ordered by its uncertainty falls back to the natural order)."""
    from apps.annotations.ordering import queue_order_follow

    study_id = run.study_id
    run.delete()
    queue_order_follow(study_id=study_id, mode="uncertainty")
