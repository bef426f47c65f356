"""Reads of model runs: the arrays an evaluation needs, leaderboards, the latest figures."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Subquery
from numpy.typing import NDArray

from analytics.metrics import krippendorff_alpha, paired_difference
from analytics.metrics.anchoring import (
    AnchoringEffect,
    anchoring_by_annotator,
    anchoring_flag,
    anchoring_study,
)
from analytics.selectors import question_ratings
from apps.annotations.models import Annotation
from apps.continuous.config import trace_settings
from apps.continuous.models import VALUE_DTYPE, TraceRecording, unpack
from apps.continuous.selectors import current_traces
from apps.models_registry.evaluation import Cell
from apps.models_registry.importing import Axes
from apps.models_registry.models import (
    EndpointCall,
    ItemPrediction,
    ModelEndpoint,
    ModelRun,
    ModelRunEvaluation,
    Suggestion,
    TracePrediction,
)
from apps.models_registry.suggestions import (
    ACCEPTANCE_FLOOR,
    DEFAULT_HELD_OUT,
    HELD_OUT,
    RUN,
    SUGGESTION_ACCEPTANCE,
)
from apps.studies.models import Question, Study
from apps.studies.selectors import question_items, study_annotators


def upload_axes(*, study: Study, question: Question) -> Axes:
    """The items, annotators and labels an upload for ``question`` may name."""
    return Axes(
        items=dict(study.items.values_list("external_id", "id")),
        annotators=dict(study_annotators(study=study).values_list("username", "id")),
        labels=dict(question.labels.values_list("key", "id")),
        question_key=question.key,
    )


@dataclass(frozen=True)
class QuestionLabels:
    """The human side of a question, read once for every run: axes and ratings."""

    annotator_ids: list[int]
    names: list[str]
    value_keys: list[str]
    item_ids: NDArray[np.int64]  # (N,) sorted
    ratings: NDArray[np.float64]  # (M, N) label codes, nan = not answered
    n_annotations: int
    fingerprint: str


def answers_fingerprint(*, question_id: int) -> tuple[int, str]:
    """How many live round-1 answers the question has, and a token that changes with any answer.

    Every new answer, edit or retraction makes a revision with a larger id, so the count of
    live answers plus the newest revision id changes whenever the figures could.
    """
    figures = Annotation.objects.filter(question_id=question_id, round=1).aggregate(
        live=Count("id", filter=Q(current_revision__value__isnull=False)),
        newest=Max("current_revision_id"),
    )
    return figures["live"], f"{figures['live']}:{figures['newest'] or 0}"


def question_labels(*, question: Question) -> QuestionLabels:
    """The question's human labels on annotator x item axes (study annotators by username)."""
    users = list(study_annotators(study=question.study).values_list("id", "username"))
    ids = [pk for pk, _ in users]
    keys = list(question.labels.values_list("key", flat=True))
    n, fingerprint = answers_fingerprint(question_id=question.pk)
    items, ratings = question_ratings(question_id=question.pk, annotator_ids=ids, value_keys=keys)
    return QuestionLabels(
        annotator_ids=ids,
        names=[name for _, name in users],
        value_keys=keys,
        item_ids=items,
        ratings=ratings,
        n_annotations=n,
        fingerprint=fingerprint,
    )


@dataclass(frozen=True)
class QuestionTraces:
    """The human side of a continuous question: round-1 current traces at the analysis rate."""

    annotator_ids: list[int]
    names: list[str]
    traces: dict[Cell, NDArray[np.float64]]
    rate_hz: float
    tol: float
    n_annotations: int
    fingerprint: str


def question_traces(*, question: Question) -> QuestionTraces:
    """The question's current finished traces (round 1) keyed by (annotator index, item id)."""
    users = list(study_annotators(study=question.study).values_list("id", "username"))
    index = {pk: k for k, (pk, _) in enumerate(users)}
    config = trace_settings(question)
    n, fingerprint = answers_fingerprint(question_id=question.pk)
    traces = {
        (index[recording.annotator_id], recording.item_id): recording_array(recording)
        for recording in current_traces(question=question).filter(round=1)
        if recording.annotator_id in index and recording.resampled
    }
    return QuestionTraces(
        annotator_ids=[pk for pk, _ in users],
        names=[name for _, name in users],
        traces=traces,
        rate_hz=config.analysis_rate_hz,
        tol=config.sda_tolerance,
        n_annotations=n,
        fingerprint=fingerprint,
    )


