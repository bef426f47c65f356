"""The categorical question kind: labels picked from the question's scale.

Registered once in ``settings.QUESTION_KINDS`` as ``apps.categorical.kind.CATEGORICAL``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from analytics.config import quality_config
from analytics.indicators import Derived, Indicator, Json
from analytics.intervals import IntervalSet
from analytics.metrics.intervals import retest_kappa_interval
from analytics.metrics.uncertainty import (
    mean_t_interval,
)
from analytics.models import QualitySnapshot, QualityState
from analytics.plotting import px
from analytics.selectors import question_ratings, top_disagreements
from apps.annotations.exporting import annotation_export_rows
from apps.annotations.models import Assignment
from apps.annotations.ordering import (
    SETTINGS as QUEUE_ORDER_SETTINGS,
)
from apps.annotations.ordering import (
    QueueOrderSettingsForm,
    clean_queue_order_settings,
    queue_order_of,
    queue_order_problems,
)
from apps.categorical import indicators as figures
from apps.categorical import quality
from apps.models_registry.suggestions import (
    ANCHORING_FIGURES,
    SuggestionSettingsForm,
    clean_suggestion_settings,
    suggestion_run_problem,
)
from apps.recruitment.indicators import (
    GOLD_ACCURACY,
    gold_accuracy_publish,
    with_attention_floor,
)
from apps.studies.kinds import QuestionKind
from apps.studies.models import Label, Question, shortcut_problem

MAX_HISTOGRAM_BARS = 6


class CategoricalSettingsForm(SuggestionSettingsForm, QueueOrderSettingsForm):
    """A categorical question's settings in the editor: its suggestions and its queue order."""


def aad_histograms(matrices: dict, names: list[str]) -> dict | None:
    """Per annotator: share of shared items at each AAD difference from the others."""
    differences = matrices.get("aad_differences") or []
    counts = np.array(matrices.get("aad_counts") or [], dtype=float)
    if counts.size == 0 or not differences:
        return None
    names_of_bins = [f"{d:g}" for d in differences]  # tooltips
    tick_labels = list(names_of_bins)
    if len(differences) > MAX_HISTOGRAM_BARS:  # label coordinates give many distinct distances
        edges = np.linspace(0.0, max(differences), MAX_HISTOGRAM_BARS + 1)
        which = np.searchsorted(edges, differences, side="right") - 1
        counts = counts @ np.eye(MAX_HISTOGRAM_BARS)[np.clip(which, 0, MAX_HISTOGRAM_BARS - 1)]
        names_of_bins = [f"{lo:.2g} to {hi:.2g}" for lo, hi in itertools.pairwise(edges)]
        tick_labels = [f"{lo:.1f}" if j % 2 == 0 else "" for j, lo in enumerate(edges[:-1])]
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(totals > 0, counts / totals, 0.0)
    pooled = counts.sum(axis=0) / max(counts.sum(), 1.0)
    width, height = 150.0, 60.0
    bar = width / len(names_of_bins)
    charts = []
    for k in np.flatnonzero(totals[:, 0] > 0):
        bars = [
            {
                "x": px(j * bar + 1),
                "x2": px(j * bar + bar - 1),
                "w": px(bar - 2),
                "h": px(shares[k, j] * height),
                "y": px(height - shares[k, j] * height),
                "ref": px(height - pooled[j] * height),
                "title": f"AAD {names_of_bins[j]}: {shares[k, j]:.0%} of shared items",
            }
            for j in range(len(names_of_bins))
        ]
        charts.append({"name": names[k], "bars": bars, "n": int(totals[k, 0])})
    ticks = [{"x": px((j + 0.5) * bar), "label": label} for j, label in enumerate(tick_labels)]
    return {"charts": charts, "ticks": ticks, "width": width, "height": height, "bar": bar}


