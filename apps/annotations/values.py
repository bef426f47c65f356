"""How an answer is validated before it is stored: by its question's kind.

Each kind's :meth:`apps.studies.kinds.QuestionKind.clean_value` turns a raw answer into
``(stored value, label or None)``; ``assignment`` is the annotator's assignment being answered
(``None`` for a bulk import of a finished data set), so a kind can check that the answer
belongs to it. Kinds with ``queue = True`` (:func:`apps.studies.kinds.queue_kinds`) are
answered per item in the annotator's queue and decide when an assignment is complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.studies.kinds import question_kind
from apps.studies.models import Label, Question

if TYPE_CHECKING:
    from apps.annotations.models import Assignment


def clean_value(
    question: Question, value: Any, *, assignment: Assignment | None = None
) -> tuple[Any, Label | None]:
    """Validate ``value`` as an answer to ``question``; raise ``ValidationError`` if it is not."""
    return question_kind(question.kind).clean_value(question, value, assignment)