def recording_array(recording: TraceRecording) -> NDArray[np.float64]:
    """A finished recording's trace at the analysis rate."""
    if recording.resampled is None:
        raise ValueError("The recording is not finished: it has no trace at the analysis rate.")
    return unpack(recording.resampled, VALUE_DTYPE)


def trace_lengths(*, question: Question) -> dict[int, int]:
    """Per item id: the number of samples of the annotators' current traces (the longest)."""
    lengths: dict[int, int] = {}
    for item, n in current_traces(question=question).values_list("item_id", "n_resampled"):
        lengths[item] = max(lengths.get(item, 0), n or 0)
    return lengths


def run_trace_predictions(*, run: ModelRun, traces: QuestionTraces) -> dict[Cell, NDArray]:
    """The run's predicted traces keyed like ``traces.traces`` (other annotators left out)."""
    index = {a: k for k, a in enumerate(traces.annotator_ids)}
    return {
        (index[p.annotator_id], p.item_id): p.array()
        for p in TracePrediction.objects.filter(run=run).iterator(chunk_size=2000)
        if p.annotator_id in index
    }


def run_predictions(*, run: ModelRun, labels: QuestionLabels) -> NDArray[np.float64]:
    """The run's predictions on the axes of ``labels`` (items no human answered left out).

    An item prediction (a general model's label, :class:`ItemPrediction`) counts as the
    prediction for every annotator who answered the item, where the run has no prediction of
    its own for that annotator."""
    annotator_index = {a: k for k, a in enumerate(labels.annotator_ids)}
    code = {key: c for c, key in enumerate(labels.value_keys)}
    rows = np.array(
        [
            (annotator_index.get(annotator, -1), item, code.get(key, -1))
            for item, annotator, key in run.predictions.values_list(
                "item_id", "annotator_id", "label__key"
            ).iterator(chunk_size=20_000)
        ],
        dtype=np.int64,
    ).reshape(-1, 3)
    out = np.full(labels.ratings.shape, np.nan)
    if labels.item_ids.size == 0:
        return out
    column = np.searchsorted(labels.item_ids, rows[:, 1]).clip(0, labels.item_ids.size - 1)
    keep = (rows[:, 0] >= 0) & (rows[:, 2] >= 0) & (labels.item_ids[column] == rows[:, 1])
    out[rows[keep, 0], column[keep]] = rows[keep, 2]
    general = np.array(
        [
            (item, code.get(key, -1))
            for item, key in run.item_predictions.values_list("item_id", "label__key")
        ],
        dtype=np.int64,
    ).reshape(-1, 2)
    column = np.searchsorted(labels.item_ids, general[:, 0]).clip(0, labels.item_ids.size - 1)
    keep = (general[:, 1] >= 0) & (labels.item_ids[column] == general[:, 0])
    columns, codes = column[keep], general[keep, 1].astype(float)
    answered = ~np.isnan(labels.ratings[:, columns]) & np.isnan(out[:, columns])
    out[:, columns] = np.where(answered, codes[None, :], out[:, columns])
    return out


def run_vectors(*, run: ModelRun, annotator_ids: list[int]) -> dict[str, NDArray[np.float64]]:
    """Per kind uploaded: ``(n_annotators, dim)`` mean vectors, nan rows where none was given."""
    index = {a: k for k, a in enumerate(annotator_ids)}
    out: dict[str, NDArray[np.float64]] = {}
    for vector in run.vectors.all():
        k = index.get(vector.annotator_id)
        if k is None:
            continue
        if vector.kind not in out:
            out[vector.kind] = np.full((len(annotator_ids), vector.dim), np.nan)
        out[vector.kind][k] = vector.array()
    return out


def latest_evaluation(*, run: ModelRun) -> ModelRunEvaluation | None:
    return run.evaluations.order_by("-computed_at", "-id").first()


