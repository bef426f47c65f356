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
import time
from datetime import timedelta
from typing import IO, Any, NamedTuple

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from analytics.config import quality_config
from analytics.pipeline import job_schedule
from apps.continuous.config import trace_settings
from apps.continuous.models import VALUE_DTYPE, pack
from apps.items.models import Item
from apps.models_registry.endpoints import (
    AllowedNetworks,
    EndpointAnswer,
    EndpointConfig,
    EndpointItem,
    EndpointLabel,
    endpoint_request,
    resolve_api_key,
    url_refusal,
)
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
    EndpointCall,
    ItemPrediction,
    ModelEndpoint,
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
    endpoint_queue,
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
#: The off-request job calling a model endpoint for the items its run has no label for.
ENDPOINT_JOB = "model_endpoints.predict"
#: Seconds before the first retry of a failed call; doubled for each further retry
#: (``settings.MODEL_ENDPOINT_BACKOFF``).
DEFAULT_ENDPOINT_BACKOFF = 0.5
#: On the background thread or a quality worker, a pass over an endpoint's items gives the
#: process back after about this many seconds (plus one call's time-outs) and asks for itself
#: again (``settings.MODEL_ENDPOINT_SLICE``).
DEFAULT_ENDPOINT_SLICE = 5.0
#: The ranges a manager may configure.
ENDPOINT_TIMEOUT_RANGE = (0.1, 120.0)
ENDPOINT_MAX_RETRIES = 5
ENDPOINT_MAX_CALLS = 1_000_000
_ENDPOINT_FIELDS = ("requested_at", "started_at")
#: The fields of :func:`model_endpoint_save` a manager sets (``api_key`` aside: write-only).
ENDPOINT_CONFIG_FIELDS = (
    "kind",
    "url",
    "model",
    "version",
    "api_key_env",
    "timeout",
    "retries",
    "max_calls",
    "logprobs",
)
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


_RUN_FIELDS = ("evaluation_requested_at", "evaluation_started_at")


def _claimable(now: Any, fields: tuple[str, str] = _RUN_FIELDS) -> Q:
    """Rows waiting for their background job: asked for and not running, or claimed too long
    ago. ``fields``: the row's (requested, started) outbox and claim columns."""
    requested, started = fields
    waiting = Q(**{f"{requested}__isnull": False, f"{started}__isnull": True})
    return waiting | Q(**{f"{started}__lt": now - _timeout()})


