"""Writes of the analytics app: flags raised by the rules, a manager's decisions on them, and
annotator exclusions. Every change of a flag's status is logged as a :class:`FlagEvent`.

A dismissed flag stays dismissed while the annotator's figures hover where they were; it reopens
only when the indicator moves further to the bad side than it stood at the dismissal by more than
``QUALITY_REOPEN_MARGIN`` (in the indicator's own units). The rules are the flag rules of the
question kind's :class:`~analytics.indicators.Indicator` specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from analytics.config import QualityConfig
from analytics.events import dashboard_notify
from analytics.indicators import Derived, Indicator, StudyFigure
from analytics.intervals import interval_text
from analytics.metrics.outliers import OutlierFlag, flag_outliers, flag_with_intervals
from analytics.models import Exclusion, Flag, FlagEvent
from analytics.selectors import excludable_annotators
from apps.studies.models import Question, Study
from core.row_updates import rows_update
from core.types import Account


def _figures(hit: OutlierFlag, spec: Indicator) -> dict[str, Any]:
    assert spec.rule is not None
    return {
        "value": round(hit.value, 4),
        "median": round(hit.median, 4),
        "z": round(hit.z, 2) if np.isfinite(hit.z) else None,
        "evidence": hit.evidence,
        "unit": spec.evidence,
        "floor": spec.rule.floor,
        "threshold": spec.z_threshold,
    }


def _interval_hits(
    spec: Indicator,
    entries: Sequence[Sequence[float | None] | None],
    *,
    needed: int,
    notes: Sequence[str | None] | None = None,
) -> list[tuple[int, str, dict[str, Any]]]:
    """Rows, reasons and figures of :func:`flag_with_intervals` on one indicator's stored
    ``[estimate, low, high, n]`` intervals (the evidence is the interval's own ``n``);
    ``notes`` (per row) go before the reasons."""
    assert spec.rule is not None
    table = np.array(
        [
            [np.nan] * 4 if e is None else [np.nan if x is None else x for x in e[:4]]
            for e in entries
        ],
        dtype=float,
    ).reshape(-1, 4)
    found = flag_with_intervals(
        table[:, 0],
        table[:, 1],
        table[:, 2],
        np.nan_to_num(table[:, 3]).astype(int),
        min_evidence=needed,
        bad_side="low" if spec.direction == "higher" else "high",
        floor=spec.rule.floor,
        reaches=spec.rule.reaches,
        reaches_meaning=spec.rule.reaches_meaning,
        z_threshold=spec.rule.z,
        name=spec.rule.name,
        evidence_unit=spec.evidence.replace("_", " "),
        notes=notes,
    )
    return [
        (
            hit.annotator,
            hit.reason,
            {
                "value": round(hit.estimate, 4),
                "low": round(hit.low, 4),
                "high": round(hit.high, 4),
                "rule": hit.rule,
                "evidence": hit.evidence,
                "unit": spec.evidence,
                "floor": spec.rule.floor,
            },
        )
        for hit in found
    ]


def _rule_hits(
    derived: Derived,
    indicators: Sequence[Indicator],
    study_figures: Sequence[StudyFigure],
    *,
    config: QualityConfig,
) -> dict[tuple[int | None, str], tuple[str, dict[str, Any]]]:
    """Per (annotator id or None for the question, indicator): the reason and figures of every
    rule broken now."""
    hits: dict[tuple[int | None, str], tuple[str, dict[str, Any]]] = {}
    if not derived.annotators:
        return hits
    rules = {spec.key: spec.rule for spec in indicators if spec.rule is not None}
    computed = derived.study.get("intervals", {})
    notes = computed.get("notes", {})
    for unit, counts in derived.evidence.items():
        group = {
            s.key: s
            for s in indicators
            if s.key in rules and s.evidence == unit and s.key in derived.indicators
        }
        needed = config.evidence_needed(unit)
        # with intervals computed, the flag is a statement about the interval
        for key, spec in list(group.items()):
            if spec.interval is not None and spec.interval in derived.intervals:
                del group[key]
                texts = notes.get(key, {})
                for row, reason, figures in _interval_hits(
                    spec,
                    derived.intervals[spec.interval],
                    needed=needed,
                    notes=[texts.get(str(a)) for a in derived.annotators] if texts else None,
                ):
                    hits[(derived.annotators[row], key)] = (reason, figures)
        if not group:
            continue
        # a median and MAD of a handful of annotators mean little: only the floors apply then
        enough_peers = sum(c >= needed for c in counts) >= config.min_annotators
        values = {
            k: np.array([np.nan if x is None else x for x in derived.indicators[k]], dtype=float)
            for k in group
        }
        found = flag_outliers(
            values,
            counts,
            min_evidence=needed,
            z_threshold={
                k: s.z_threshold if enough_peers else s.bad_side * np.inf for k, s in group.items()
            },
            floors={k: f for k in group if (f := rules[k].floor) is not None},
            names={k: rules[k].name for k in group},
            evidence_unit=unit.replace("_", " "),
        )
        for hit in found:
            at = (derived.annotators[hit.annotator], hit.indicator)
            hits[at] = (hit.reason, _figures(hit, group[hit.indicator]))
    present = set(derived.annotators)
    for finding in computed.get("pairs", []):  # e.g. copied answers: both annotators
        for annotator in finding["annotators"]:
            if annotator in present:
                hits[(annotator, finding["indicator"])] = (finding["reason"], finding["figures"])
    n = derived.study.get("n_ratings", 0)
    intervals = computed.get("study", {})
    for figure in study_figures:
        value = derived.study.get(figure.key)
        if figure.floor is None or value is None or value >= figure.floor:
            continue
        if n < config.evidence_needed("items"):
            continue
        entry = intervals.get(figure.key)
        if entry is None:  # not computed yet: the value against the floor
            reason = f"{figure.title(derived.study)} {value:.2f}; below {figure.floor}; {n} ratings"
            hits[(None, figure.key)] = (
                reason,
                {"value": value, "floor": figure.floor, "evidence": n},
            )
        elif entry[2] is not None and entry[2] < figure.floor:  # the whole interval below
            text = interval_text(entry, figure.format)
            unit = figure.evidence
            reason = (
                f"{figure.title(derived.study)} {text}, below {figure.floor}; {entry[3]} {unit}"
            )
            hits[(None, figure.key)] = (
                reason,
                {
                    "value": entry[0],
                    "low": entry[1],
                    "high": entry[2],
                    "floor": figure.floor,
                    "evidence": entry[3],
                    "unit": unit,
                },
            )
    return hits


def _event(flag: Flag, *, actor: Account | None, before: str, note: str) -> FlagEvent:
    """The log entry of the flag's move from ``before`` to its status (unsaved)."""
    return FlagEvent(
        flag=flag, actor=actor, from_status=before, to_status=flag.status, note=note[:500]
    )


def _log(flag: Flag, *, actor: Account | None, before: str, note: str) -> None:
    _event(flag, actor=actor, before=before, note=note).save()


@transaction.atomic
def flags_evaluate(
    *,
    question: Question,
    derived: Derived,
    indicators: Sequence[Indicator],
    config: QualityConfig,
    study_figures: Sequence[StudyFigure] = (),
) -> list[dict[str, Any]]:
    """Apply the flag rules to fresh indicators; raise, refresh or reopen flags.

    New hits open a flag; open and confirmed flags get the new figures; a dismissed flag reopens
    only when its value got worse than at the dismissal by more than the reopen margin. Flags
    whose rule no longer breaks stay as they are, marked ``active=False``. ``indicators`` are
    the kind's specs (with the question's overrides); a study figure with a floor flags the
    whole question (annotator ``None``) below it. Returns the current hits (annotator,
    indicator, reason, figures) for the snapshot.
    """
    hits = _rule_hits(derived, indicators, study_figures, config=config)
    bad_sides = {spec.key: spec.bad_side for spec in indicators}
    existing = {
        (f.annotator_id, f.indicator): f
        for f in Flag.objects.select_for_update().filter(question=question)
    }
    # The quality worker runs this on every pass: the flags are written in one statement per
    # kind of write (raised, refreshed, logged, gone quiet), not one per flag.
    now = timezone.now()
    raised: list[Flag] = []
    refreshed: list[Flag] = []
    events: list[FlagEvent] = []
    for key, (reason, figures) in hits.items():
        flag = existing.get(key)
        if flag is None:
            raised.append(
                Flag(
                    study_id=question.study_id,
                    question=question,
                    annotator_id=key[0],
                    indicator=key[1],
                    reason=reason[:500],
                    figures=figures,
                )
            )
            continue
        before = flag.status
        unchanged = (flag.reason, flag.active, flag.figures)
        dismissed_at = flag.figures.get("dismissed_value")
        flag.reason, flag.active = reason[:500], True
        flag.figures = {**figures, "dismissed_value": dismissed_at}
        if before == Flag.Status.DISMISSED and dismissed_at is not None:
            bad_side = bad_sides.get(key[1], -1.0)
            if bad_side * (figures["value"] - dismissed_at) > config.reopen_margin:
                flag.status = Flag.Status.OPEN
                note = f"worse since dismissed: {reason}"
                events.append(_event(flag, actor=None, before=before, note=note))
        if flag.status != before or (flag.reason, flag.active, flag.figures) != unchanged:
            flag.updated_at = now
            refreshed.append(flag)
    Flag.objects.bulk_create(raised)  # with their ids (PostgreSQL, SQLite >= 3.35)
    events += [_event(flag, actor=None, before="", note=flag.reason) for flag in raised]
    rows_update(refreshed, ["reason", "active", "figures", "status", "updated_at"])
    FlagEvent.objects.bulk_create(events)
    stale = [f.pk for key, f in existing.items() if key not in hits and f.active]
    Flag.objects.filter(pk__in=stale).update(active=False, updated_at=now)
    return [
        {"annotator": key[0], "indicator": key[1], "reason": reason, "figures": figures}
        for key, (reason, figures) in hits.items()
    ]


def _flag_set_status(*, flag: Flag, actor: Account, status: str, note: str) -> Flag:
    flag = Flag.objects.select_for_update().get(pk=flag.pk)
    before = flag.status
    if before == status:
        return flag
    flag.status = status
    if status == Flag.Status.DISMISSED:
        flag.figures = {**flag.figures, "dismissed_value": flag.figures.get("value")}
    flag.save(update_fields=["status", "figures", "updated_at"])
    _log(flag, actor=actor, before=before, note=note)
    transaction.on_commit(
        partial(dashboard_notify, study_id=flag.study_id, question_id=flag.question_id)
    )
    return flag


@transaction.atomic
def flag_confirm(*, flag: Flag, actor: Account, note: str = "") -> Flag:
    """A manager agrees the flag points at a real problem (logged)."""
    return _flag_set_status(flag=flag, actor=actor, status=Flag.Status.CONFIRMED, note=note)


@transaction.atomic
def flag_dismiss(*, flag: Flag, actor: Account, note: str = "") -> Flag:
    """A manager judges the flag a false alarm; it reopens only if the figures get worse."""
    return _flag_set_status(flag=flag, actor=actor, status=Flag.Status.DISMISSED, note=note)


def _notify_study(study: Study) -> None:
    for question_id in study.questions.values_list("pk", flat=True):
        dashboard_notify(study_id=study.pk, question_id=question_id)


@transaction.atomic
def annotator_exclude(*, study: Study, annotator: Account, by: Account, reason: str) -> Exclusion:
    """Leave the annotator's answers out of the study's curated exports (until included again).

    ``reason`` is required (it goes into the provenance of curated exports); a blank one raises
    ``ValidationError`` and writes nothing. Excluding twice returns the active exclusion. Open
    flags of the annotator in the study are confirmed by the same act and logged with the reason.
    """
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "Say why: the reason goes into the exports' provenance."})
    if not excludable_annotators(study=study).filter(pk=annotator.pk).exists():
        raise ValidationError({"annotator": "This user takes no part in the study."})
    current = Exclusion.objects.filter(
        study=study, annotator=annotator, revoked_at__isnull=True
    ).first()
    if current is not None:
        return current
    exclusion = Exclusion(study=study, annotator=annotator, by=by, reason=reason)
    exclusion.full_clean()  # the reason's length
    exclusion.save()
    for flag in Flag.objects.filter(study=study, annotator=annotator, status=Flag.Status.OPEN):
        _flag_set_status(
            flag=flag, actor=by, status=Flag.Status.CONFIRMED, note=f"excluded: {reason}"
        )
    transaction.on_commit(partial(_notify_study, study))
    return exclusion


@transaction.atomic
def annotator_include(*, study: Study, annotator: Account, by: Account) -> Exclusion | None:
    """Revoke the annotator's active exclusion (kept, with its revocation, as history)."""
    exclusion = (
        Exclusion.objects.select_for_update()
        .filter(study=study, annotator=annotator, revoked_at__isnull=True)
        .first()
    )
    if exclusion is None:
        return None
    exclusion.revoked_at = timezone.now()
    exclusion.revoked_by = by
    exclusion.save(update_fields=["revoked_at", "revoked_by"])
    transaction.on_commit(partial(_notify_study, study))
    return exclusion