def runs_of_question(*, question: Question) -> QuerySet[ModelRun]:
    """The question's runs, newest first, each with ``latest_id`` (its latest evaluation)."""
    latest = ModelRunEvaluation.objects.filter(run=OuterRef("pk")).order_by("-computed_at", "-id")
    return (
        ModelRun.objects.filter(question=question)
        .select_related("created_by", "question")
        .annotate(latest_id=Subquery(latest.values("id")[:1]))
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class LeaderboardRow:
    """One row of a leaderboard: a run, or a reference row (``run`` is ``None``)."""

    name: str
    dic: float | None
    bae_feature: float | None = None
    bae_attention: float | None = None
    accuracy: float | None = None
    fleiss: float | None = None
    run: ModelRun | None = None
    evaluation: ModelRunEvaluation | None = None
    dic_interval: list[float] | None = None  # 95 % [low, high] (item bootstrap)
    bae_feature_interval: list[float] | None = None
    bae_attention_interval: list[float] | None = None
    n_items: int | None = None  # items the figures rest on
    accuracy_interval: list[float] | None = None  # of the mean accuracy (item bootstrap)
    fleiss_interval: list[float] | None = None  # of Fleiss' kappa of the predictions


@dataclass(frozen=True)
class Leaderboard:
    """What the leaderboard page and the dashboard card show for one question."""

    question: Question
    rows: list[LeaderboardRow]  # runs, best DIC first
    references: list[LeaderboardRow]  # Random / Consensus / Uniform

    @property
    def top_two(self) -> RankingCheck | None:
        """Whether the two best runs' DIC differ; None when fewer than two have an interval.

        When both were evaluated on the same answers, items and bootstrap (so replicate ``b``
        of each drew the same items), the paired bootstrap interval of the DIC difference
        decides (distinguishable when it excludes 0). Otherwise, disjoint 95 % intervals
        establish the order; overlapping ones do not prove there is no difference, so the
        page words an overlap as "not shown to differ"."""
        if len(self.rows) < 2:
            return None
        best, second = self.rows[0], self.rows[1]
        if not best.dic_interval or not second.dic_interval:
            return None
        a, b = best.evaluation, second.evaluation
        if a is not None and b is not None and _same_resamples(a, b):
            difference = paired_difference(
                np.array(a.figures["dic_replicates"], dtype=float),
                np.array(b.figures["dic_replicates"], dtype=float),
                estimate_a=float(best.dic or 0.0),
                estimate_b=float(second.dic or 0.0),
            )
            low, high = float(difference.low), float(difference.high)
            return RankingCheck(
                separated=bool(high < 0 or low > 0),
                difference=(float(difference.estimate), low, high),
            )
        return RankingCheck(separated=best.dic_interval[1] < second.dic_interval[0])


@dataclass(frozen=True)
class RankingCheck:
    """Whether the two best runs are distinguishable, and how it was decided: ``difference``
    = (best - second DIC, low, high) of the paired bootstrap, None when only the two
    intervals could be compared."""

    separated: bool
    difference: tuple[float, float, float] | None = None


def _same_resamples(a: ModelRunEvaluation, b: ModelRunEvaluation) -> bool:
    """Whether two evaluations' bootstrap replicates drew the same items, replicate by
    replicate: same answers, same resampled items, same replicates and seed."""
    fa, fb = a.figures, b.figures
    return (
        a.fingerprint == b.fingerprint
        and bool(fa.get("bootstrap_items"))
        and fa.get("bootstrap_items") == fb.get("bootstrap_items")
        and fa.get("interval") == fb.get("interval")
        and len(fa.get("dic_replicates") or []) == len(fb.get("dic_replicates") or []) > 0
    )


def leaderboard(*, question: Question, limit: int | None = None) -> Leaderboard:
    """The question's runs ranked by DIC (lower is better; runs without figures last) with the
    reference rows of the most recent evaluation (they depend on the human labels only)."""
    runs = list(runs_of_question(question=question))
    latest = {run.pk: run.latest_id for run in runs}  # type: ignore[attr-defined]  # annotated
    evaluations = ModelRunEvaluation.objects.in_bulk([pk for pk in latest.values() if pk])
    rows = []
    for run in runs:
        evaluation = evaluations.get(latest[run.pk])
        figures = evaluation.figures if evaluation else {}
        bae_of = figures.get("bae", {})
        bae_interval = figures.get("bae_interval", {})
        rows.append(
            LeaderboardRow(
                name=f"{run.name} {run.version}",
                dic=figures.get("dic"),
                bae_feature=bae_of.get("feature"),
                bae_attention=bae_of.get("attention"),
                accuracy=figures.get("accuracy_mean"),
                fleiss=figures.get("fleiss_pred"),
                run=run,
                evaluation=evaluation,
                dic_interval=figures.get("dic_interval"),
                bae_feature_interval=bae_interval.get("feature"),
                bae_attention_interval=bae_interval.get("attention"),
                n_items=figures.get("n_items"),
                accuracy_interval=figures.get("accuracy_mean_interval"),
                fleiss_interval=figures.get("fleiss_pred_interval"),
            )
        )
    rows.sort(key=lambda r: (r.dic is None, r.dic if r.dic is not None else 0.0))
    newest = max((r.evaluation for r in rows if r.evaluation), default=None, key=_when)
    return Leaderboard(
        question=question,
        rows=rows[:limit] if limit else rows,
        references=reference_rows(newest.figures) if newest else [],
    )


def _when(evaluation: ModelRunEvaluation) -> tuple:
    return (evaluation.computed_at, evaluation.pk)


def reference_rows(figures: dict[str, Any]) -> list[LeaderboardRow]:
    """Table 5's reference rows from an evaluation's ``baselines``."""
    base = figures.get("baselines", {})
    return [
        LeaderboardRow(
            name="Random (DIC, BAE)",
            dic=base.get("dic_random"),
            bae_feature=base.get("bae_random"),
            bae_attention=base.get("bae_random"),
        ),
        LeaderboardRow(name="Consensus (DIC)", dic=base.get("dic_consensus")),
        LeaderboardRow(
            name="Uniform (BAE)",
            dic=None,
            bae_feature=base.get("bae_uniform"),
            bae_attention=base.get("bae_uniform"),
        ),
    ]


MODEL_RUN_KINDS = (Question.Kind.CATEGORICAL, Question.Kind.CONTINUOUS)


def model_run_questions(*, study: Study) -> QuerySet[Question]:
    """The study's questions a model run can be registered for (categorical, continuous)."""
    return study.questions.filter(kind__in=MODEL_RUN_KINDS)


def usernames(ids: list[int]) -> dict[int, str]:
    """Usernames of the given user ids (ids of deleted users are left out)."""
    return dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))


