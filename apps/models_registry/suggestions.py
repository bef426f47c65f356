"""A model's suggestion on the annotator's queue page, with a held-out share (issue 28).

A categorical question may name a registered :class:`~apps.models_registry.models.ModelRun`
of its own in ``settings["suggestion_run"]``. For every (annotator, item) a keyed hash decides,
reproducibly and without being guessable from the item, whether the page shows the run's
label ("Model suggests: X") or holds it back (a share ``settings["suggestion_held_out"]``,
20 % by default). What the page did is signed into the item's ticket and recorded with the
answer (:class:`~apps.models_registry.models.Suggestion`), so the anchoring effect
(:mod:`analytics.metrics.anchoring`) compares answers with and without the suggestion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import IntegerField, Value
from django.utils.crypto import salted_hmac

from analytics.indicators import CardFigure
from apps.models_registry.models import ItemPrediction, ModelRun, Prediction
from apps.studies.models import Label, Question

RUN = "suggestion_run"
HELD_OUT = "suggestion_held_out"
#: The share of (annotator, item) pairs shown without the suggestion, unless set.
DEFAULT_HELD_OUT = 0.2
#: The held-out share's range: some items must show the suggestion, and some must not.
HELD_OUT_RANGE = (0.05, 0.95)
_SALT = "apps.models_registry.suggestions.held_out"


def clean_suggestion_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the suggestion settings of a categorical question (shape and range only;
    :func:`suggestion_run_problem` checks the run against the question).

    Returns ``{}`` without a run (nothing is suggested), else the run id and the held-out share
    (default :data:`DEFAULT_HELD_OUT`).
    """
    run, held_out = raw.get(RUN), raw.get(HELD_OUT)
    if run in (None, ""):
        if held_out not in (None, "", DEFAULT_HELD_OUT):
            raise ValidationError({HELD_OUT: "A held-out share needs a model run to suggest."})
        return {}
    if isinstance(run, bool) or not isinstance(run, int) or run < 1:
        raise ValidationError({RUN: "Give the id of a model run registered for this question."})
    if held_out in (None, ""):
        held_out = DEFAULT_HELD_OUT
    low, high = HELD_OUT_RANGE
    if isinstance(held_out, bool) or not isinstance(held_out, int | float):
        raise ValidationError({HELD_OUT: "The held-out share is a number, e.g. 0.2."})
    if not low <= float(held_out) <= high:
        raise ValidationError(
            {HELD_OUT: f"The held-out share must lie between {low:g} and {high:g}."}
        )
    return {RUN: run, HELD_OUT: float(held_out)}


def suggestion_run_problem(question: Question) -> str:
    """Why the question cannot suggest from the run its settings name ("" if it can)."""
    run_id = (question.settings or {}).get(RUN)
    if run_id is None:
        return ""
    run = ModelRun.objects.filter(pk=run_id).only("question_id").first()
    if run is None or run.question_id != question.pk:
        return f"Model run {run_id} is not registered for this question."
    return ""


class SuggestionSettingsForm(forms.Form):
    """A categorical question's suggestion settings in the question editor."""

    suggestion_run = forms.IntegerField(
        label="Suggest from model run",
        required=False,
        min_value=1,
        help_text="Id of a model run registered for this question, or of the run its model "
        "endpoint fills (the model registry page names both); empty: no suggestion.",
    )
    suggestion_held_out = forms.FloatField(
        label="Held-out share",
        required=False,
        initial=DEFAULT_HELD_OUT,
        min_value=HELD_OUT_RANGE[0],
        max_value=HELD_OUT_RANGE[1],
        help_text=f"Share of each annotator's items shown without the suggestion, drawn at "
        f"random, to measure its effect ({HELD_OUT_RANGE[0]:g} to {HELD_OUT_RANGE[1]:g}; "
        f"default {DEFAULT_HELD_OUT:g}).",
    )


def suggestion_drawn(*, question_id: int, item_id: int, annotator_id: int, held_out: float) -> bool:
    """Whether the page shows the suggestion to this annotator for this item.

    ``u = HMAC-SHA256(SECRET_KEY, "question:item:annotator")`` read as a number in [0, 1);
    shown when ``u >= held_out``. Reproducible (the same pair always gets the same draw),
    independent across annotators and items, and not guessable without the secret key.
    """
    digest = salted_hmac(
        _SALT, f"{question_id}:{item_id}:{annotator_id}", algorithm="sha256"
    ).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 >= held_out


def _pad(*, question_id: int, item_id: int, annotator_id: int) -> int:
    """A 48-bit keyed mask of the (question, item, annotator) cell."""
    digest = salted_hmac(
        _SALT + ".label", f"{question_id}:{item_id}:{annotator_id}", algorithm="sha256"
    ).digest()
    return int.from_bytes(digest[:6], "big")


def label_seal(*, question_id: int, item_id: int, annotator_id: int, label_id: int) -> int:
    """The label id as the item's ticket carries it: XOR-ed with a keyed mask of the cell.

    The ticket is signed, not encrypted (its payload is base64 JSON in the page): a held-out
    item's ticket must not tell the annotator the label withheld. The same call unseals.
    """
    pad = _pad(question_id=question_id, item_id=item_id, annotator_id=annotator_id)
    return label_id ^ pad


@dataclass(frozen=True)
class QueueSuggestion:
    """The run's label for the item, whether the page shows it, and the label as sealed for
    the ticket (:func:`label_seal`)."""

    run_id: int
    label: Label
    shown: bool
    sealed: int

    def ticket(self) -> list[int]:
        """``[run, sealed label, shown]`` as signed into the item's ticket."""
        return [self.run_id, self.sealed, int(self.shown)]


