"""Publish a question's quality after its state changed: indicators, snapshot, flags, push.

:mod:`analytics.pipeline` calls :func:`quality_publish` once a processed batch (or a rebuild)
has committed; in worker mode that happens on the worker. The steps, the same for every kind:

1. derive the indicators from the stored sufficient statistics (the kind's ``derive``, never
   from the whole study; the heatmap order and map kept within the snapshot window, see
   :func:`analytics.indicators.pair_matrices`), then the kind's ``publish_extras``
   (categorical: the touched items' disagreement and Dawid-Skene competence) and the
   intervals when due (:func:`analytics.intervals.publish_intervals`);
2. write the snapshot: a new row at most every ``QUALITY_SNAPSHOT_INTERVAL`` seconds (trend
   history), else the newest row is updated in place, so it is always current. Only the
   newest row keeps its pair matrices (the heatmap and the map draw nothing older; 2.3 MB a
   row at 512 annotators): a new row empties those of the one before. Step 1 runs
   before the write's transaction (on SQLite it holds the one write lock that every
   answer waits for), from the state as read then; the write locks the newest row, so
   publishes of one question write one after the other; a snapshot records the state
   version it comes from (``state_version``: the state's ``updated_at``) and is never
   replaced by one derived from an older state. An older publish finishing last had put the
   dashboard back for good (667 ratings, then 652, for twelve minutes);
   :func:`snapshots_republish` (a sweep hook) publishes again every question whose snapshot
   is behind its state (a publish that failed after its state was stored, or one computed
   from a state that a newer one overtook);
3. in the same transaction, evaluate the flag rules of the kind's indicators
   (:func:`analytics.services.flags_evaluate`), with the question's own overrides
   (``settings["quality"]``);
4. send ``dashboard.update`` to the study's group; the dashboards re-render from the database.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db import transaction
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from analytics.config import quality_config
from analytics.events import dashboard_notify
from analytics.indicators import Json, with_overrides
from analytics.intervals import (
    NOT_GIVEN,
    IntervalSet,
    computed_at,
    intervals_carry,
    intervals_request,
    publish_intervals,
)
from analytics.models import QualitySnapshot, QualityState
from analytics.services import flags_evaluate
from apps.studies.kinds import question_kinds
from apps.studies.models import Question


def quality_publish(
    *,
    question_id: int,
    item_ids: Sequence[int] | None = None,
    rebuild: bool = False,
    refresh_competence: bool = False,
) -> QualitySnapshot | None:
    """Derive, snapshot, flag and push a question's quality (see the module docstring).

    ``item_ids`` are the items the processed batch touched; ``rebuild`` and
    ``refresh_competence`` are passed to the kind's ``publish_extras`` (categorical: recompute
    every item's disagreement and refit Dawid-Skene; refit only). Returns the snapshot
    written, or ``None`` for a question kind without a live dashboard or without a state yet.
    """
    return _publish(
        question_id=question_id,
        item_ids=item_ids,
        rebuild=rebuild,
        refresh_competence=refresh_competence,
    )[0]


def quality_publish_with(*, question_id: int, intervals: IntervalSet | None) -> bool:
    """Publish the question with ``intervals`` computed apart
    (:func:`analytics.intervals.intervals_publish`); ``False`` if a publish of a newer state
    overtook this one and nothing was written."""
    return _publish(question_id=question_id, intervals=intervals)[1]


def _publish(
    *,
    question_id: int,
    item_ids: Sequence[int] | None = None,
    rebuild: bool = False,
    refresh_competence: bool = False,
    intervals: IntervalSet | object | None = NOT_GIVEN,
) -> tuple[QualitySnapshot | None, bool]:
    """:func:`quality_publish`, with ``intervals`` given or not; returns the snapshot and
    whether this publish wrote it."""
    question = Question.objects.select_related("study").get(pk=question_id)
    spec = question_kinds().get(question.kind)
    if spec is None:
        return None, False
    config = quality_config()
    window = dt.timedelta(seconds=config.snapshot_interval)
    # Everything is computed before the transaction, from the state as read now: on SQLite a
    # transaction holds the database's one write lock from BEGIN, and a Dawid-Skene refit or a
    # bootstrap inside it held every annotator's submit for seconds (issue 22).
    previous = _latest(question_id).first()
    state = _state(question_id)
    if state is None:
        return None, False
    if previous is not None and _newer(previous.state_version, than=state.updated_at):
        return previous, False  # derived from a newer state already: never go back
    # the heatmap order and the MDS map are fitted once per snapshot window, or again once the
    # annotators have grown by a quarter (:func:`analytics.indicators.pair_matrices`)
    in_window = previous is not None and timezone.now() - previous.created_at < window
    layout = _layout(previous) if in_window and previous is not None else None
    derived = spec.derive(state, question, layout=layout)
    spec.publish_extras(
        derived,
        question=question,
        state=state,
        previous=previous,
        item_ids=list(item_ids) if item_ids else None,
        rebuild=rebuild,
        refresh=refresh_competence,
    )
    live_intervals = dict(derived.intervals)
    deferred = publish_intervals(
        derived,
        kind=spec,
        question=question,
        previous=previous,
        seconds=config.interval_seconds,
        force=rebuild,
        found=intervals,
        apart=config.slow_work_apart,
    )
    carried = computed_at(previous) is not None and (
        derived.study.get("intervals", {}).get("computed_at") == computed_at(previous)
    )
    indicators = with_overrides(spec.indicators_for(question), question.settings)
    with transaction.atomic():
        # the newest row locked: publishes of one question write one after the other
        latest = _latest(question_id).select_for_update().first()
        if latest is not None and _newer(latest.state_version, than=state.updated_at):
            return latest, False  # another publish wrote a newer state meanwhile
        if carried and computed_at(latest) not in (None, computed_at(previous)):
            # a set computed apart was written since ``previous`` was read: carry that one
            derived.intervals = live_intervals
            intervals_carry(derived, kind=spec, previous=latest)
        fields = {
            "indicators": derived.indicators_json(),
            "matrices": derived.matrices,
            "n_annotations": derived.study.get("n_ratings", 0),
            "state_version": state.updated_at,
            "flags": flags_evaluate(  # the rules are cheap; the flags are rows
                question=question,
                derived=derived,
                indicators=indicators,
                config=config.for_question(question.settings),
                study_figures=spec.study_figures,
            ),
        }
        # within the snapshot window the latest snapshot is updated, not followed by another
        if latest is not None and timezone.now() - latest.created_at < window:
            for name, value in fields.items():
                setattr(latest, name, value)
            latest.save(update_fields=[*fields, "updated_at"])
            snapshot = latest
        else:
            snapshot = QualitySnapshot.objects.create(question=question, **fields)
            if latest is not None:  # the trend keeps its figures; only the newest is drawn
                QualitySnapshot.objects.filter(pk=latest.pk).update(matrices={})
    dashboard_notify(study_id=question.study_id, question_id=question_id)
    if deferred:
        intervals_request(question_id)
    return snapshot, True


def _latest(question_id: int) -> QuerySet[QualitySnapshot]:
    """The question's snapshots, newest first, without their matrices: a publish writes them
    and never reads them (``M x M`` pair matrices, 2.3 MB of JSON at 512 annotators, took
    111 ms a publish to decode); :func:`_layout` reads the part it keeps."""
    return (
        QualitySnapshot.objects.filter(question_id=question_id)
        .order_by("-created_at", "-id")
        .defer("matrices")
    )


def _layout(snapshot: QualitySnapshot) -> Json | None:
    """The heatmap order and map of ``snapshot``, read alone (the ``keep`` of
    :func:`analytics.indicators.pair_matrices`); ``None`` for one stored before layouts were
    kept, which is fitted again."""
    order, mds, fitted_for = (
        QualitySnapshot.objects.filter(pk=snapshot.pk)
        .values_list("matrices__order", "matrices__mds", "matrices__fitted_for")
        .get()
    )
    if fitted_for is None:
        return None
    return {"order": order, "mds": mds, "fitted_for": fitted_for}


def _state(question_id: int) -> QualityState | None:
    """The question's quality state as a publish reads it."""
    return QualityState.objects.filter(question_id=question_id).first()


def _newer(version: dt.datetime | None, *, than: dt.datetime) -> bool:
    return version is not None and version > than


def snapshots_republish() -> list[int]:
    """Publish again every question whose latest snapshot is older than its state (or has
    none while its state has answers); return their ids. A sweep hook
    (:data:`analytics.pipeline.SWEEP_HOOKS`): one query for the lagging questions."""
    newest = QualitySnapshot.objects.filter(question=OuterRef("question")).order_by(
        "-created_at", "-id"
    )
    behind = (
        QualityState.objects.annotate(published=Subquery(newest.values("state_version")[:1]))
        .filter(Q(published__isnull=True, n_applied__gt=0) | Q(published__lt=F("updated_at")))
        .values_list("question_id", flat=True)
    )
    questions = sorted(behind)
    for question_id in questions:
        quality_publish(question_id=question_id)
    return questions