def _claim(run_id: int, model: Any = ModelRun, fields: tuple[str, str] = _RUN_FIELDS) -> Any:
    """Claim a waiting row (a run to evaluate, an endpoint to call) for this process: the
    claim time, or ``None`` if another process has it or nothing is asked for (one
    conditional UPDATE, atomic)."""
    now = timezone.now()
    requested, started = fields
    claimed = model.objects.filter(_claimable(now, fields), pk=run_id).update(
        **{started: now, requested: None}
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


def _release(
    run: Any,
    claimed_at: Any,
    *,
    again: bool = False,
    model: Any = ModelRun,
    fields: tuple[str, str] = _RUN_FIELDS,
) -> None:
    """Drop our claim of ``run`` (only ours: a timed-out one may have been taken over);
    ``again`` asks for the job anew (it could not run, or has work left)."""
    requested, started = fields
    changes: dict[str, Any] = {started: None}
    if again:
        changes[requested] = timezone.now()
    model.objects.filter(pk=run.pk, **{started: claimed_at}).update(**changes)


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


# ----------------------------------------------------------------- model endpoints (issue 28)


def _allowed_networks() -> AllowedNetworks:
    """The non-public networks and names endpoints may be called at
    (``settings.MODEL_ENDPOINT_ALLOWED_NETWORKS``; none by default)."""
    return AllowedNetworks.parse(getattr(settings, "MODEL_ENDPOINT_ALLOWED_NETWORKS", ()))


def _endpoint_errors(endpoint: ModelEndpoint) -> dict[str, list[str]]:
    """Field messages for a configuration that cannot work, or whose URL's address the server
    may not call (it is checked again on every call)."""
    errors: dict[str, list[str]] = {}
    try:
        URLValidator(schemes=["http", "https"])(endpoint.url)
    except ValidationError:
        errors["url"] = ["Give an http:// or https:// URL."]
    else:
        refusal = url_refusal(endpoint.url, allowed=_allowed_networks())
        if refusal:
            errors["url"] = [f"The server may not call this URL: {refusal}."]
    low, high = ENDPOINT_TIMEOUT_RANGE
    if not low <= endpoint.timeout <= high:
        errors["timeout"] = [f"The time-out lies between {low:g} and {high:g} seconds."]
    if not 0 <= endpoint.retries <= ENDPOINT_MAX_RETRIES:
        errors["retries"] = [f"Between 0 and {ENDPOINT_MAX_RETRIES} retries."]
    if not 0 <= endpoint.max_calls <= ENDPOINT_MAX_CALLS:
        errors["max_calls"] = [f"Between 0 and {ENDPOINT_MAX_CALLS:,} calls."]
    if not endpoint.model.strip():
        errors["model"] = ["Name the model (it names the run its labels go to)."]
    if endpoint.api_key and endpoint.api_key_env:
        errors["api_key_env"] = ["Give the key or the name of its environment variable, not both."]
    return errors


@transaction.atomic
def model_endpoint_save(
    *,
    question: Question,
    created_by: Account,
    kind: str,
    url: str,
    model: str,
    version: str = "1",
    api_key: str | None = None,
    api_key_env: str = "",
    timeout: float = 10.0,
    retries: int = 2,
    max_calls: int = 1000,
    logprobs: bool = False,
) -> ModelEndpoint:
    """Configure (or reconfigure) the question's model endpoint, and ask for its labels.

    ``api_key`` ``None`` keeps the stored key, ``""`` removes it. The endpoint's labels go to
    the question's run named ``model`` ``version`` (created here, empty; a run of that name
    registered from files is refused), so a new model name or version starts a new run and the
    old one keeps its labels. The calls run after the commit, off the request
    (:func:`model_endpoint_predict_pending`). Problems raise one ``ValidationError`` keyed by
    field; nothing is stored then.
    """
    if question.kind != Question.Kind.CATEGORICAL:
        raise ValidationError({"question": "Model endpoints label categorical questions only."})
    Question.objects.select_for_update().filter(pk=question.pk).first()  # one save at a time
    endpoint = ModelEndpoint.objects.filter(question=question).first() or ModelEndpoint(
        study_id=question.study_id, question=question, created_by=created_by
    )
    endpoint.kind, endpoint.url = kind, url.strip()
    endpoint.model, endpoint.version = model.strip(), (version or "1").strip()
    endpoint.api_key_env = api_key_env.strip()
    if api_key is not None:
        endpoint.api_key = api_key.strip()
    endpoint.timeout, endpoint.retries, endpoint.max_calls = timeout, retries, max_calls
    endpoint.logprobs = logprobs
    errors = _endpoint_errors(endpoint)
    try:
        endpoint.full_clean(exclude=["study", "question", "created_by", "run", "url"])
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, messages)
    if errors:
        raise ValidationError(errors)
    run = ModelRun.objects.filter(
        question=question, name=endpoint.model, version=endpoint.version
    ).first()
    if run is not None and run.pk != endpoint.run_id:
        raise ValidationError(
            {"version": f"{run} is already registered for {question.key}: choose a new version."}
        )
    if run is None:
        run = ModelRun(
            study_id=question.study_id,
            question=question,
            name=endpoint.model,
            version=endpoint.version,
            metadata={"endpoint": endpoint.kind},
            created_by=created_by,
        )
        run.full_clean(exclude=["study", "question", "created_by"])
        run.save()
    endpoint.run = run
    endpoint.requested_at = timezone.now()
    endpoint.save()
    model_endpoint_schedule(endpoint_id=endpoint.pk)
    return endpoint


def model_endpoint_schedule(*, endpoint_id: int) -> None:
    """Call the endpoint for its waiting items after this commit, off the request."""
    job_schedule(job=ENDPOINT_JOB, key=endpoint_id)


@transaction.atomic
def model_endpoint_request(*, endpoint: ModelEndpoint) -> ModelEndpoint:
    """Ask for labels of the items the endpoint's run lacks (new items, failed calls); refused
    with a message when the call budget is spent."""
    endpoint = ModelEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    if endpoint.budget_left == 0:
        raise ValidationError(
            {
                "max_calls": f"The call budget is spent ({endpoint.calls_made} of "
                f"{endpoint.max_calls} calls made): raise it to call the endpoint again."
            }
        )
    endpoint.requested_at = timezone.now()
    endpoint.save(update_fields=["requested_at"])
    model_endpoint_schedule(endpoint_id=endpoint.pk)
    return endpoint


@transaction.atomic
def model_endpoint_delete(*, endpoint: ModelEndpoint) -> None:
    """Remove the configuration; its run keeps the labels already fetched."""
    endpoint.delete()


def _spend_call(endpoint_id: int) -> bool:
    """Take one call from the budget (one conditional UPDATE: concurrent callers cannot
    overspend); ``False`` when it is spent."""
    return bool(
        ModelEndpoint.objects.filter(pk=endpoint_id, calls_made__lt=F("max_calls")).update(
            calls_made=F("calls_made") + 1
        )
    )


def _endpoint_call(
    endpoint: ModelEndpoint,
    config: EndpointConfig,
    *,
    run_id: int,
    item: Item,
    labels: list[EndpointLabel],
) -> EndpointAnswer | None:
    """Ask about ``item``, retrying a retryable failure up to ``endpoint.retries`` times with
    a doubling back-off; every request is recorded (:class:`EndpointCall`) and paid for.
    ``None`` when the budget ran out before an answer."""
    backoff = getattr(settings, "MODEL_ENDPOINT_BACKOFF", DEFAULT_ENDPOINT_BACKOFF)
    payload = EndpointItem(item.external_id, item.text, item.metadata or {})
    for attempt in range(1, endpoint.retries + 2):
        if not _spend_call(endpoint.pk):
            return None
        answer = endpoint_request(config, item=payload, labels=labels)
        EndpointCall.objects.create(
            endpoint=endpoint,
            run_id=run_id,
            item=item,
            attempt=attempt,
            outcome=answer.outcome,
            http_status=answer.http_status,
            detail=answer.detail,
            seconds=answer.seconds,
            at=timezone.now(),
        )
        if answer.outcome == EndpointCall.Outcome.OK or not answer.retryable:
            return answer
        if attempt <= endpoint.retries:
            time.sleep(backoff * 2 ** (attempt - 1))
    return answer


