"""The continuous question kind: a slider traced along a video or audio item.

Registered once in ``settings.QUESTION_KINDS`` as ``apps.continuous.kind.CONTINUOUS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analytics.indicators import Derived, Indicator, Json
from analytics.intervals import IntervalSet
from analytics.models import QualitySnapshot, QualityState
from apps.annotations.exporting import annotation_export_rows
from apps.annotations.models import Assignment
from apps.continuous import quality
from apps.continuous.config import clean_trace_settings, trace_settings
from apps.continuous.exporting import trace_rows, trace_sample_rows
from apps.continuous.forms import TraceSettingsForm
from apps.continuous.selectors import (
    item_overlay,
    item_traces,
    trace_progress,
    untraceable_items,
)
from apps.continuous.values import clean_trace_pointer
from apps.items.models import Item
from apps.recruitment.indicators import (
    GOLD_ACCURACY,
    gold_accuracy_publish,
    with_attention_floor,
)
from apps.studies.kinds import QuestionKind
from apps.studies.models import Label, Question
from apps.studies.selectors import question_items
from core.types import Account


class ContinuousKind(QuestionKind):
    """Traces recorded on the record page; the answer is a pointer to the finished trace."""

    key = Question.Kind.CONTINUOUS.value
    label = Question.Kind.CONTINUOUS.label
    indicators = (*quality.INDICATORS, GOLD_ACCURACY)
    count = quality.TRACES_DONE.key
    agreement = quality.KAPPA_SDA.key
    study_figures = (quality.POOLED_KAPPA_SDA, quality.ICC)
    answers_label = "Traces (first round)"
    heatmap_note = "kappa_SDA of each pair, sign coincidences pooled over the items both traced"
    annotators_note = (
        "Kappa with others, lag-corrected, is the same figure after each annotator's constant "
        "lag is removed (estimated against the truth on gold items, else against the others' "
        "mean; the samples a shift pads are dropped, not compared). It has no live value: it "
        "is computed with the intervals, so it shows their centre and is as fresh as they are. "
        'Samples of a trace close in time repeat each other: "about 54 independent samples of '
        '60" says what the 60 compared samples are worth, and the interval is as wide as that '
        "smaller number makes it. Moves smaller than the question's change tolerance count as "
        "no change."
    )
    overlap_unit = None
    pair_evidence = "trace steps"  # time steps both traced, over the items they share
    dashboard_page_cards = ("continuous/dashboard_traces.html",)
    item_card = "continuous/item_traces.html"
    export_functions = {
        "answers": annotation_export_rows,
        "traces": trace_rows,
        "samples": trace_sample_rows,
    }

    settings_form = TraceSettingsForm
    answer_settings = ("scale_min", "scale_max")  # the traces' values are on this scale
    preview_template = "continuous/preview.html"

    def clean_settings(self, raw: Any) -> dict[str, Any]:
        return clean_trace_settings(raw)

    def preview_context(self, *, question: Question, labels: list[Label]) -> dict[str, Any]:
        return {"settings": trace_settings(question)}

    def progress(self, *, question: Question, annotator: Account) -> dict[str, int]:
        return trace_progress(annotator=annotator, question=question)

    def scope_problem(self, question: Question) -> str:
        """Items of the scope the recorder cannot offer (text without a known signal): left
        untraced, they keep a recruited package from ever completing."""
        n = untraceable_items(question=question).count()
        if not n:
            return ""
        return (
            f"{n} of its items cannot be traced (no audio, video or known signal): the "
            "recorder never shows them. Narrow the scope to the clips and calibration items."
        )

    def clean_value(
        self, question: Question, value: Any, assignment: Assignment | None
    ) -> tuple[dict[str, Any], None]:
        return clean_trace_pointer(question, value, assignment)

    def item_context(self, *, question: Question, item: Item) -> dict[str, Any]:
        traces = item_traces(question=question, item=item)
        stimulus = "continuous/item_stimulus.html" if traces.strip else None
        return {"traces": traces, "stimulus": stimulus}

    def process(self, *, question_id: int) -> int:
        return quality.quality_traces_process(question_id=question_id)

    def rebuild(self, *, question_id: int) -> Any:
        return quality.quality_traces_rebuild(question_id=question_id)

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        return quality.derive_question(state, question, layout=layout)

    def publish_extras(
        self,
        derived: Derived,
        *,
        question: Question,
        state: QualityState,
        previous: QualitySnapshot | None,
        item_ids: Sequence[int] | None,
        rebuild: bool,
        refresh: bool,
    ) -> None:
        """Accuracy on hidden gold-trace attention checks (kappa_SDA with the truth against
        the study's trace threshold)."""
        gold_accuracy_publish(derived, question=question)

    def indicators_for(self, question: Question) -> tuple[Indicator, ...]:
        """The attention-check rule's floor is the study's attention floor."""
        return with_attention_floor(self.indicators, question=question)

    def intervals(self, question: Question) -> IntervalSet | None:
        """kappa_SDA with others, against the truth and the study ICC
        (:func:`apps.continuous.quality.trace_intervals`)."""
        return quality.trace_intervals(question)

    def page_context(self, *, question: Question, query: Mapping[str, str]) -> dict[str, Any]:
        """The traces card: one item's traces overlaid with its gold truth (``?item=<id>``
        when it names an item of the study, else the first gold item, else the first item)."""
        item_id = query.get("item")
        items = list(question_items(question))
        chosen = next((i for i in items if str(i.pk) == item_id), None) or next(
            (i for i in items if (i.metadata or {}).get("signal")), items[0] if items else None
        )
        return {
            "trace_items": items,
            "trace_overlay": item_overlay(question=question, item=chosen) if chosen else None,
        }


CONTINUOUS = ContinuousKind()
