"""Every write of the adjudication app: record an adjudication, set or remove an overlap rule."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.adjudication.models import Adjudication, OverlapRule
from apps.annotations.services import assignments_extend_disputed
from apps.items.models import Item
from apps.studies.access import ADJUDICATOR_ROLES, MANAGER_ROLE
from apps.studies.models import Question
from apps.studies.selectors import study_role
from core.types import Account


def _check_categorical(question: Question) -> None:
    if question.kind != Question.Kind.CATEGORICAL:
        raise ValidationError({"question": "Only categorical questions are adjudicated."})


@transaction.atomic
def adjudication_record(
    *,
    adjudicator: Account,
    question: Question,
    item: Item,
    label_key: str | None,
    note: str = "",
    suggestion: dict[str, Any] | None = None,
) -> Adjudication:
    """Settle one item of a categorical question: ``label_key`` is the final label, ``None``
    marks it genuinely ambiguous (``note`` then says why).

    Append-only: an earlier adjudication of the item stays; the new one is the latest.
    ``suggestion`` keeps the aggregate the adjudicator saw. Managers and reviewers only.
    """
    if study_role(user=adjudicator, study=question.study) not in ADJUDICATOR_ROLES:
        raise PermissionDenied("Only managers and reviewers of this study adjudicate.")
    _check_categorical(question)
    label = None
    if label_key is not None:
        label = question.labels.filter(key=label_key).first()
        if label is None:
            raise ValidationError({"label": f"{label_key!r} is not a label of this question."})
    adjudication = Adjudication(
        question=question,
        item=item,
        adjudicator=adjudicator,
        label=label,
        ambiguous=label is None,
        note=note.strip(),
        suggestion=suggestion or {},
    )
    adjudication.full_clean()
    adjudication.save()
    return adjudication


@transaction.atomic
def overlap_rule_set(
    *, manager: Account, question: Question, base_k: int, k_max: int, threshold: float
) -> OverlapRule:
    """Give a categorical question adaptive overlap (or change its rule). Managers only.

    Items already answered that the rule asks more of get their extra annotator at once."""
    if study_role(user=manager, study=question.study) not in MANAGER_ROLE:
        raise PermissionDenied("Only managers of this study change its overlap.")
    _check_categorical(question)
    rule = OverlapRule.objects.filter(question=question).first() or OverlapRule(question=question)
    rule.base_k, rule.k_max, rule.threshold = base_k, k_max, threshold
    rule.full_clean()
    rule.save()
    assignments_extend_disputed(question=question)
    return rule


@transaction.atomic
def overlap_rule_remove(*, manager: Account, question: Question) -> bool:
    """Return the question to fixed overlap; whether it had a rule. Managers only."""
    if study_role(user=manager, study=question.study) not in MANAGER_ROLE:
        raise PermissionDenied("Only managers of this study change its overlap.")
    deleted, _ = OverlapRule.objects.filter(question=question).delete()
    return bool(deleted)