def ticket_suggestions(
    raw: Mapping[str, Sequence[int]], *, item_id: int, annotator_id: int
) -> dict[int, tuple[int, int, bool]]:
    """What a ticket says the page did (question id -> ``(run, label, shown)``), its labels
    unsealed."""
    return {
        int(pk): (
            int(run_id),
            label_seal(
                question_id=int(pk),
                item_id=item_id,
                annotator_id=annotator_id,
                label_id=int(sealed),
            ),
            bool(shown),
        )
        for pk, (run_id, sealed, shown) in raw.items()
    }


def _suggested_label(rows: Sequence[tuple[int | None, int]], annotator_id: int) -> int:
    """The run's prediction for this annotator; else its label for the item as a whole (an
    :class:`ItemPrediction`, annotator ``None`` in ``rows``); else the label it predicts most
    often for the item (ties: the lowest label id)."""
    own = [label for who, label in rows if who == annotator_id]
    if own:
        return own[0]
    general = [label for who, label in rows if who is None]
    if general:
        return general[0]
    counts = Counter(label for _, label in rows)
    return min(counts, key=lambda label: (-counts[label], label))


def queue_suggestions(
    *, questions: Iterable[Any], item_id: int, annotator_id: int
) -> dict[int, QueueSuggestion]:
    """The suggestion of each question that has one for this item (question id -> it).

    ``questions`` are the page's :class:`~apps.annotations.forms.QueueQuestion` entries (their
    labels loaded). No query unless a question suggests; then one for all of them (the runs'
    per-annotator and per-item predictions together).
    """
    entries = {
        entry.question.pk: entry
        for entry in questions
        if (entry.question.settings or {}).get(RUN) is not None
    }
    if not entries:
        return {}
    runs = {entry.question.settings[RUN]: pk for pk, entry in entries.items()}
    rows: dict[int, list[tuple[int | None, int]]] = {}
    mine = {"run_id__in": list(runs), "run__question_id__in": list(entries), "item_id": item_id}
    predictions = Prediction.objects.filter(**mine).values_list(
        "run_id", "annotator_id", "label_id"
    )
    general = ItemPrediction.objects.filter(**mine).values_list(
        "run_id", Value(None, output_field=IntegerField()), "label_id"
    )
    for run_id, who, label_id in predictions.order_by().union(general.order_by(), all=True):
        rows.setdefault(run_id, []).append((who, label_id))
    found = {}
    for run_id, run_rows in rows.items():
        entry = entries[runs[run_id]]
        labels = {label.pk: label for label in entry.labels}
        label = labels.get(_suggested_label(run_rows, annotator_id))
        if label is None:
            continue
        shown = suggestion_drawn(
            question_id=entry.question.pk,
            item_id=item_id,
            annotator_id=annotator_id,
            held_out=entry.question.settings.get(HELD_OUT, DEFAULT_HELD_OUT),
        )
        found[entry.question.pk] = QueueSuggestion(
            run_id=run_id,
            label=label,
            shown=shown,
            sealed=label_seal(
                question_id=entry.question.pk,
                item_id=item_id,
                annotator_id=annotator_id,
                label_id=label.pk,
            ),
        )
    return found


#: The heading of the dashboard card (apps/categorical/templates/categorical/anchoring.html).
CARD = "Model suggestions"
#: The acceptance rate above which (its whole interval) an annotator who also spends less time
#: with the suggestion than without is flagged.
ACCEPTANCE_FLOOR = 0.9
#: The flag key of that annotator among the question's flags (beside the indicators' keys).
SUGGESTION_ACCEPTANCE = "suggestion_acceptance"
#: The figures of the card, each with its plain explanation (the card's legend, the guide).
ANCHORING_FIGURES = (
    CardFigure(
        CARD,
        "Agreement with the model, shown",
        explanation="Share of the answers given with the model's suggestion on the page that "
        "equal the model's label.",
    ),
    CardFigure(
        CARD,
        "Agreement with the model, held out",
        explanation="The same share on the items held out for this annotator (drawn at "
        "random, no suggestion shown): how often they reach the model's label on their own.",
    ),
    CardFigure(
        CARD,
        "Anchoring effect",
        direction="lower",
        explanation="Agreement shown minus agreement held out, with its 95 % interval "
        "(Newcombe's score interval per annotator; for the whole question, a bootstrap over "
        "items). Above 0: the suggestion pulls answers towards the model's label; an "
        "interval that holds 0 shows no measurable pull.",
    ),
    CardFigure(
        CARD,
        "Acceptance rate",
        explanation="Share of the suggestions shown that the annotator answered with "
        f"(Wilson 95 % interval). A flag needs the whole interval above {ACCEPTANCE_FLOOR:g} "
        "and less time per item with the suggestion than without: taking nearly every "
        "suggestion, faster, may mean not looking at the item.",
    ),
    CardFigure(
        CARD,
        "Time with / without",
        explanation="Median seconds per item with the suggestion shown and held out.",
    ),
    CardFigure(
        CARD,
        "Agreement among annotators, held out only",
        direction="higher",
        explanation="Krippendorff's alpha among the annotators computed on the held-out "
        "answers only (items with two or more), beside the same on the shown answers: "
        "agreement that a shared suggestion cannot inflate. Each item is held out for a "
        "random share of its annotators, so it rests on fewer items.",
    ),
)
