"""The quality configuration: one object built from the ``QUALITY_*`` settings.

Every default lives once, in ``annotate_site/settings.py`` (read from the environment); this
module reads the settings without defaults of its own. A question may override its flag rules
and minimum evidence in ``Question.settings["quality"]`` (any kind), validated against the
kind's indicators by :func:`clean_quality_override` when the question is saved::

    {"rules": {"cohen_kappa": {"z": 3.0, "floor": 0.3}}, "min_evidence": {"items": 50}}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError

if TYPE_CHECKING:
    from analytics.indicators import Indicator

#: Evidence units and the setting giving each one's minimum. A unit not listed here (a new
#: kind's own) takes the minimum of "items".
EVIDENCE_SETTINGS = {
    "items": "QUALITY_MIN_EVIDENCE",
    "pairs": "QUALITY_MIN_EVIDENCE",
    "repeats": "QUALITY_MIN_REPEATS",
    "audits": "QUALITY_MIN_REPEATS",
    "triplets": "QUALITY_MIN_TRIPLETS",
    "traces": "QUALITY_MIN_TRACES",
    "gold_items": "QUALITY_MIN_GOLD_ITEMS",
    "gold_checks": "QUALITY_MIN_GOLD_ITEMS",  # attention checks (the Wilson interval decides)
}
UPDATE_MODES = ("inline", "thread", "worker")


@dataclass(frozen=True)
class QualityConfig:
    """The live-quality settings (docs/deploying.md and docs/dashboard.md give their meaning)."""

    updates: str
    sweep_interval: float
    snapshot_interval: float
    ds_interval: float
    forecast_interval: float
    forecast_duty: float
    interval_seconds: float
    interval_duty: float
    plot_interval: float
    push_duty: float
    slow_work_apart: bool
    min_overlap: int
    min_annotators: int
    reopen_margin: float
    min_evidence: Mapping[str, int]

    def evidence_needed(self, unit: str) -> int:
        """The minimum evidence of ``unit`` (a kind's own units take that of "items")."""
        return self.min_evidence.get(unit, self.min_evidence["items"])

    def for_question(self, question_settings: Mapping[str, Any]) -> QualityConfig:
        """This configuration with the question's ``settings["quality"]["min_evidence"]``."""
        override = question_settings.get("quality", {}).get("min_evidence", {})
        if not override:
            return self
        return QualityConfig(**{**self.__dict__, "min_evidence": {**self.min_evidence, **override}})


def duty_rest(took: float, duty: float) -> float:
    """Seconds that slow work which took ``took`` CPU seconds rests before it runs again, so that
    it keeps at most ``duty`` of a core busy however its cost grows: ``took / duty`` (0 for a
    ``duty`` of 0: no rest). The intervals (``QUALITY_INTERVAL_DUTY``) and the disagreement
    forecast (``QUALITY_FORECAST_DUTY``) rest so."""
    return took / duty if duty > 0 else 0.0


def quality_config() -> QualityConfig:
    """The configuration as the settings say now (cheap: built on every call, so tests that
    change a setting see it at once)."""
    if settings.QUALITY_UPDATES not in UPDATE_MODES:
        raise ValueError(f"QUALITY_UPDATES must be one of {', '.join(UPDATE_MODES)}.")
    return QualityConfig(
        updates=settings.QUALITY_UPDATES,
        sweep_interval=float(settings.QUALITY_SWEEP_INTERVAL),
        snapshot_interval=float(settings.QUALITY_SNAPSHOT_INTERVAL),
        ds_interval=float(settings.QUALITY_DS_INTERVAL),
        forecast_interval=float(settings.QUALITY_FORECAST_INTERVAL),
        forecast_duty=float(settings.QUALITY_FORECAST_DUTY),
        interval_seconds=float(settings.QUALITY_INTERVAL_SECONDS),
        interval_duty=float(settings.QUALITY_INTERVAL_DUTY),
        plot_interval=float(settings.QUALITY_PLOT_INTERVAL),
        push_duty=float(settings.QUALITY_PUSH_DUTY),
        slow_work_apart=bool(settings.QUALITY_SLOW_WORK_APART),
        min_overlap=int(settings.QUALITY_MIN_OVERLAP),
        min_annotators=int(settings.QUALITY_MIN_ANNOTATORS),
        reopen_margin=float(settings.QUALITY_REOPEN_MARGIN),
        min_evidence={
            unit: int(getattr(settings, name)) for unit, name in EVIDENCE_SETTINGS.items()
        },
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def clean_quality_override(raw: Any, *, indicators: Iterable[Indicator]) -> dict[str, Any]:
    """Validate a question's ``settings["quality"]`` against its kind's indicators.

    ``rules`` maps an indicator with a flag rule to ``{"z": > 0, "floor": number or null}``
    (``z`` is the robust-z distance on the indicator's bad side); ``min_evidence`` maps an
    evidence unit of the kind's rules to a whole number >= 1. Raises ``ValidationError``
    naming every problem.
    """
    if not isinstance(raw, dict):
        raise ValidationError({"settings": "settings.quality must be an object."})
    ruled = {spec.key: spec for spec in indicators if spec.rule is not None}
    units = {spec.evidence for spec in ruled.values()}
    errors: list[str] = [
        f"unknown quality setting {name!r}" for name in sorted(set(raw) - {"rules", "min_evidence"})
    ]
    rules = raw.get("rules", {})
    if not isinstance(rules, dict):
        errors.append("quality.rules must be an object")
        rules = {}
    for key, change in rules.items():
        if key not in ruled:
            errors.append(f"quality.rules: {key!r} is not a flagged indicator ({', '.join(ruled)})")
        elif not isinstance(change, dict) or set(change) - {"z", "floor"}:
            errors.append(f"quality.rules.{key} takes z and floor")
        elif "z" in change and not (_number(change["z"]) and change["z"] > 0):
            errors.append(f"quality.rules.{key}.z must be a number above 0")
        elif change.get("floor") is not None and not _number(change["floor"]):
            errors.append(f"quality.rules.{key}.floor must be a number or null")
    evidence = raw.get("min_evidence", {})
    if not isinstance(evidence, dict):
        errors.append("quality.min_evidence must be an object")
        evidence = {}
    for unit, n in evidence.items():
        if unit not in units:
            known = ", ".join(sorted(units))
            errors.append(f"quality.min_evidence: {unit!r} is not an evidence unit ({known})")
        elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
            errors.append(f"quality.min_evidence.{unit} must be a whole number of at least 1")
    if errors:
        raise ValidationError({"settings": "; ".join(errors) + "."})
    return {"rules": rules, "min_evidence": evidence}
