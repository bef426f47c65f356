"""The pairwise-preference question kind: which of two items is preferred (or equal).

Registered once in ``settings.QUESTION_KINDS`` as ``apps.preferences.kind.PAIRWISE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from analytics.indicators import Derived, Indicator, Json
from analytics.intervals import IntervalSet
from analytics.models import QualitySnapshot, QualityState
from apps.items.models import Item
from apps.preferences import quality
from apps.preferences.exporting import judgement_rows, score_rows
from apps.preferences.forms import PairwiseSettingsForm
from apps.preferences.models import clean_pairwise_settings
from apps.preferences.selectors import item_judgements, judgement_progress
from apps.recruitment.indicators import (
    GOLD_ACCURACY,
    gold_accuracy_publish,
    with_attention_floor,
)
from apps.studies.kinds import QuestionKind
from apps.studies.models import Label, Question
from core.types import Account


class PairwiseKind(QuestionKind):
    """Judgements of item pairs on the compare page (not in the item queue)."""

    key = Question.Kind.PAIRWISE.value
    label = Question.Kind.PAIRWISE.label
    indicators = (*quality.INDICATORS, GOLD_ACCURACY)
    count = quality.JUDGEMENTS.key
    agreement = quality.OUTCOME_KAPPA.key
    study_figures = (quality.POOLED_TRANSITIVITY_KAPPA,)
    answers_label = "Judgements"
    heatmap_note = "Cohen's kappa of each pair on the outcomes of the pairs both judged"
    overlap_unit = "pairs"
    pair_evidence = "pairs"
    annotators_note = (
        "Transitivity kappa is 0 for an annotator answering at random and 1 for one whose "
        "choices never contradict each other. Its chance level counts the annotator's own share "
        'of "equal" answers (3/4 with none; Amidei\'s fixed 13/27 is right only when a third '
        'of the answers are "equal"), so answering at random scores about 0 however often '
        'one presses "equal".'
    )
    export_functions = {"judgements": judgement_rows, "scores": score_rows}
    item_card = "preferences/item_judgements.html"
    _results = (("preferred", "preferred"), ("equal", "equal"), ("other", "other preferred"))

    settings_form = PairwiseSettingsForm
    preview_template = "preferences/preview.html"

    def clean_settings(self, raw: Any) -> dict[str, Any]:
        return clean_pairwise_settings(raw).as_dict()

    def answered(self, question: Question) -> bool:
        return question.judgements.exists()

    def preview_context(self, *, question: Question, labels: list[Label]) -> dict[str, Any]:
        return {"strict": clean_pairwise_settings(question.settings).strict}

    def progress(self, *, question: Question, annotator: Account) -> dict[str, int]:
        return judgement_progress(question=question, annotator=annotator)

    def item_context(self, *, question: Question, item: Item) -> dict[str, Any]:
        rows = item_judgements(question=question, item=item)
        kept = [row.result for row in rows if not hasattr(row.judgement, "retraction")]
        tally = {key: kept.count(result) for key, result in self._results}
        return {"judgements": rows, "tally": tally}

    def process(self, *, question_id: int) -> int:
        return quality.quality_judgements_process(question_id=question_id)

    def rebuild(self, *, question_id: int) -> Any:
        return quality.quality_judgements_rebuild(question_id=question_id)

    def waiting(self, question_id: int) -> int:
        return quality.judgements_waiting(question_id)

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        return quality.derive_question(state, question, layout=layout)

    def intervals(self, question: Question) -> IntervalSet | None:
        """Transitivity kappa of each annotator
        (:func:`apps.preferences.quality.judgement_intervals`)."""
        return quality.judgement_intervals(question)

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
        """Accuracy on hidden gold-pair attention checks (:mod:`apps.preferences.checks`)."""
        gold_accuracy_publish(derived, question=question)

    def indicators_for(self, question: Question) -> tuple[Indicator, ...]:
        """The indicators with the question's own transitivity floor (``kappa_floor``) and
        the study's attention floor."""
        floor = clean_pairwise_settings(question.settings).kappa_floor
        return with_attention_floor(
            tuple(
                replace(spec, rule=replace(spec.rule, floor=floor))
                if spec is quality.TRANSITIVITY_KAPPA and spec.rule is not None
                else spec
                for spec in self.indicators
            ),
            question=question,
        )


PAIRWISE = PairwiseKind()
