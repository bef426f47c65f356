"""How each question kind's answer is validated before it is stored.

Each kind registers a cleaner ``(question, raw value, assignment) -> (stored value, label or
None)``; ``assignment`` is the annotator's assignment being answered (``None`` for a bulk import
of a finished data set), so a cleaner can check that the answer belongs to it. The continuous
kind adds its cleaner in its own app. Kinds listed in ``QUEUE_KINDS`` are
answered per item in the annotator's queue and decide when an assignment is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from apps.studies.models import Label, Question

if TYPE_CHECKING:
    from apps.annotations.models import Assignment

Cleaner = Callable[[Question, Any, "Assignment | None"], tuple[Any, Label | None]]


def clean_categorical(
    question: Question, value: Any, assignment: Assignment | None = None
) -> tuple[dict[str, str], Label]:
    """Accept ``"key"`` or ``{"label": "key"}``; the key must be one of the question's labels."""
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


VALUE_CLEANERS: dict[str, Cleaner] = {Question.Kind.CATEGORICAL: clean_categorical}
QUEUE_KINDS: set[str] = {Question.Kind.CATEGORICAL}


def clean_value(
    question: Question, value: Any, *, assignment: Assignment | None = None
) -> tuple[Any, Label | None]:
    """Validate ``value`` as an answer to ``question``; raise ``ValidationError`` if it is not."""
    cleaner = VALUE_CLEANERS.get(question.kind)
    if cleaner is None:
        raise ValidationError(
            {"question": f"{question.get_kind_display()} questions are not answered this way."}
        )
    return cleaner(question, value, assignment)
