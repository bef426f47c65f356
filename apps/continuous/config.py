"""Settings of a continuous question (``Question.settings``): validated, with defaults.

A continuous question asks the annotator to move a slider while a stimulus plays. Its settings
say what the slider looks like and how the trace is recorded and analysed; ``trace_settings``
is the one place that reads them, so defaults and checks are never repeated.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from django.core.exceptions import ValidationError

from apps.studies.kinds import own_settings
from apps.studies.models import Question


@dataclass(frozen=True)
class TraceSettings:
    """A continuous question's settings, complete and checked."""

    scale_min: float = 0.0
    scale_max: float = 1.0
    label_min: str = "Low"
    label_max: str = "High"
    orientation: str = "horizontal"
    recording_rate_hz: float = 10.0
    analysis_rate_hz: float = 1.0
    allow_pause: bool = True
    allow_seek: bool = False
    allow_redo: bool = False
    sda_tolerance: float = 0.0
    max_gap_s: float = 2.0

    @property
    def step(self) -> float:
        """Slider step of one arrow-key press: 1 % of the scale."""
        return (self.scale_max - self.scale_min) / 100

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


ORIENTATIONS = ("horizontal", "vertical")
_NUMBERS = (
    "scale_min",
    "scale_max",
    "recording_rate_hz",
    "analysis_rate_hz",
    "sda_tolerance",
    "max_gap_s",
)
_FLAGS = ("allow_pause", "allow_seek", "allow_redo")
_LABELS = ("label_min", "label_max")
MAX_RECORDING_RATE_HZ = 60.0
MAX_LABEL_LENGTH = 60
MIN_GAP_INTERVALS = 2.5  # a gap must span this many recording intervals


def clean_trace_settings(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Validate raw question settings and return them complete, with defaults filled in.

    Raises ``ValidationError`` naming every problem found, keyed by the setting it is about
    (unknown settings under ``settings``); the quality overrides every kind may have are
    left out (:func:`apps.studies.kinds.clean_question_settings` checks them). The limits
    are the module's constants, which the question editor's help texts
    (:class:`apps.continuous.forms.TraceSettingsForm`) quote.
    """
    raw = own_settings(raw)
    defaults = TraceSettings()
    unknown = sorted(set(raw) - set(defaults.as_dict()))
    errors: dict[str, list[str]] = {}
    if unknown:
        errors["settings"] = [f"unknown setting {name!r}" for name in unknown]
    data = defaults.as_dict() | {k: v for k, v in raw.items() if k not in unknown}

    def refuse(name: str, message: str) -> None:
        errors.setdefault(name, []).append(f"{name} {message}")

    for name in _NUMBERS:
        value = data[name]
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            refuse(name, "must be a number")
            data[name] = getattr(defaults, name)
    for name in _FLAGS:
        if not isinstance(data[name], bool):
            refuse(name, "must be true or false")
    for name in _LABELS:
        if not isinstance(data[name], str) or len(data[name]) > MAX_LABEL_LENGTH:
            refuse(name, f"must be a text of at most {MAX_LABEL_LENGTH} characters")
    if data["orientation"] not in ORIENTATIONS:
        refuse("orientation", f"must be one of {', '.join(ORIENTATIONS)}")
    if data["scale_max"] <= data["scale_min"]:
        refuse("scale_max", "must be above scale_min")
    if not 0 < data["recording_rate_hz"] <= MAX_RECORDING_RATE_HZ:
        refuse("recording_rate_hz", f"must be in (0, {MAX_RECORDING_RATE_HZ:g}]")
    if not 0 < data["analysis_rate_hz"] <= data["recording_rate_hz"]:
        refuse("analysis_rate_hz", "must be above 0 and at most recording_rate_hz")
    if not 0 <= data["sda_tolerance"] < data["scale_max"] - data["scale_min"]:
        refuse("sda_tolerance", "must be >= 0 and smaller than the scale")
    if (
        data["recording_rate_hz"] > 0
        and data["max_gap_s"] < MIN_GAP_INTERVALS / data["recording_rate_hz"]
    ):
        refuse("max_gap_s", f"must allow at least {MIN_GAP_INTERVALS:g} recording intervals")
    if errors:
        raise ValidationError(errors)
    return {k: float(v) if k in _NUMBERS else v for k, v in data.items()}


def trace_settings(question: Question) -> TraceSettings:
    """The question's settings as a ``TraceSettings`` (validated)."""
    return TraceSettings(**clean_trace_settings(question.settings))