class CategoricalKind(QuestionKind):
    """One label per item from the question's scale (nominal or ordered), in the queue."""

    key = Question.Kind.CATEGORICAL.value
    label = Question.Kind.CATEGORICAL.label
    queue = True
    indicators = (*figures.INDICATORS, GOLD_ACCURACY)
    count = figures.ITEMS_DONE.key
    agreement = figures.COHEN_KAPPA.key
    study_figures = (figures.ALPHA, figures.FLEISS_KAPPA)
    answers_label = "Ratings (first round)"
    heatmap_note = "Cohen's kappa of each pair on the items both labelled"
    dashboard_cards = ("categorical/dashboard.html#items",)
    dashboard_plots = ("categorical/dashboard.html#histograms",)
    export_functions = {"answers": annotation_export_rows}
    has_labels = True
    preview_template = "categorical/preview.html"
    settings_form = CategoricalSettingsForm
    dashboard_page_cards = ("categorical/anchoring.html", "categorical/queue_order.html")
    card_figures = ANCHORING_FIGURES

    def clean_settings(self, raw: Any) -> dict[str, Any]:
        """A model run to suggest from and the held-out share
        (:func:`~apps.models_registry.suggestions.clean_suggestion_settings`), and the queue's
        active order (:func:`~apps.annotations.ordering.clean_queue_order_settings`); nothing
        else. Every field's problem is named at once."""
        raw = dict(raw or {})
        errors: dict[str, list[str]] = {}
        cleaned: dict[str, Any] = {}
        for clean in (clean_suggestion_settings, clean_queue_order_settings):
            try:
                cleaned.update(clean(raw))
            except ValidationError as exc:
                errors.update(exc.message_dict)
        if errors:
            raise ValidationError(errors)
        unknown = sorted(
            set(raw) - {"suggestion_run", "suggestion_held_out", *QUEUE_ORDER_SETTINGS}
        )
        if unknown:
            raise ValidationError(
                {"settings": f"Categorical questions take no setting {', '.join(unknown)}."}
            )
        return cleaned

    def page_context(self, *, question: Question, query: Mapping[str, str]) -> dict[str, Any]:
        """The suggestions card: the anchoring effect of a question that suggests a model's
        labels (:func:`apps.models_registry.selectors.anchoring_report`), drawn on load."""
        from apps.models_registry.selectors import anchoring_report

        return {
            "anchoring": anchoring_report(question=question),
            "card_figures": ANCHORING_FIGURES,
            "queue_order": queue_order_of(study=question.study),
        }

    def settings_problems(self, question: Question) -> dict[str, str]:
        """The suggesting run and the ordering run must be the question's own; one question
        of the study orders its queue."""
        problem = suggestion_run_problem(question)
        problems = {"suggestion_run": problem} if problem else {}
        return {**problems, **queue_order_problems(question)}

    def preview_context(self, *, question: Question, labels: list[Label]) -> dict[str, Any]:
        """The labels as the queue would draw them; a shortcut the queue would refuse (``s``,
        ``u``, an unprintable key) is left off its button and named at once, as the save
        would name it (it was drawn as typed and refused only on save)."""
        problems = []
        for n, label in enumerate(labels, start=1):
            if problem := shortcut_problem(label.shortcut):
                problems.append(f"Label {n} ({label.name}): {problem}")
                label.shortcut = ""
        return {"labels": labels, "shortcut_problems": problems}

    def clean_value(
        self, question: Question, value: Any, assignment: Assignment | None
    ) -> tuple[dict[str, str], Label]:
        """Accept ``"key"`` or ``{"label": "key"}``; the key must be one of the question's
        labels."""
        key = value.get("label") if isinstance(value, dict) else value
        if not isinstance(key, str) or not key:
            raise ValidationError({"value": 'Give the label key, e.g. {"label": "joy"}.'})
        label = next((lab for lab in question.labels.all() if lab.key == key), None)
        if label is None:
            choices = ", ".join(question.labels.values_list("key", flat=True))
            raise ValidationError(
                {"value": f"{key!r} is not a label of {question.key!r}; choose from {choices}."}
            )
        return {"label": label.key}, label

    def process(self, *, question_id: int) -> int:
        return quality.quality_process_pending(question_id=question_id)

    def rebuild(self, *, question_id: int) -> Any:
        return quality.quality_rebuild(question_id=question_id)

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        return figures.derive(state, question, layout=layout)

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
        figures.publish_extras(
            derived,
            question=question,
            state=state,
            previous=previous,
            item_ids=item_ids,
            rebuild=rebuild,
            refresh=refresh,
        )
        gold_accuracy_publish(derived, question=question)

    def indicators_for(self, question: Question) -> tuple[Indicator, ...]:
        """The attention-check rule's floor is the study's attention floor."""
        return with_attention_floor(self.indicators, question=question)

    def intervals(self, question: Question) -> IntervalSet | None:
        """Kappa with others (analytic), mean AAD and alpha (item bootstrap) and Fleiss'
        kappa of the round-1 ratings (:func:`indicator_intervals_categorical`); ordered scales
        use scale positions and ordinal alpha. Pair kappas stay unweighted on every scale,
        so each interval is centred on the live figure it accompanies (``derive_categorical``
        computes unweighted kappa from the pair confusions). Test-retest kappa: the Wald
        interval of the state's own retest tables (:func:`retest_kappa_interval`, nan below
        ``QUALITY_MIN_REPEATS``). Dawid-Skene competence: an item bootstrap
        (:data:`figures.DS_BOOTSTRAP` replicates, each an EM refit to convergence warm-started from
        the full fit). Seconds per item: Student's t interval of the
        mean over the annotator's timed answers (:func:`quality.answer_seconds`), ``n`` in
        timed answers. Label skew: an item bootstrap of the round-1 label counts
        (:func:`label_skew_bootstrap`, biased upwards near 0). MACE trust, agreement with the
        others' consensus and copied answers: :func:`figures.crowd_figures` (the models that
        work in sparse crowd designs)."""
        state = QualityState.objects.filter(question=question).first()
        if state is None or not state.annotator_ids:
            return None
        _, matrix = question_ratings(
            question_id=question.pk,
            annotator_ids=state.annotator_ids,
            value_keys=state.value_keys,
        )
        config = quality_config().for_question(question.settings)
        users = get_user_model().objects.filter(pk__in=state.annotator_ids)
        found = figures.ratings_intervals(
            matrix,
            annotators=state.annotator_ids,
            scale=figures.label_scale(question, state.value_keys),
            min_overlap=config.min_overlap,
            seed=question.pk,
            names=dict(users.values_list("pk", "username")),
            min_items=config.evidence_needed("items"),
        )
        stats = figures.stored_stats(state)
        per_annotator = {
            **found.per_annotator,
            "retest_kappa": retest_kappa_interval(
                stats.retest, min_repeats=config.evidence_needed("repeats")
            ),
            figures.SECONDS_PER_ITEM.key: mean_t_interval(
                *quality.answer_seconds(question.pk, state.annotator_ids),
                n_groups=len(state.annotator_ids),
            ),
        }
        # flags beyond the indicator rules: an annotator who takes nearly every suggestion
        from apps.models_registry.selectors import anchoring_findings

        pairs = [*found.pairs, *anchoring_findings(question=question)]
        return dataclasses.replace(found, per_annotator=per_annotator, pairs=pairs)

    def dashboard_context(
        self, *, question: Question, snapshot: QualitySnapshot, names: list[str], plots: bool
    ) -> dict[str, Any]:
        context: dict[str, Any] = {
            "competence": True,
            "items": list(top_disagreements(question=question)),
        }
        if plots:
            context["histograms"] = aad_histograms(snapshot.matrices, names)
        return context


CATEGORICAL = CategoricalKind()