@dataclass(frozen=True)
class AnchoringRow:
    """One annotator's line of the suggestions card (or the question's, ``name`` "All")."""

    name: str
    effect: AnchoringEffect
    flag: str | None = None


@dataclass(frozen=True)
class AnchoringReport:
    """The suggestions card of a question: the run, each annotator's row and the study's."""

    run: ModelRun | None
    held_out: float
    rows: list[AnchoringRow]
    study: AnchoringRow | None
    among: AmongAnnotators | None = None


@dataclass(frozen=True)
class AmongAnnotators:
    """Krippendorff's alpha among the annotators on the held-out answers only (free of the
    suggestion's pull) and on the shown answers, with the items each counts (two answers or
    more)."""

    level: str
    held_out: float
    held_out_items: int
    shown: float
    shown_items: int


def _alpha_of(
    who: NDArray, item: NDArray, codes: NDArray, *, level: Literal["nominal", "ordinal"]
) -> tuple[float, int]:
    """Alpha of the answers given (annotator, item, code) and the items with 2+ answers."""
    if codes.size == 0:
        return float("nan"), 0
    rows, row = np.unique(who, return_inverse=True)
    cols, col = np.unique(item, return_inverse=True)
    matrix = np.full((rows.size, cols.size), np.nan)
    matrix[row, col] = codes
    pairable = int(((~np.isnan(matrix)).sum(axis=0) >= 2).sum())
    return (krippendorff_alpha(matrix, level=level) if pairable else float("nan")), pairable


