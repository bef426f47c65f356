"""Publish a question's quality after its state changed: indicators, snapshot, flags, push.

:mod:`analytics.pipeline` calls :func:`quality_publish` once a processed batch (or a rebuild)
has committed; in worker mode that happens on the worker. The steps, the same for every kind:

1. derive the indicators from the stored sufficient statistics (the kind's ``derive``, never
   from the whole study), then the kind's ``publish_extras`` (categorical: the touched items'
   disagreement and Dawid-Skene competence);
2. write the snapshot: a new row at most every ``QUALITY_SNAPSHOT_INTERVAL`` seconds (trend
   history), else the newest row is updated in place, so it is always current;
3. evaluate the flag rules of the kind's indicators (:func:`analytics.services.flags_evaluate`),
   with the question's own overrides (``settings["quality"]``);
4. send ``dashboard.update`` to the study's group; the dashboards re-render from the database.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from analytics.config import quality_config
from analytics.events import dashboard_notify
from analytics.indicators import with_overrides
from analytics.intervals import publish_intervals
from analytics.models import QualitySnapshot, QualityState
from analytics.selectors import latest_snapshot
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
    question = Question.objects.select_related("study").get(pk=question_id)
    spec = question_kinds().get(question.kind)
    state = QualityState.objects.filter(question_id=question_id).first()
    if spec is None or state is None:
        return None
    config = quality_config()
    window = dt.timedelta(seconds=config.snapshot_interval)
    with transaction.atomic():
        previous = latest_snapshot(question=question)
        # within the snapshot window the latest snapshot is updated, not followed by another
        current = (
            previous
            if previous is not None and timezone.now() - previous.created_at < window
            else None
        )
        # the MDS map is refitted once per snapshot window (or when annotators join)
        old_map = current.matrices.get("mds") if current is not None else None
        reuse_map = old_map is not None and len(old_map) == len(state.annotator_ids)
        derived = spec.derive(state, question, with_map=not reuse_map)
        if reuse_map:
            derived.matrices["mds"] = old_map
        spec.publish_extras(
            derived,
            question=question,
            state=state,
            previous=previous,
            item_ids=list(item_ids) if item_ids else None,
            rebuild=rebuild,
            refresh=refresh_competence,
        )
        publish_intervals(
            derived,
            kind=spec,
            question=question,
            previous=previous,
            seconds=config.interval_seconds,
            force=rebuild,
        )
        flags = flags_evaluate(
            question=question,
            derived=derived,
            indicators=with_overrides(spec.indicators_for(question), question.settings),
            config=config.for_question(question.settings),
            study_figures=spec.study_figures,
        )
        fields = {
            "indicators": derived.indicators_json(),
            "matrices": derived.matrices,
            "flags": flags,
            "n_annotations": derived.study.get("n_ratings", 0),
        }
        if current is not None:
            for name, value in fields.items():
                setattr(current, name, value)
            current.save(update_fields=[*fields, "updated_at"])
            snapshot = current
        else:
            snapshot = QualitySnapshot.objects.create(question=question, **fields)
    dashboard_notify(study_id=question.study_id, question_id=question_id)
    return snapshot