def _endpoint_pass(
    endpoint: ModelEndpoint, *, run_id: int, deadline: float | None
) -> tuple[int, bool]:
    """Call the endpoint for its waiting items in order until done, the budget is spent or
    ``deadline`` (``time.monotonic``) passes, storing the labels in run ``run_id``; returns
    (labels stored, work left)."""
    question = endpoint.question
    labels = list(question.labels.all())
    label_ids = {label.key: label.pk for label in labels}
    config = EndpointConfig(
        kind=endpoint.kind,
        url=endpoint.url,
        model=endpoint.model,
        api_key=resolve_api_key(api_key=endpoint.api_key, api_key_env=endpoint.api_key_env),
        timeout=endpoint.timeout,
        prompt=question.prompt,
        allowed=_allowed_networks(),
        logprobs=endpoint.logprobs,
    )
    specs = [EndpointLabel(label.key, label.name) for label in labels]
    queue = endpoint_queue(endpoint=endpoint)
    stored = asked = 0
    for start in range(0, len(queue), 100):
        chunk = Item.objects.in_bulk(queue[start : start + 100])
        for item_id in queue[start : start + 100]:
            if deadline is not None and asked and time.monotonic() > deadline:
                return stored, True  # after one item at least: every pass makes progress
            item = chunk.get(item_id)
            if item is None:  # deleted meanwhile
                continue
            answer = _endpoint_call(endpoint, config, run_id=run_id, item=item, labels=specs)
            asked += 1
            if answer is None:
                return stored, False  # the budget is spent: the status says so
            if answer.outcome == EndpointCall.Outcome.REFUSED:
                return stored, False  # the address is refused: its status says so
            if answer.outcome == EndpointCall.Outcome.OK:
                stored += len(
                    ItemPrediction.objects.bulk_create(
                        [
                            ItemPrediction(
                                run_id=run_id,
                                item=item,
                                label_id=label_ids[answer.label],
                                probabilities=answer.probabilities,
                            )
                        ],
                        ignore_conflicts=True,
                    )
                )
    return stored, False


def model_endpoint_predict_pending(*, endpoint_id: int) -> int:
    """The job :data:`ENDPOINT_JOB`: claim the endpoint (as a run's evaluation is claimed, so
    two processes never call it for the same items at once), call it for the items its run
    lacks, and ask for the run's evaluation when labels were stored; returns how many.

    No transaction is held during a call. On the background thread or a worker a pass stops
    after ``MODEL_ENDPOINT_SLICE`` seconds and asks for itself again (the thread's queue, the
    worker's next sweep), so the quality updates sharing the process wait at most that long
    and a claim never grows old enough to be taken over; a failing endpoint costs its
    own calls and time-outs only, never an annotator's request (the queue page reads the
    stored labels).
    """
    claimed_at = _claim(endpoint_id, ModelEndpoint, _ENDPOINT_FIELDS)
    if claimed_at is None:
        return 0
    endpoint = ModelEndpoint.objects.select_related("question").get(pk=endpoint_id)
    deadline = None
    if quality_config().updates != "inline":  # the thread, a worker: share the process
        slice_ = getattr(settings, "MODEL_ENDPOINT_SLICE", DEFAULT_ENDPOINT_SLICE)
        deadline = time.monotonic() + slice_
    stored, left, run_id = 0, False, endpoint.run_id
    try:
        if run_id is not None:  # None: its run was deleted; saving the endpoint makes one
            stored, left = _endpoint_pass(endpoint, run_id=run_id, deadline=deadline)
    finally:
        _release(endpoint, claimed_at, again=left, model=ModelEndpoint, fields=_ENDPOINT_FIELDS)
    if left:
        model_endpoint_schedule(endpoint_id=endpoint_id)
    if stored and run_id is not None:
        model_runs_request(question_id=endpoint.question_id, run_ids=[run_id])
        # a queue ordered by this run's uncertainty places the newly labelled items
        from apps.annotations.ordering import queue_order_follow

        queue_order_follow(study_id=endpoint.question.study_id, mode="uncertainty")
    return stored


def model_endpoints_sweep() -> list[int]:
    """Dispatch the endpoints still waiting for their calls (a worker's only way to learn of
    them; a process that died mid-pass); returns their ids. An ``analytics.pipeline``
    sweep hook."""
    waiting = sorted(
        ModelEndpoint.objects.filter(_claimable(timezone.now(), _ENDPOINT_FIELDS)).values_list(
            "pk", flat=True
        )
    )
    for endpoint_id in waiting:
        model_endpoint_schedule(endpoint_id=endpoint_id)
    return waiting