def suggestion_answers(*, question: Question) -> dict[str, NDArray]:
    """The question's live round-1 answers given with a suggestion shown or held out: per
    answer ``annotator`` (id), ``item`` (id), ``shown``, ``agree`` (the answer is the
    suggested/withheld label) and ``seconds`` (nan when not timed). One query."""
    rows = list(
        Suggestion.objects.filter(
            revision__annotation__question=question,
            revision__annotation__round=1,
            revision__annotation__current_revision=F("revision"),
            revision__value__isnull=False,
        )
        .order_by("revision__annotation__annotator_id", "revision__annotation__item_id")
        .values_list(
            "revision__annotation__annotator_id",
            "revision__annotation__item_id",
            "shown",
            "label_id",
            "revision__label_id",
            "revision__time_spent_ms",
        )
    )
    if not rows:
        empty = np.zeros(0)
        return dict.fromkeys(("annotator", "item", "shown", "agree", "seconds"), empty)
    who, item, shown, suggested, answered, ms = zip(*rows, strict=True)
    return {
        "annotator": np.array(who, dtype=np.int64),
        "item": np.array(item, dtype=np.int64),
        "shown": np.array(shown, dtype=bool),
        "agree": np.array(suggested) == np.array(answered),
        "seconds": np.array([np.nan if t is None else t / 1000.0 for t in ms], dtype=float),
        "label": np.array(answered, dtype=np.int64),
    }


def anchoring_findings(*, question: Question) -> list[dict[str, Any]]:
    """The question's flags on annotators who take nearly every suggestion, faster
    (:func:`~analytics.metrics.anchoring.anchoring_flag`), as findings of its intervals
    (:attr:`analytics.intervals.IntervalSet.pairs`): they join the question's reviewable
    flags with the card's reason. Per annotator only (no bootstrap); one query."""
    answers = suggestion_answers(question=question)
    if answers["agree"].size == 0:
        return []
    per = anchoring_by_annotator(
        answers["annotator"], answers["agree"], answers["shown"], seconds=answers["seconds"]
    )
    findings = []
    for pk, effect in per.items():
        reason = anchoring_flag(effect, acceptance_floor=ACCEPTANCE_FLOOR)
        if reason is None:
            continue
        findings.append(
            {
                "annotators": [int(cast(int, pk))],  # annotator ids (numpy integers)
                "indicator": SUGGESTION_ACCEPTANCE,
                "reason": reason,
                "figures": {
                    "value": round(effect.acceptance, 4),
                    "low": round(effect.acceptance_low, 4),
                    "high": round(effect.acceptance_high, 4),
                    "evidence": effect.n_shown,
                    "unit": "shown suggestions",
                    "seconds_shown": round(effect.seconds_shown, 2),
                    "seconds_held_out": round(effect.seconds_held_out, 2),
                },
            }
        )
    return findings


def anchoring_report(*, question: Question, n_boot: int = 2000) -> AnchoringReport | None:
    """The anchoring effect of the question's suggestions, per annotator and for the study
    (:mod:`analytics.metrics.anchoring`); ``None`` when the question never suggested."""
    run_id = (question.settings or {}).get(RUN)
    answers = suggestion_answers(question=question)
    if run_id is None and answers["agree"].size == 0:
        return None
    run = ModelRun.objects.filter(pk=run_id).first() if run_id is not None else None
    held_out = float((question.settings or {}).get(HELD_OUT, DEFAULT_HELD_OUT))
    if answers["agree"].size == 0:
        return AnchoringReport(run=run, held_out=held_out, rows=[], study=None)
    names: dict[Hashable, str] = dict(
        get_user_model()
        .objects.filter(pk__in=set(answers["annotator"].tolist()))
        .values_list("pk", "username")
    )
    per = anchoring_by_annotator(
        answers["annotator"], answers["agree"], answers["shown"], seconds=answers["seconds"]
    )
    rows = [
        AnchoringRow(
            name=names.get(pk, str(pk)),
            effect=effect,
            flag=anchoring_flag(effect, acceptance_floor=ACCEPTANCE_FLOOR),
        )
        for pk, effect in per.items()
    ]
    study = anchoring_study(
        answers["item"],
        answers["agree"],
        answers["shown"],
        seconds=answers["seconds"],
        n_boot=n_boot,
        seed=question.pk,
    )
    level: Literal["nominal", "ordinal"] = "ordinal" if question.ordered else "nominal"
    position = {pk: i for i, pk in enumerate(question.labels.values_list("pk", flat=True))}
    codes = np.array([position.get(int(pk), np.nan) for pk in answers["label"]], dtype=float)
    shown = answers["shown"]
    alpha_held, items_held = _alpha_of(
        answers["annotator"][~shown], answers["item"][~shown], codes[~shown], level=level
    )
    alpha_shown, items_shown = _alpha_of(
        answers["annotator"][shown], answers["item"][shown], codes[shown], level=level
    )
    among = AmongAnnotators(
        level=level,
        held_out=alpha_held,
        held_out_items=items_held,
        shown=alpha_shown,
        shown_items=items_shown,
    )
    return AnchoringReport(
        run=run,
        held_out=held_out,
        rows=rows,
        study=AnchoringRow(name="All", effect=study),
        among=among,
    )


