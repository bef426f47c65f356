"""The model arena's settings and answer format (its answers are ``Annotation`` revisions).

An arena item is a prompt (the item's text) with two or more model responses in its metadata,
``{"responses": {model name: response text}}``. An annotator's answer to one prompt is an
:class:`~apps.annotations.models.Annotation` whose revisions are append-only: each vote on a
pair of that prompt's responses appends a revision whose value is every vote so far,
``{"votes": [{"model_a": ..., "model_b": ..., "outcome": 1 | 0 | -1}, ...]}`` (``model_a``
shown as A, on the left; outcome 1: A is better, -1: B is better, 0: a tie). So the regular
answer export holds the arena's votes, and the history export each vote as it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.core.exceptions import ValidationError

from apps.studies.kinds import own_settings

RESPONSES = "responses"  # the item metadata key of the model responses
VOTES = "votes"  # the answer value's key of the vote list
OUTCOMES = (1, 0, -1)
SAMPLINGS = ("active", "uniform")
MAX_MODEL_NAME = 200


@dataclass(frozen=True)
class ArenaSettings:
    """The settings of an arena question, with their defaults.

    Attributes
    ----------
    sampling : {"active", "uniform"}
        How the next pair of models is chosen: ``active`` where the pooled ranking is least
        certain (:func:`analytics.metrics.arena.next_model_pair`), ``uniform`` a pair at random
        (for comparison).
    top : int
        0: settle the whole ranking; k > 0: only the first k places (``top`` of
        :func:`~analytics.metrics.arena.next_model_pair`; 1: which model is best).
    budget : int
        Votes asked of each annotator (0: every pair of responses to every prompt they have).
    """

    sampling: str = "active"
    top: int = 0
    budget: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _whole(value: Any, *, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def clean_arena_settings(raw: Any) -> ArenaSettings:
    """Validate an arena question's ``settings`` and fill in the defaults.

    Raises
    ------
    django.core.exceptions.ValidationError
        Field errors keyed by setting name; unknown keys are refused.
    """
    if not isinstance(raw or {}, dict):
        raise ValidationError({"settings": "Arena settings must be an object."})
    raw = own_settings(raw)
    fields = ArenaSettings.__dataclass_fields__
    errors: dict[str, str] = {}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        errors["settings"] = f"Unknown arena settings: {', '.join(unknown)}."
    values = {name: raw.get(name, field.default) for name, field in fields.items()}
    if values["sampling"] not in SAMPLINGS:
        errors["sampling"] = f"Give one of: {', '.join(SAMPLINGS)}."
    if not _whole(values["top"], low=0):
        errors["top"] = "Give a whole number of places, 0 or more (0: the whole ranking)."
    if not _whole(values["budget"], low=0):
        errors["budget"] = "Give a whole number of votes, 0 or more (0: every pair)."
    if errors:
        raise ValidationError(errors)
    return ArenaSettings(**values)


def item_responses(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """The model responses of an item (model name -> text), those with a non-empty text only;
    ``{}`` when ``metadata["responses"]`` is not an object."""
    found = (metadata or {}).get(RESPONSES)
    if not isinstance(found, dict):
        return {}
    return {
        str(model): text
        for model, text in found.items()
        if isinstance(text, str) and text.strip() and 0 < len(str(model)) <= MAX_MODEL_NAME
    }


def response_problem(metadata: Mapping[str, Any] | None) -> str:
    """What is wrong with an item as an arena prompt ("" if nothing): fewer than two usable
    responses, or responses that are not an object of texts."""
    found = (metadata or {}).get(RESPONSES)
    if found is None:
        return (
            'An arena prompt needs at least two model responses: metadata "responses" '
            "{model name: response text} is missing."
        )
    if not isinstance(found, dict):
        return 'metadata "responses" must be an object {model name: response text}.'
    usable = item_responses(metadata)
    if len(usable) < 2:
        return (
            "An arena prompt needs at least two model responses with text; "
            f'metadata "responses" has {len(usable)}.'
        )
    return ""


def clean_votes(value: Any, *, responses: Mapping[str, str]) -> list[dict[str, Any]]:
    """Validate an arena answer ``{"votes": [...]}`` against the prompt's ``responses``;
    return the votes (``model_a``, ``model_b``, ``outcome``), or raise ``ValidationError``.

    Each vote names two different models of the prompt and an outcome in {1, 0, -1}; a pair
    of models appears at most once (in either order)."""
    votes = value.get(VOTES) if isinstance(value, dict) else None
    if not isinstance(votes, list) or not votes:
        raise ValidationError({"value": 'Give {"votes": [{"model_a", "model_b", "outcome"}]}.'})
    cleaned: list[dict[str, Any]] = []
    seen: set[frozenset[str]] = set()
    for k, vote in enumerate(votes, start=1):
        if not isinstance(vote, dict) or set(vote) != {"model_a", "model_b", "outcome"}:
            raise ValidationError(
                {"value": f"Vote {k}: give exactly model_a, model_b and outcome."}
            )
        a, b, outcome = vote["model_a"], vote["model_b"], vote["outcome"]
        if a not in responses or b not in responses:
            raise ValidationError(
                {"value": f"Vote {k}: both models must have a response to this prompt."}
            )
        if a == b:
            raise ValidationError({"value": f"Vote {k}: give two different models."})
        if isinstance(outcome, bool) or outcome not in OUTCOMES:
            raise ValidationError(
                {"value": f"Vote {k}: outcome is 1 (A is better), 0 (a tie) or -1 (B is better)."}
            )
        pair = frozenset((a, b))
        if pair in seen:
            raise ValidationError({"value": f"Vote {k}: this pair of responses was judged before."})
        seen.add(pair)
        cleaned.append({"model_a": a, "model_b": b, "outcome": int(outcome)})
    return cleaned
