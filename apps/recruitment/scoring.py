"""Gold answers of every question kind: what a known answer is, and how an answer is scored.

- categorical: ``{"label": key}``; an answer is right when it picks the same label.
- pairwise (a calibration pair with a known order): ``{"versus": "<external id>", "outcome":
  1 | 0 | -1}``, the outcome of the gold's item against ``versus`` (1: the gold's item is
  better, 0: equal); an answer is the outcome of the same pair in the same orientation, right
  when equal to the known one.
- continuous (a gold trace): ``{"signal": "<key>"}``, the item's known signal (read from
  the item's metadata); an answer is the slider's samples ``{"times": [...], "values": [...]}``
  over the stimulus, resampled at the question's analysis rate like a finished recording and
  compared with the truth by kappa_SDA after lag correction (the calibration report's
  :func:`~apps.continuous.selectors.item_calibration`); right when kappa_SDA reaches the
  study's ``trace_threshold``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError

from analytics.metrics.resample import resample_hold
from apps.annotations.values import clean_value
from apps.continuous.config import trace_settings
from apps.continuous.models import GoldSignal
from apps.continuous.selectors import (
    TRUTH_TOL,
    gold_signal_for_item,
    item_calibration,
    truth_at_rate,
)
from apps.items.models import Item
from apps.preferences.models import clean_pairwise_settings
from apps.recruitment.models import GoldAnswer, Recruitment
from apps.studies.models import Question

MAX_TRAINING_SAMPLES = 100_000
"""Most slider samples in one training trace (an hour at about 28 Hz)."""
OUTCOMES = (1, 0, -1)


def _invalid(message: str, field: str = "value") -> ValidationError:
    return ValidationError({field: message})


@dataclass(frozen=True)
class Scored:
    """A training answer as stored: its value, whether it is right, and its score (traces:
    kappa_SDA with the truth; ``None`` for the other kinds)."""

    value: Any
    correct: bool
    score: float | None


def gold_value_clean(*, item: Item, question: Question, value: Any) -> Any:
    """The stored form of a known answer to ``question`` about ``item``.

    Raises ``ValidationError`` (field errors) when it does not fit, or the kind takes no gold
    answers.
    """
    if question.kind == Question.Kind.CATEGORICAL:
        return clean_value(question, value)[0]
    if question.kind == Question.Kind.PAIRWISE:
        if not isinstance(value, dict) or not isinstance(value.get("versus"), str):
            raise _invalid('Give the pair as {"versus": "<external id>", "outcome": 1}.')
        versus = Item.objects.filter(study_id=item.study_id, external_id=value["versus"]).first()
        if versus is None:
            raise _invalid(f"{value['versus']!r} is not an item of this study.")
        if versus.pk == item.pk:
            raise _invalid("Compare the item with another item.")
        return {"versus": versus.external_id, "outcome": _outcome(question, value.get("outcome"))}
    if question.kind == Question.Kind.CONTINUOUS:
        signal = gold_signal_for_item(item)
        if signal is None:
            raise _invalid(
                'A gold trace needs an item whose metadata names a known signal ({"signal": '
                '"<key>"}); upload the signal first.',
                field="item",
            )
        return {"signal": signal.key}
    raise _invalid(f"{question.get_kind_display()} questions take no gold answers.", "question")


def _outcome(question: Question, raw: Any) -> int:
    outcome = raw.get("outcome") if isinstance(raw, dict) else raw
    if isinstance(outcome, bool) or outcome not in OUTCOMES:
        raise _invalid("Give the outcome as 1 (first better), 0 (equal) or -1 (second better).")
    if outcome == 0 and clean_pairwise_settings(question.settings).strict:
        raise _invalid("This question is strict: one of the two must be better.")
    return int(outcome)


def training_answer_score(*, gold: GoldAnswer, value: Any, recruitment: Recruitment) -> Scored:
    """Check a training answer against its gold answer; ``ValidationError`` (field errors)
    for an invalid one."""
    question = gold.question
    if question.kind == Question.Kind.PAIRWISE:
        outcome = _outcome(question, value)
        return Scored({"outcome": outcome}, outcome == gold.value["outcome"], None)
    if question.kind == Question.Kind.CONTINUOUS:
        kappa = _trace_kappa(question, GoldSignal.objects.get(key=gold.value["signal"]), value)
        if not math.isfinite(kappa):  # a truth without any change: nothing to follow
            return Scored({"kappa_sda": None}, False, None)
        return Scored({"kappa_sda": round(kappa, 4)}, kappa >= recruitment.trace_threshold, kappa)
    cleaned = clean_value(question, value)[0]
    return Scored(cleaned, cleaned == gold.value, None)


def _trace_kappa(question: Question, signal: GoldSignal, value: Any) -> float:
    """kappa_SDA with the truth of slider samples ``{"times", "values"}`` (nan if undefined)."""
    settings = trace_settings(question)
    if not isinstance(value, dict) or not all(
        isinstance(value.get(name), list) for name in ("times", "values")
    ):
        raise _invalid('Give the slider samples as {"times": [...], "values": [...]}.')
    if max(len(value["times"]), len(value["values"])) > MAX_TRAINING_SAMPLES:
        raise _invalid(f"Send at most {MAX_TRAINING_SAMPLES:,} samples.")
    try:
        times = np.asarray(value["times"], dtype=np.float64)
        values = np.asarray(value["values"], dtype=np.float64)
    except (TypeError, ValueError):
        raise _invalid("Times and values must be numbers.") from None
    if times.shape != values.shape or times.ndim != 1 or times.size < 2:
        raise _invalid("Send as many times as values, at least two.")
    if not (np.isfinite(times).all() and (np.diff(times) > 0).all() and times[0] >= 0):
        raise _invalid("Times must be increasing seconds from 0.")
    low, high = settings.scale_min, settings.scale_max
    if not (np.isfinite(values).all() and (values >= low).all() and (values <= high).all()):
        raise _invalid(f"Values must lie in [{low:g}, {high:g}].")
    if times[-1] < signal.duration - settings.max_gap_s:
        raise _invalid(
            f"The trace stops at {times[-1]:.1f} s of {signal.duration:.1f} s; follow the "
            "stimulus to the end."
        )
    rate = settings.analysis_rate_hz
    trace = resample_hold(times, values, rate_hz=rate, duration=signal.duration)
    figures = item_calibration(
        trace,
        truth_at_rate(signal, rate_hz=rate),
        rate_hz=rate,
        tol=settings.sda_tolerance,
        truth_tol=TRUTH_TOL,
    )
    return float(figures["kappa_sda"])
