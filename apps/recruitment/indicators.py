"""The attention-check indicator: each annotator's accuracy on a question's hidden gold items.

Declared like every indicator (:class:`~analytics.indicators.Indicator`) and listed by the
categorical kind (label checks), the continuous kind (gold-trace checks, passed when the
trace's kappa_SDA with the truth reaches the study's trace threshold) and the pairwise kind
(gold pairs served among the scheduler's pairs, passed when the outcome is the known order),
so the dashboard shows
it as a column (only for questions with attention checks), the API and exports carry it
with its interval and evidence, and the flag rules judge it: an annotator is flagged once the
Wilson interval of their accuracy lies below the study's attention floor
(``Recruitment.attention_floor``), or stands out from the others'.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analytics.indicators import Derived, FlagRule, Indicator, json_ready
from apps.recruitment.models import Recruitment
from apps.recruitment.selectors import gold_accuracy
from apps.studies.models import Question

GOLD_ACCURACY = Indicator(
    "gold_accuracy",
    "Attention checks",
    direction="higher",
    rule=FlagRule("accuracy on attention checks", floor=0.7),
    evidence="gold_checks",
    interval="gold_accuracy",
    explanation="Share of attention checks (items with a known answer) this annotator got right.",
)


def with_attention_floor(
    indicators: tuple[Indicator, ...], *, question: Question
) -> tuple[Indicator, ...]:
    """``indicators`` with the attention-check rule's floor set to the study's own floor."""
    recruitment = Recruitment.objects.filter(study_id=question.study_id).first()
    if recruitment is None or GOLD_ACCURACY.rule is None:
        return indicators
    rule = replace(GOLD_ACCURACY.rule, floor=recruitment.attention_floor)
    return tuple(
        replace(spec, rule=rule) if spec.key == GOLD_ACCURACY.key else spec for spec in indicators
    )


def gold_accuracy_publish(derived: Derived, *, question: Question) -> None:
    """Add the annotators' accuracy on the question's attention checks to ``derived``: the
    value, the evidence (checks answered) and the Wilson interval, on its annotator axis.

    Nothing is added for a question without attention checks (no dashboard column).
    """
    found = gold_accuracy(study=question.study, question=question)
    if not found:
        return
    rows = [found.get(annotator) for annotator in derived.annotators]
    derived.indicators[GOLD_ACCURACY.key] = [
        None if row is None else json_ready(row.interval.estimate) for row in rows
    ]
    derived.evidence[GOLD_ACCURACY.evidence] = [0 if row is None else row.checked for row in rows]
    derived.intervals[str(GOLD_ACCURACY.interval)] = [
        None
        if row is None
        else [
            *json_ready(np.array(row.interval[:3], dtype=float)),
            row.checked,
        ]
        for row in rows
    ]
