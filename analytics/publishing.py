"""Publish a question's quality after its state changed: indicators, snapshot, flags, push.

:mod:`analytics.pipeline` calls :func:`quality_publish` once a processed batch (or a rebuild)
has committed; in worker mode that happens on the worker. The steps:

1. derive the indicators from the stored sufficient statistics (never from the whole study);
2. keep the disagreement (AAD-RMSE) of the touched items current in
   :class:`~analytics.models.ItemDisagreement`;
3. write the snapshot: a new row at most every ``QUALITY_SNAPSHOT_INTERVAL`` seconds (trend
   history), else the newest row is updated in place, so it is always current;
4. evaluate the flag rules (:func:`analytics.services.flags_evaluate`);
5. send ``dashboard.update`` to the study's group; the dashboards re-render from the database.

Dawid-Skene competence needs every rating (an EM fit), so it runs on rebuild, on demand (the
dashboard's button) and, when ``QUALITY_DS_INTERVAL`` > 0, at most that often; in between the
last fit is carried forward in the snapshots. With inline processing keep the interval 0: the
fit would delay the submit request that happens to trigger it.

Question kinds plug in through :data:`KINDS` (keyed by ``Question.Kind``): a
:class:`QualityKind` turns a question's :class:`~analytics.models.QualityState` into
:class:`~analytics.indicators.Derived` figures and names the flag rules that judge them.
Continuous traces (kappa_SDA with the others and against gold, lag, trend F1) and pairwise
preferences (transitivity kappa, audit contradictions) register theirs in
:mod:`analytics.quality_kinds` (imported by the app's ``ready()``), which also keeps their
statistics current.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from numpy.typing import NDArray

from analytics.events import dashboard_notify
from analytics.indicators import (
    CATEGORICAL_RULES,
    Derived,
    LabelScale,
    Rule,
    derive_categorical,
    derive_competence,
)
from analytics.metrics.aad import aad_rmse_per_item
from analytics.models import ItemDisagreement, QualitySnapshot, QualityState
from analytics.selectors import latest_snapshot, question_ratings
from analytics.services import flags_evaluate
from analytics.sufficient_stats import CategoricalStats
from apps.studies.models import Question


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def label_scale(question: Question, value_keys: Sequence[str]) -> LabelScale:
    """The question's label scale on the state's value codes."""
    labels = list(question.labels.values("key", "name", "valence", "arousal"))
    return LabelScale.from_labels(value_keys, labels, ordered=question.ordered)


def _derive_categorical(state: QualityState, question: Question, *, with_map: bool) -> Derived:
    stats = CategoricalStats.from_bytes(
        state.stats, n_annotators=len(state.annotator_ids), n_values=len(state.value_keys)
    )
    return derive_categorical(
        stats,
        annotators=state.annotator_ids,
        scale=label_scale(question, state.value_keys),
        min_overlap=_setting("QUALITY_MIN_OVERLAP", 10),
        with_map=with_map,
    )


@dataclass(frozen=True)
class QualityKind:
    """The live-quality plug-in of one question kind."""

    derive: Callable[..., Derived]  # (state, question, *, with_map) -> Derived
    rules: Mapping[str, Rule]
    item_disagreement: bool = True
    competence: bool = True
    #: the question's own rules when they depend on its settings (else ``rules``)
    rules_for: Callable[[Question], Mapping[str, Rule]] | None = None


KINDS: dict[str, QualityKind] = {}


def register_kind(kind: str, spec: QualityKind) -> None:
    """Give a question kind (a ``Question.Kind`` value) its live indicators and flag rules."""
    KINDS[kind] = spec


register_kind(
    Question.Kind.CATEGORICAL,
    QualityKind(derive=_derive_categorical, rules=CATEGORICAL_RULES),
)


class _Ratings:
    """The question's round-1 ratings matrix, read from the database at most once per publish
    (only a rebuild or a Dawid-Skene fit needs all of it)."""

    def __init__(self, question: Question, state: QualityState) -> None:
        self.question, self.state = question, state
        self._all: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None

    def get(
        self, item_ids: Sequence[int] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        if item_ids is None and self._all is not None:
            return self._all
        found = question_ratings(
            question_id=self.question.pk,
            annotator_ids=self.state.annotator_ids,
            value_keys=self.state.value_keys,
            item_ids=item_ids,
        )
        if item_ids is None:
            self._all = found
        return found


#: Items a rebuild keeps in ItemDisagreement: the most disputed ones. Touched items are added
#: as they change, so the dashboard's top 10 stays exact while fewer than KEPT - 10 of the kept
#: items have become less disputed than the least disputed item left out.
KEPT_DISAGREEMENTS = 1000


def _update_disagreement(
    question: Question, scale: LabelScale, ratings: _Ratings, item_ids: Sequence[int] | None
) -> None:
    """Recompute AAD-RMSE of the touched items, or on rebuild (``item_ids`` None) replace the
    rows with the :data:`KEPT_DISAGREEMENTS` most disputed items."""
    items, matrix = ratings.get(item_ids)
    if item_ids is not None:  # touched items left without a first-round answer
        gone = set(item_ids) - set(items.tolist())
        ItemDisagreement.objects.filter(question=question, item_id__in=gone).delete()
    if items.size == 0:
        return
    coordinates = {float(c): tuple(point) for c, point in enumerate(scale.points)}
    rmse = aad_rmse_per_item(matrix, coordinates=coordinates)
    counts = (~np.isnan(matrix)).sum(axis=0)
    keep = np.arange(items.size)
    if item_ids is None:
        ItemDisagreement.objects.filter(question=question).delete()
        keep = np.argsort(-np.nan_to_num(rmse, nan=-1.0), kind="stable")[:KEPT_DISAGREEMENTS]
    ItemDisagreement.objects.bulk_create(
        [
            ItemDisagreement(
                question=question,
                item_id=int(items[i]),
                aad_rmse=None if np.isnan(rmse[i]) else float(rmse[i]),
                n=int(counts[i]),
            )
            for i in keep
        ],
        update_conflicts=True,
        unique_fields=["question", "item"],
        update_fields=["aad_rmse", "n"],
    )


def _competence(
    derived: Derived,
    ratings: _Ratings,
    previous: QualitySnapshot | None,
    *,
    refresh: bool,
) -> None:
    """Add Dawid-Skene competence to ``derived``: fitted now, or carried from the last fit."""
    now = timezone.now()
    interval = float(_setting("QUALITY_DS_INTERVAL", 0))
    last = (previous.indicators.get("study", {}) if previous else {}).get("ds_computed_at")
    due = interval > 0 and (
        last is None or now - dt.datetime.fromisoformat(last) >= dt.timedelta(seconds=interval)
    )
    if refresh or due:
        derived.indicators["ds_competence"] = derive_competence(ratings.get()[1])
        derived.study["ds_computed_at"] = now.isoformat()
    elif last is not None and previous is not None:
        old = dict(
            zip(
                previous.indicators["annotators"],
                previous.indicators["values"].get("ds_competence", []),
                strict=False,
            )
        )
        derived.indicators["ds_competence"] = [old.get(a) for a in derived.annotators]
        derived.study["ds_computed_at"] = last


def _min_evidence(question: Question) -> dict[str, int]:
    """Per-unit minimum evidence; a question may override it in ``settings["quality"]``."""
    items = int(_setting("QUALITY_MIN_EVIDENCE", 20))
    repeats = int(_setting("QUALITY_MIN_REPEATS", 10))
    base = {
        "items": items,
        "repeats": repeats,
        "pairs": items,
        "audits": repeats,
        "triplets": int(_setting("QUALITY_MIN_TRIPLETS", 10)),
        "traces": int(_setting("QUALITY_MIN_TRACES", 3)),
        "gold_items": int(_setting("QUALITY_MIN_GOLD_ITEMS", 1)),
    }
    return {**base, **question.settings.get("quality", {}).get("min_evidence", {})}


def _rules(question: Question, spec: QualityKind) -> dict[str, Rule]:
    """The kind's rules with the question's overrides (``settings["quality"]["rules"]``:
    indicator -> ``{"z": ..., "floor": ...}``)."""
    overrides = question.settings.get("quality", {}).get("rules", {})
    rules = dict(spec.rules_for(question) if spec.rules_for else spec.rules)
    for key, change in overrides.items():
        if key in rules:
            base = rules[key]
            rules[key] = Rule(
                base.name,
                z=float(change.get("z", base.z)),
                floor=change.get("floor", base.floor),
                evidence=base.evidence,
            )
    return rules


def quality_publish(
    *,
    question_id: int,
    item_ids: Sequence[int] | None = None,
    rebuild: bool = False,
    refresh_competence: bool = False,
) -> QualitySnapshot | None:
    """Derive, snapshot, flag and push a question's quality (see the module docstring).

    ``item_ids`` are the items the processed batch touched; ``rebuild`` recomputes every item's
    disagreement and refits Dawid-Skene. Returns the snapshot written, or ``None`` for a
    question kind without a live dashboard or without a state yet.
    """
    question = Question.objects.select_related("study").get(pk=question_id)
    spec = KINDS.get(question.kind)
    state = QualityState.objects.filter(question_id=question_id).first()
    if spec is None or state is None:
        return None
    window = dt.timedelta(seconds=float(_setting("QUALITY_SNAPSHOT_INTERVAL", 60)))
    with transaction.atomic():
        previous = latest_snapshot(question=question)
        same_window = previous is not None and timezone.now() - previous.created_at < window
        # the MDS map is refitted once per snapshot window (or when annotators join)
        old_map = previous.matrices.get("mds") if same_window else None
        reuse_map = old_map is not None and len(old_map) == len(state.annotator_ids)
        derived = spec.derive(state, question, with_map=not reuse_map)
        if reuse_map:
            derived.matrices["mds"] = old_map
        ratings = _Ratings(question, state)
        if spec.item_disagreement and (rebuild or item_ids):
            scale = label_scale(question, state.value_keys)
            _update_disagreement(question, scale, ratings, None if rebuild else item_ids)
        if spec.competence:
            _competence(derived, ratings, previous, refresh=rebuild or refresh_competence)
        flags = flags_evaluate(
            question=question,
            derived=derived,
            rules=_rules(question, spec),
            min_evidence=_min_evidence(question),
        )
        fields = {
            "indicators": derived.indicators_json(),
            "matrices": derived.matrices,
            "flags": flags,
            "n_annotations": derived.study.get("n_ratings", 0),
        }
        if same_window:
            for name, value in fields.items():
                setattr(previous, name, value)
            previous.save(update_fields=[*fields, "updated_at"])
            snapshot = previous
        else:
            snapshot = QualitySnapshot.objects.create(question=question, **fields)
    dashboard_notify(study_id=question.study_id, question_id=question_id)
    return snapshot
