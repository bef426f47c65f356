"""The active order of the label queue (issue 28): uncertainty or predicted disagreement first.

A categorical question of the queue may ask, in its settings, for the study's queue to serve
first the items a model is least sure of (``queue_order = "uncertainty"``: the entropy of a
registered run's label probabilities, :class:`~apps.models_registry.models.ItemPrediction`,
:func:`analytics.metrics.active_order.label_entropy`) or whose disagreement the studio
forecasts highest (``"disagreement"``:
:class:`~apps.adjudication.models.PredictedDisagreement`). One question per study may ask.

**Where the order lives.** The queue serves an annotator's open assignments in the order of
the index ``assignment_open_queue_idx`` (skipped last, adaptive-overlap extras first, then
``position``; :func:`apps.annotations.selectors.assignment_next`). The active order is applied
to that key itself: :func:`queue_order_apply`, off the request path, permutes the
``position`` of each annotator's open first-round assignments whose item has a score, so that
the highest score takes the earliest of their places, and keeps the natural one in
``natural_position`` (to restore it). The queue's query, its index, its query count and every
guarantee it keeps (scope, skipped items last, extras first, recruited packages, idempotent
answers) are unchanged; the next item is still the index's first entry.

**The randomised share.** A share of the items (``queue_order_natural_share``, 20 % by
default) is drawn at random *per item* and keeps its natural place for every annotator: the
keyed hash of :func:`~apps.models_registry.suggestions.suggestion_drawn` with annotator 0 (no
account has id 0, so the draw is the item's alone and independent of the suggestions' draws).
Per item, not per (annotator, item): an item is then served early or at its natural time to
all its annotators alike, so its overlap completes together (agreement, adaptive overlap and
the forecast need all its answers), and the two arms are disjoint sets of items whose answers
can be compared as they come in (docs/active_ordering.md).

**Not reordered:** recruited participants' work packages (their order, with the attention
checks placed in it, is the package's), items without a score (they keep their natural place)
answered assignments and the extra assignments of adaptive overlap (served first anyway). A
round-2 repeat moves with its first-round assignment, keeping the
gap the fill put between them (a retest never comes before its test).

**When.** :func:`queue_order_request` (an outbox row, :class:`~apps.annotations.models.
QueueOrder`, then the pipeline's job mechanism) after the question's order settings or scope
change; :func:`queue_order_follow` (only if the study asks for an active order) after a fill
adds assignments, a run is deleted, the forecast is retrained, and by any writer of
:class:`~apps.models_registry.models.ItemPrediction` rows into an existing run (a model
endpoint): a new run's upload needs none, as no question can name a run before it exists.
:func:`queue_orders_sweep` catches requests left waiting (the ``worker`` mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from numpy.typing import NDArray

from analytics.metrics.active_order import label_entropy
from analytics.pipeline import job_schedule
from apps.adjudication.models import PredictedDisagreement
from apps.annotations.models import Assignment, QueueOrder
from apps.models_registry.models import ItemPrediction, ModelRun
from apps.models_registry.suggestions import HELD_OUT_RANGE, suggestion_drawn
from apps.studies.kinds import queue_kinds
from apps.studies.models import Question, Study
from apps.studies.selectors import question_items

ORDER = "queue_order"
ORDER_RUN = "queue_order_run"
NATURAL_SHARE = "queue_order_natural_share"
SETTINGS = (ORDER, ORDER_RUN, NATURAL_SHARE)
Mode = QueueOrder.Mode
#: The share of items kept in natural order, unless set.
DEFAULT_NATURAL_SHARE = 0.2
#: Its range: some items must be ordered, and some kept natural to measure the effect.
NATURAL_SHARE_RANGE = HELD_OUT_RANGE
#: The off-request job (analytics.pipeline.JOBS, registered in apps.py): apply a study's order.
QUEUE_ORDER_JOB = "queue_order.apply"
#: The annotator id keying the per-item draw of the natural share (no account has it).
_EVERY_ANNOTATOR = 0


def clean_queue_order_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the queue-order settings of a categorical question (shape and range;
    :func:`queue_order_problems` checks them against the question and its study).

    Returns ``{}`` for the natural order, else the mode, the run (uncertainty only) and the
    natural share (default :data:`DEFAULT_NATURAL_SHARE`).
    """
    mode, run, share = raw.get(ORDER), raw.get(ORDER_RUN), raw.get(NATURAL_SHARE)
    if mode in (None, "", Mode.NATURAL):
        # (the editor sends the share's initial value with every form: the default is no choice)
        given = {
            ORDER_RUN: run not in (None, ""),
            NATURAL_SHARE: share not in (None, "", DEFAULT_NATURAL_SHARE),
        }
        message = "Only an active queue order (uncertainty or disagreement) takes this."
        if any(given.values()):
            raise ValidationError({name: message for name, on in given.items() if on})
        return {}
    if mode not in (Mode.UNCERTAINTY, Mode.DISAGREEMENT):
        raise ValidationError(
            {ORDER: f"{mode!r} is not a queue order; choose natural, uncertainty or disagreement."}
        )
    cleaned: dict[str, Any] = {ORDER: str(mode)}
    errors: dict[str, str] = {}
    if mode == Mode.UNCERTAINTY:
        if isinstance(run, bool) or not isinstance(run, int) or run < 1:
            errors[ORDER_RUN] = (
                "The uncertainty order needs the id of a model run of this question with "
                "label probabilities."
            )
        cleaned[ORDER_RUN] = run
    elif run not in (None, ""):
        errors[ORDER_RUN] = (
            "Only the uncertainty order reads a model run (the disagreement order reads the "
            "studio's forecast)."
        )
    if share in (None, ""):
        share = DEFAULT_NATURAL_SHARE
    low, high = NATURAL_SHARE_RANGE
    if isinstance(share, bool) or not isinstance(share, int | float):
        errors[NATURAL_SHARE] = "The natural share is a number, e.g. 0.2."
    elif not low <= float(share) <= high:
        errors[NATURAL_SHARE] = f"The natural share must lie between {low:g} and {high:g}."
    else:
        cleaned[NATURAL_SHARE] = float(share)
    if errors:
        raise ValidationError(errors)
    return cleaned


