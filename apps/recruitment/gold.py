"""Gold answers in an item import: the ``gold``, ``gold_reason`` and ``gold_use`` columns.

``gold`` is the known answer: a label key when the study has one categorical question, or a
JSON object from question key to answer: a label key (``{"sentiment": "positive", "topic":
"sport"}``) or, for a pairwise question, a calibration pair with its known order
(``{"better": {"versus": "<external id>", "outcome": 1}}``). ``gold_reason`` is shown in
training feedback ("the expected answer was ... because ..."). ``gold_use`` is ``check``
(default: a hidden attention check in the work) or ``training`` (answered with feedback
before the work). Labels are checked by the question's own validator
(:func:`apps.annotations.values.clean_value`) as the rows are read; a pair names another
item, perhaps one of a later line, so it is checked when the gold answers are stored, after
every item of the import, by the service the gold-answers API uses
(:func:`~apps.recruitment.services.gold_answer_set`); its problems carry the row's line
(:class:`GoldImportError`) and the whole import is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.core.exceptions import ValidationError

from apps.annotations.values import clean_value
from apps.studies.models import Question, Study

GOLD_COLUMNS = ("gold", "gold_reason", "gold_use")
USES = ("check", "training")
IMPORT_KINDS = (Question.Kind.CATEGORICAL, Question.Kind.PAIRWISE)


class GoldSpec(NamedTuple):
    """One gold answer of an imported row (a label validated; a pair as given, checked when
    stored) and the row's ``line``."""

    question: Question
    value: Any
    reason: str
    use: str
    line: int = 0


class GoldImportError(ValidationError):
    """Gold answers of an import refused when stored: ``rows`` lists (line, message)."""

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        self.rows = rows
        super().__init__([f"line {line}: {message}" for line, message in rows])


def gold_questions(*, study: Study) -> list[Question]:
    """The questions a gold column may answer (categorical, pairwise), labels prefetched."""
    return list(
        study.questions.filter(kind__in=IMPORT_KINDS)
        .order_by("position", "id")
        .prefetch_related("labels")
    )


def gold_read(
    data: Mapping[str, Any], *, questions: list[Question], line: int = 0
) -> list[GoldSpec]:
    """The gold answers of one import row (none without a ``gold`` value), at ``line``.

    Raises ``ValidationError`` with one message per problem.
    """
    raw = data.get("gold")
    reason, use = data.get("gold_reason") or "", data.get("gold_use") or "check"
    if raw in (None, ""):
        if reason or data.get("gold_use"):
            raise ValidationError("gold_reason and gold_use need a gold answer.")
        return []
    if not isinstance(reason, str):
        raise ValidationError("gold_reason must be text.")
    if use not in USES:
        raise ValidationError(f"gold_use must be {' or '.join(USES)}, not {use!r}.")
    answers = _answers_by_key(raw, questions=questions)
    by_key = {question.key: question for question in questions}
    specs, errors = [], []
    for key, answer in answers.items():
        question = by_key.get(key)
        if question is None:
            errors.append(f"{key!r} is not a categorical or pairwise question of this study.")
            continue
        if question.kind == Question.Kind.PAIRWISE:
            specs.append(GoldSpec(question, answer, reason.strip(), use, line))
            continue  # it may name an item of a later line: checked when stored
        try:
            value, _ = clean_value(question, answer)
        except ValidationError as exc:
            errors += exc.messages
            continue
        specs.append(GoldSpec(question, value, reason.strip(), use, line))
    if errors:
        raise ValidationError(errors)
    return specs


def _answers_by_key(raw: Any, *, questions: list[Question]) -> dict[str, Any]:
    """``{question key: answer}`` from a label key (one question) or a JSON object."""
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"gold is not valid JSON: {exc.msg}.") from None
    if isinstance(raw, dict):
        return raw
    categorical = [q for q in questions if q.kind == Question.Kind.CATEGORICAL]
    if len(categorical) != 1:
        raise ValidationError(
            'With several (or no) categorical questions, give gold as {"question": "label"}.'
        )
    return {categorical[0].key: raw}
