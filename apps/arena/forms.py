"""The forms of the arena page (one vote on the pair shown) and of an arena question's
settings in the question editor."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from apps.annotations.tickets import ticket_issue, ticket_read
from apps.arena.models import SAMPLINGS, ArenaSettings
from core.forms import ServiceFormMixin

TICKET_SALT = "arena.vote.ticket"
ARENA_DEFAULTS = ArenaSettings()


class VoteForm(ServiceFormMixin, forms.Form):
    """Vote on the pair named by the signed ticket (prompt, model shown as A, model shown as B,
    and when it was shown): A better, a tie or B better.

    ``cleaned_data`` gains ``item_id``, ``model_a``, ``model_b`` and ``time_spent_ms``.
    """

    idempotency_key = forms.UUIDField(widget=forms.HiddenInput)
    ticket = forms.CharField(widget=forms.HiddenInput)
    outcome = forms.TypedChoiceField(
        choices=[(1, "A is better"), (0, "Tie"), (-1, "B is better")],
        coerce=int,
        error_messages={"required": "Choose A, B or a tie."},
    )

    @classmethod
    def for_task(cls, item_id: int | None, model_a: str = "", model_b: str = "") -> VoteForm:
        """An unbound form for showing one pair: a new key, and a ticket signed now."""
        initial: dict[str, Any] = {"idempotency_key": uuid.uuid4()}
        if item_id is not None:
            initial["ticket"] = ticket_issue(
                {"item": item_id, "a": model_a, "b": model_b}, salt=TICKET_SALT
            )
        return cls(initial=initial)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        ticket = data.get("ticket")
        if ticket is None:
            return data
        shown, data["time_spent_ms"] = ticket_read(
            ticket,
            salt=TICKET_SALT,
            stale_message="This page is out of date; please judge the pair again.",
        )
        data["item_id"], data["model_a"], data["model_b"] = shown["item"], shown["a"], shown["b"]
        return data


class ArenaSettingsForm(forms.Form):
    """An arena question's settings in the question editor, one field per setting of
    :class:`~apps.arena.models.ArenaSettings` (:func:`~apps.arena.models.clean_arena_settings`
    checks them)."""

    sampling = forms.ChoiceField(
        choices=[(name, name) for name in SAMPLINGS],
        initial=ARENA_DEFAULTS.sampling,
        help_text="active: the next pair is the one whose vote most settles the least certain "
        "order of the ranking; uniform: a pair at random (for comparison).",
    )
    top = forms.IntegerField(
        label="Places to settle",
        initial=ARENA_DEFAULTS.top,
        help_text="Active sampling settles the first this many places of the ranking (1: which "
        "model is best); 0: the whole ranking. A whole number, 0 or more.",
    )
    budget = forms.IntegerField(
        label="Votes per annotator",
        initial=ARENA_DEFAULTS.budget,
        help_text="Votes asked of each annotator; 0: every pair of responses to every prompt "
        "assigned to them. A whole number, 0 or more.",
    )