def queue_order_problems(question: Question) -> dict[str, str]:
    """What is wrong with the question's (cleaned) queue-order settings given the question and
    its study (setting -> message): the run must be the question's own, and no other question
    of the study may order the queue."""
    own = question.settings or {}
    if own.get(ORDER) in (None, Mode.NATURAL):
        return {}
    problems = {}
    run_id = own.get(ORDER_RUN)
    if run_id is not None:
        run = ModelRun.objects.filter(pk=run_id).only("question_id").first()
        if run is None or run.question_id != question.pk:
            problems[ORDER_RUN] = f"Model run {run_id} is not registered for this question."
    other = (
        Question.objects.filter(study_id=question.study_id, settings__has_key=ORDER)
        .exclude(pk=question.pk)
        .values_list("key", "settings")
    )
    taken = [key for key, s in other if (s or {}).get(ORDER) not in (None, Mode.NATURAL)]
    if taken:
        problems[ORDER] = f"Question {taken[0]!r} already orders this study's queue."
    return problems


class QueueOrderSettingsForm(forms.Form):
    """A categorical question's queue order in the question editor."""

    queue_order = forms.ChoiceField(
        label="Queue order",
        required=False,
        choices=[("", "Natural (the study's item order)"), *Mode.choices[1:]],
        help_text="Serve first the items a model is least sure of (entropy of its label "
        "probabilities) or whose disagreement the studio forecasts highest; a random share of "
        "items keeps its natural place to measure the effect.",
    )
    queue_order_run = forms.IntegerField(
        label="Model run (uncertainty order)",
        required=False,
        min_value=1,
        help_text="Id of a model run of this question whose predictions give label "
        "probabilities (its page in the model registry names it).",
    )
    queue_order_natural_share = forms.FloatField(
        label="Share kept in natural order",
        required=False,
        initial=DEFAULT_NATURAL_SHARE,
        min_value=NATURAL_SHARE_RANGE[0],
        max_value=NATURAL_SHARE_RANGE[1],
        help_text=f"Share of the items, drawn at random, served in their natural place to "
        f"every annotator ({NATURAL_SHARE_RANGE[0]:g} to {NATURAL_SHARE_RANGE[1]:g}; default "
        f"{DEFAULT_NATURAL_SHARE:g}).",
    )


def natural_share_drawn(*, question_id: int, item_id: int, share: float) -> bool:
    """Whether the item keeps its natural place (for every annotator): the keyed draw of
    :func:`~apps.models_registry.suggestions.suggestion_drawn` for annotator 0 falls below
    ``share``."""
    return not suggestion_drawn(
        question_id=question_id, item_id=item_id, annotator_id=_EVERY_ANNOTATOR, held_out=share
    )


@dataclass(frozen=True)
class OrderAsked:
    """The active order a study's queue question asks for."""

    question: Question
    mode: str
    run_id: int | None
    share: float


