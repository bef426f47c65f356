"""The forms of the comparison page: one answer to the pair shown, and undo.

The rendered form carries a fresh idempotency key and a signed *ticket* naming the pair shown
and the moment it was shown, so the server knows which pair is answered and how long it took
without trusting hidden item fields or the browser's clock.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from apps.annotations.tickets import ticket_issue, ticket_read
from apps.preferences.models import (
    AUDIT_RATE_RANGE,
    KAPPA_FLOOR_RANGE,
    Judgement,
    PairwiseSettings,
    range_text,
)
from apps.preferences.scheduling import floor_rule
from core.forms import ServiceFormMixin

TICKET_SALT = "preferences.compare.ticket"


class JudgementForm(ServiceFormMixin, forms.Form):
    """Answer the pair named by the ticket: A, B or (weak preferences only) equal.

    ``cleaned_data`` gains ``item_a``, ``item_b`` (ids, as shown) and ``time_spent_ms``.
    """

    idempotency_key = forms.UUIDField(widget=forms.HiddenInput)
    ticket = forms.CharField(widget=forms.HiddenInput)
    outcome = forms.TypedChoiceField(
        choices=Judgement.Outcome.choices,
        coerce=int,
        error_messages={"required": "Choose A, B or equal."},
    )

    @classmethod
    def for_pair(cls, pair: tuple[int, int] | None) -> JudgementForm:
        """An unbound form for showing ``pair``: a new key, and a ticket signed now."""
        initial: dict[str, Any] = {"idempotency_key": uuid.uuid4()}
        if pair is not None:
            initial["ticket"] = ticket_issue({"a": pair[0], "b": pair[1]}, salt=TICKET_SALT)
        return cls(initial=initial)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        ticket = data.get("ticket")
        if ticket is None:
            return data
        shown, data["time_spent_ms"] = ticket_read(
            ticket,
            salt=TICKET_SALT,
            stale_message="This page is out of date; please answer the pair again.",
        )
        data["item_a"], data["item_b"] = shown["a"], shown["b"]
        return data


class UndoForm(ServiceFormMixin, forms.Form):
    """Undo the latest judgement; ``judgement`` names it, so that a resent form undoes one."""

    judgement = forms.IntegerField(widget=forms.HiddenInput, required=False)


PAIRWISE_DEFAULTS = PairwiseSettings()


class PairwiseSettingsForm(forms.Form):
    """A pairwise question's settings in the question editor, one field per setting of
    ``PairwiseSettings``; :func:`clean_pairwise_settings` checks them, and the help texts
    quote the ranges it checks against."""

    strict = forms.BooleanField(
        label="Strict preference",
        required=False,
        initial=PAIRWISE_DEFAULTS.strict,
        help_text='Annotators answer "A is better" or "B is better" only, with no "Equal".',
    )
    calibration_triplets = forms.IntegerField(
        initial=PAIRWISE_DEFAULTS.calibration_triplets,
        help_text="Triplets whose three pairs are asked first, to measure each annotator's "
        "transitivity: a whole number, 0 or more.",
    )
    audit_rate = forms.FloatField(
        initial=PAIRWISE_DEFAULTS.audit_rate,
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="Share of sort steps that ask a pair the earlier answers already imply, to "
        f"check them: a number in {range_text(AUDIT_RATE_RANGE)}.",
    )
    kappa_floor = forms.FloatField(
        label="Transitivity floor",
        initial=PAIRWISE_DEFAULTS.kappa_floor,
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text=f"{floor_rule()} The floor: a number in {range_text(KAPPA_FLOOR_RANGE)}.",
    )
    batch_size = forms.IntegerField(
        label="Batch size",
        initial=PAIRWISE_DEFAULTS.batch_size,
        help_text="Each annotator ranks this many of their items, batches overlapping between "
        "annotators and favouring the items least certain so far; the pooled ranking merges "
        "them. 0: every item; otherwise a whole number, 2 or more.",
    )
