"""Writes of the analytics app: flags raised by the rules, a manager's decisions on them, and
annotator exclusions. Every change of a flag's status is logged as a :class:`FlagEvent`.

A dismissed flag stays dismissed while the annotator's figures hover where they were; it reopens
only when the indicator moves further to the bad side than it stood at the dismissal by more than
``settings.QUALITY_REOPEN_MARGIN`` (in the indicator's own units, default 0.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from analytics.events import dashboard_notify
from analytics.indicators import Derived, Rule
from analytics.metrics.outliers import OutlierFlag, flag_outliers
from analytics.models import Exclusion, Flag, FlagEvent
from apps.studies.models import Question, Study

ALPHA_FLOOR = 0.667  # Krippendorff (2004): lowest alpha for tentative conclusions


def _figures(hit: OutlierFlag, rule: Rule) -> dict[str, Any]:
    return {
        "value": round(hit.value, 4),
        "median": round(hit.median, 4),
        "z": round(hit.z, 2) if np.isfinite(hit.z) else None,
        "evidence": hit.evidence,
        "unit": rule.evidence,
        "floor": rule.floor,
        "threshold": rule.z,
    }


def _rule_hits(
    derived: Derived, rules: Mapping[str, Rule], *, min_evidence: Mapping[str, int]
) -> dict[tuple[int | None, str], tuple[str, dict[str, Any]]]:
    """Per (annotator id, indicator): the reason and figures of every rule broken now."""
    hits: dict[tuple[int | None, str], tuple[str, dict[str, Any]]] = {}
    if not derived.annotators:
        return hits
    min_peers = int(getattr(settings, "QUALITY_MIN_ANNOTATORS", 5))
    for unit, counts in derived.evidence.items():
        group = {k: r for k, r in rules.items() if r.evidence == unit and k in derived.indicators}
        if not group:
            continue
        # a median and MAD of a handful of annotators mean little: only the floors apply then
        enough_peers = sum(c >= min_evidence.get(unit, 20) for c in counts) >= min_peers
        values = {
            k: np.array([np.nan if x is None else x for x in derived.indicators[k]], dtype=float)
            for k in group
        }
        found = flag_outliers(
            values,
            counts,
            min_evidence=min_evidence.get(unit, 20),
            z_threshold={
                k: r.z if enough_peers else np.sign(r.z) * np.inf for k, r in group.items()
            },
            floors={k: r.floor for k, r in group.items() if r.floor is not None},
            names={k: r.name for k, r in group.items()},
            evidence_unit=unit.replace("_", " "),
        )
        for hit in found:
            key = (derived.annotators[hit.annotator], hit.indicator)
            hits[key] = (hit.reason, _figures(hit, group[hit.indicator]))
    alpha, n = derived.study.get("alpha"), derived.study.get("n_ratings", 0)
    if alpha is not None and alpha < ALPHA_FLOOR and n >= min_evidence.get("items", 20):
        reason = (
            f"Krippendorff alpha ({derived.study.get('alpha_level', 'nominal')}) {alpha:.2f}; "
            f"below {ALPHA_FLOOR}; {n} ratings"
        )
        hits[(None, "alpha")] = (reason, {"value": alpha, "floor": ALPHA_FLOOR, "evidence": n})
    return hits


def _log(flag: Flag, *, actor: AbstractBaseUser | None, before: str, note: str) -> None:
    FlagEvent.objects.create(
        flag=flag, actor=actor, from_status=before, to_status=flag.status, note=note[:500]
    )


@transaction.atomic
def flags_evaluate(
    *,
    question: Question,
    derived: Derived,
    rules: Mapping[str, Rule],
    min_evidence: Mapping[str, int],
) -> list[dict[str, Any]]:
    """Apply the flag rules to fresh indicators; raise, refresh or reopen flags.

    New hits open a flag; open and confirmed flags get the new figures; a dismissed flag reopens
    only when its value got worse than at the dismissal by more than the reopen margin. Flags
    whose rule no longer breaks stay as they are, marked ``active=False``. Returns the current
    hits (annotator, indicator, reason, figures) for the snapshot.
    """
    hits = _rule_hits(derived, rules, min_evidence=min_evidence)
    margin = float(getattr(settings, "QUALITY_REOPEN_MARGIN", 0.1))
    existing = {
        (f.annotator_id, f.indicator): f
        for f in Flag.objects.select_for_update().filter(question=question)
    }
    for key, (reason, figures) in hits.items():
        flag = existing.get(key)
        if flag is None:
            flag = Flag.objects.create(
                study_id=question.study_id,
                question=question,
                annotator_id=key[0],
                indicator=key[1],
                reason=reason[:500],
                figures=figures,
            )
            _log(flag, actor=None, before="", note=reason)
            continue
        before = flag.status
        unchanged = (flag.reason, flag.active, flag.figures)
        dismissed_at = flag.figures.get("dismissed_value")
        flag.reason, flag.active = reason[:500], True
        flag.figures = {**figures, "dismissed_value": dismissed_at}
        if before == Flag.Status.DISMISSED and dismissed_at is not None:
            bad_side = np.sign(rules[key[1]].z) if key[1] in rules else -1.0
            if bad_side * (figures["value"] - dismissed_at) > margin:
                flag.status = Flag.Status.OPEN
                _log(flag, actor=None, before=before, note=f"worse since dismissed: {reason}")
        if flag.status != before or (flag.reason, flag.active, flag.figures) != unchanged:
            flag.save()
    stale = [f.pk for key, f in existing.items() if key not in hits and f.active]
    Flag.objects.filter(pk__in=stale).update(active=False, updated_at=timezone.now())
    return [
        {"annotator": key[0], "indicator": key[1], "reason": reason, "figures": figures}
        for key, (reason, figures) in hits.items()
    ]


def _flag_set_status(*, flag: Flag, actor: AbstractBaseUser, status: str, note: str) -> Flag:
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
def flag_confirm(*, flag: Flag, actor: AbstractBaseUser, note: str = "") -> Flag:
    """A manager agrees the flag points at a real problem (logged)."""
    return _flag_set_status(flag=flag, actor=actor, status=Flag.Status.CONFIRMED, note=note)


@transaction.atomic
def flag_dismiss(*, flag: Flag, actor: AbstractBaseUser, note: str = "") -> Flag:
    """A manager judges the flag a false alarm; it reopens only if the figures get worse."""
    return _flag_set_status(flag=flag, actor=actor, status=Flag.Status.DISMISSED, note=note)


def _notify_study(study: Study) -> None:
    for question_id in study.questions.values_list("pk", flat=True):
        dashboard_notify(study_id=study.pk, question_id=question_id)


@transaction.atomic
def annotator_exclude(
    *, study: Study, annotator: AbstractBaseUser, by: AbstractBaseUser, reason: str = ""
) -> Exclusion:
    """Leave the annotator's answers out of the study's curated exports (until included again).

    Excluding twice returns the active exclusion. Open flags of the annotator in the study are
    confirmed by the same act and logged with the reason.
    """
    if not study.memberships.filter(user=annotator).exists():
        raise ValidationError({"annotator": "This user takes no part in the study."})
    current = Exclusion.objects.filter(
        study=study, annotator=annotator, revoked_at__isnull=True
    ).first()
    if current is not None:
        return current
    exclusion = Exclusion.objects.create(
        study=study, annotator=annotator, by=by, reason=reason[:500]
    )
    for flag in Flag.objects.filter(study=study, annotator=annotator, status=Flag.Status.OPEN):
        _flag_set_status(
            flag=flag, actor=by, status=Flag.Status.CONFIRMED, note=f"excluded: {reason}"
        )
    transaction.on_commit(partial(_notify_study, study))
    return exclusion


@transaction.atomic
def annotator_include(
    *, study: Study, annotator: AbstractBaseUser, by: AbstractBaseUser
) -> Exclusion | None:
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