def queue_order_asked(*, study_id: int) -> OrderAsked | None:
    """The active order asked for by a queue question of the study (``None``: natural)."""
    questions = Question.objects.filter(
        study_id=study_id, kind__in=queue_kinds(), settings__has_key=ORDER
    ).order_by("position", "id")
    for question in questions:
        own = question.settings or {}
        if own.get(ORDER) in (Mode.UNCERTAINTY, Mode.DISAGREEMENT):
            share = own.get(NATURAL_SHARE, DEFAULT_NATURAL_SHARE)
            return OrderAsked(question, own[ORDER], own.get(ORDER_RUN), float(share))
    return None


def item_scores(asked: OrderAsked) -> tuple[NDArray[np.int64], NDArray[np.float64], str]:
    """``(item ids, scores, fallback)``: the score of each item of the question's scope that
    has one (higher: served earlier), sorted by item id, and why there is none ("" if some).

    Uncertainty: the entropy (nats) of the run's label probabilities over the question's
    labels; disagreement: the forecast's predicted AAD-RMSE.
    """
    question = asked.question
    in_scope = Q(item__in=question_items(question).values("pk"))
    empty = (np.empty(0, dtype=np.int64), np.empty(0))
    if asked.mode == Mode.DISAGREEMENT:
        forecast = list(
            PredictedDisagreement.objects.filter(in_scope, forecast__question=question)
            .order_by("item_id")
            .values_list("item_id", "value")
        )
        if not forecast:
            return (
                *empty,
                "no disagreement forecast yet (it trains once enough items have two answers)",
            )
        item_ids, values = zip(*forecast, strict=True)
        return np.asarray(item_ids, dtype=np.int64), np.asarray(values, dtype=np.float64), ""
    run = ModelRun.objects.filter(pk=asked.run_id or 0, question=question).first()
    if run is None:
        return (*empty, f"model run {asked.run_id} no longer exists")
    rows = list(
        ItemPrediction.objects.filter(in_scope, run=run, probabilities__isnull=False)
        .order_by("item_id")
        .values_list("item_id", "probabilities")
    )
    if not rows:
        return (*empty, f"model run {run} has no label probabilities yet")
    keys = list(question.labels.order_by("position", "id").values_list("key", flat=True))
    ids = np.fromiter((item_id for item_id, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.array([[(p or {}).get(key, 0.0) for key in keys] for _, p in rows], np.float64)
    return ids, label_entropy(matrix), ""


def queue_order_request(*, study_id: int) -> None:
    """Ask for the study's queue order to be applied again after this commit (off the request
    path: :func:`queue_order_apply` as the pipeline's job :data:`QUEUE_ORDER_JOB`)."""
    QueueOrder.objects.update_or_create(
        study_id=study_id, defaults={"requested_at": timezone.now()}
    )
    job_schedule(job=QUEUE_ORDER_JOB, key=study_id)


def queue_order_follow(*, study_id: int, mode: str | None = None) -> bool:
    """:func:`queue_order_request` if the study's queue asks for an active order (``mode``:
    that one): what a writer of the order's inputs calls (new assignments, item predictions of
    a run, a retrained forecast). One query when nothing is asked. Returns whether it asked."""
    asking = QueueOrder.objects.filter(study_id=study_id).exclude(asked=Mode.NATURAL)
    if not asking.filter(asked=mode).exists() if mode else not asking.exists():
        return False
    queue_order_request(study_id=study_id)
    return True


def queue_orders_sweep() -> list[int]:
    """Apply the orders asked for and not applied yet (a worker down, the ``worker`` mode);
    returns the studies' ids. An ``analytics.pipeline.SWEEP_HOOKS`` hook: one query a pass."""
    due = list(
        QueueOrder.objects.filter(requested_at__isnull=False).values_list("study_id", flat=True)
    )
    for study_id in due:
        queue_order_apply(study_id=study_id)
    return due


@transaction.atomic
def queue_order_apply(*, study_id: int) -> QueueOrder | None:
    """Put the study's open assignments in the order its queue question asks for (the module
    docstring), or back in natural order; record what was done. ``None`` if the study is gone.

    One read of the assignments concerned (open ones, and moved ones to put back), one of the
    scores, one bulk update of the positions that change: vectorised, no loop over assignments.
    Concurrent calls queue on the study's row.
    """
    if Study.objects.select_for_update().filter(pk=study_id).first() is None:
        return None
    seen = (
        QueueOrder.objects.filter(study_id=study_id).values_list("requested_at", flat=True).first()
    )
    asked = queue_order_asked(study_id=study_id)
    ids, scores, fallback = (
        item_scores(asked) if asked else (np.empty(0, np.int64), np.empty(0), "")
    )
    rows = np.array(
        list(
            Assignment.objects.filter(
                Q(completed_at__isnull=True) | Q(natural_position__isnull=False),
                study_id=study_id,
            )
            .exclude(annotator__participation__study_id=study_id)  # recruited packages
            .values_list(
                "id",
                "annotator_id",
                "item_id",
                "round",
                "position",
                "natural_position",
                "completed_at",
                "extra",
            )
        ),
        dtype=object,
    ).reshape(-1, 8)
    pk, annotator, item, round_ = (rows[:, j].astype(np.int64) for j in range(4))
    position = rows[:, 4].astype(np.int64)
    moved = rows[:, 5] != None  # noqa: E711 (an object array: elementwise)
    natural = np.where(moved, rows[:, 5], rows[:, 4]).astype(np.int64)
    is_open = rows[:, 6] == None  # noqa: E711
    extra = rows[:, 7].astype(bool)  # served first anyway, at their item's place
    score = np.full(len(rows), np.nan)
    if ids.size:
        at = np.clip(np.searchsorted(ids, item), 0, ids.size - 1)
        known = ids[at] == item
        score[known] = scores[at[known]]
    scored_items = np.unique(item[~np.isnan(score) & is_open & (round_ == 1)])
    kept = np.array(
        [
            natural_share_drawn(question_id=asked.question.pk, item_id=int(i), share=asked.share)
            for i in scored_items
        ]
        if asked
        else [],
        dtype=bool,
    )
    natural_items = scored_items[kept] if kept.size else scored_items[:0]
    active = is_open & (round_ == 1) & ~extra & ~np.isnan(score) & ~np.isin(item, natural_items)
    target = natural.copy()
    a = np.flatnonzero(active)
    if a.size:
        places = a[np.lexsort((pk[a], round_[a], natural[a], annotator[a]))]
        ranked = a[np.lexsort((pk[a], natural[a], -score[a], annotator[a]))]
        target[ranked] = natural[places]  # each annotator's places, best score first
        _repeats_follow(target, natural, annotator=annotator, item=item, round_=round_, first=a)
    changed = np.flatnonzero((target != position) | ((target != natural) != moved))
    Assignment.objects.bulk_update(
        [
            Assignment(
                pk=int(pk[j]),
                position=int(target[j]),
                natural_position=int(natural[j]) if target[j] != natural[j] else None,
            )
            for j in changed
        ],
        ["position", "natural_position"],
        batch_size=1000,
    )
    open_items = np.unique(item[is_open])
    ordered = asked is not None and not fallback and a.size > 0
    state, _ = QueueOrder.objects.update_or_create(
        study_id=study_id,
        defaults={
            "question": asked.question if asked else None,
            "asked": asked.mode if asked else Mode.NATURAL,
            "mode": asked.mode if ordered and asked else Mode.NATURAL,
            "fallback": fallback
            or ("no open item has a score yet" if asked and not ordered else ""),
            "n_ordered": int(np.unique(item[active]).size),
            "n_natural": int(natural_items.size),
            "n_unscored": int(np.setdiff1d(open_items, scored_items).size) if asked else 0,
            "applied_at": timezone.now(),
        },
    )
    if seen is not None:  # answered; a request made meanwhile stays for its own job
        QueueOrder.objects.filter(pk=state.pk, requested_at=seen).update(requested_at=None)
        state.refresh_from_db(fields=["requested_at"])
    return state


def _repeats_follow(
    target: NDArray[np.int64],
    natural: NDArray[np.int64],
    *,
    annotator: NDArray[np.int64],
    item: NDArray[np.int64],
    round_: NDArray[np.int64],
    first: NDArray[np.intp],
) -> None:
    """Move each open round-2 repeat with its reordered first-round assignment (``first``),
    keeping the gap the fill put between them, so a retest never comes before its test."""
    repeats = np.flatnonzero(round_ == 2)
    if not repeats.size:
        return
    span = int(item.max()) + 1
    keys = annotator[first] * span + item[first]
    order = np.argsort(keys)
    at = np.clip(
        np.searchsorted(keys[order], annotator[repeats] * span + item[repeats]), 0, keys.size - 1
    )
    found = keys[order][at] == annotator[repeats] * span + item[repeats]
    r1 = first[order][at][found]
    r2 = repeats[found]
    target[r2] = target[r1] + (natural[r2] - natural[r1])


def queue_order_of(*, study: Study) -> QueueOrder | None:
    """The study's queue order as last applied (``None``: never asked for: natural)."""
    return QueueOrder.objects.filter(study=study).select_related("question").first()