# ----------------------------------------------------------------- model endpoints (issue 28)


def endpoint_queue(*, endpoint: ModelEndpoint) -> list[int]:
    """Ids of the question's items (in scope) its endpoint's run has no label for yet: those
    never asked about first, then those whose calls failed, each in queue order."""
    tried = EndpointCall.objects.filter(run_id=endpoint.run_id, item_id=OuterRef("pk"))
    predicted = ItemPrediction.objects.filter(run_id=endpoint.run_id).values("item_id")
    return list(
        question_items(endpoint.question)
        .exclude(pk__in=predicted)
        .annotate(tried=Exists(tried))
        .order_by("tried", "position", "id")
        .values_list("pk", flat=True)
    )


@dataclass(frozen=True)
class EndpointFailure:
    """Items whose latest call ended the same way, with one example of the detail."""

    outcome: str
    http_status: int | None
    n_items: int
    example: str

    @property
    def reason(self) -> str:
        if self.outcome == EndpointCall.Outcome.HTTP and self.http_status:
            return f"HTTP {self.http_status}"
        return EndpointCall.Outcome(self.outcome).label


@dataclass(frozen=True)
class EndpointStatus:
    """What the manager sees of an endpoint: items predicted, failed (by reason), waiting,
    the budget, the latest call."""

    endpoint: ModelEndpoint
    n_items: int
    predicted: int
    failures: list[EndpointFailure]
    last_call: EndpointCall | None

    @property
    def failed(self) -> int:
        return sum(f.n_items for f in self.failures)

    @property
    def waiting(self) -> int:
        """Items in scope not yet asked about."""
        return max(0, self.n_items - self.predicted - self.failed)

    @property
    def budget_spent(self) -> bool:
        return self.endpoint.budget_left == 0 and self.predicted < self.n_items


def endpoint_status(*, endpoint: ModelEndpoint) -> EndpointStatus:
    """The status of ``endpoint``'s current run: counts and the failed items grouped by how
    their latest call ended, aggregated in SQL (a handful of queries however many calls)."""
    items = question_items(endpoint.question)
    n_items = items.count()
    predicted_ids = ItemPrediction.objects.filter(run_id=endpoint.run_id).values("item_id")
    predicted = items.filter(pk__in=predicted_ids).count()
    calls = EndpointCall.objects.filter(run_id=endpoint.run_id)
    latest = calls.filter(item_id=OuterRef("item_id")).order_by("-id").values("id")[:1]
    groups = (
        calls.filter(item__in=items.order_by(), id=Subquery(latest))
        .exclude(item_id__in=predicted_ids)
        .order_by()
        .values("outcome", "http_status")
        .annotate(n_items=Count("id"), example=Max("detail"))
    )
    failures = sorted(
        (
            EndpointFailure(g["outcome"], g["http_status"], g["n_items"], g["example"])
            for g in groups
        ),
        key=lambda f: (-f.n_items, f.outcome),
    )
    last_call = EndpointCall.objects.filter(endpoint=endpoint).order_by("-id").first()
    return EndpointStatus(endpoint, n_items, predicted, failures, last_call)


def question_endpoint(*, question: Question) -> ModelEndpoint | None:
    return ModelEndpoint.objects.filter(question=question).select_related("run").first()
