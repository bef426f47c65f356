"""Writes of the model arena: one vote on a pair of responses to a prompt."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.annotations.models import Annotation, Revision
from apps.annotations.selectors import assignments_to_answer
from apps.annotations.services import annotations_submit, assignment_check_annotator
from apps.arena.models import OUTCOMES, VOTES, clean_arena_settings, item_responses
from apps.arena.selectors import KIND, question_votes, votes_of
from apps.studies.models import Question
from apps.studies.selectors import question_covers
from core.limits import time_spent_check
from core.locking import locked_get_or_create
from core.types import Account


def arena_vote_record(
    *,
    question: Question,
    annotator: Account,
    item_id: int,
    model_a: str,
    model_b: str,
    outcome: int,
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None = None,
    source: str = Revision.Source.UI,
) -> tuple[Revision, bool]:
    """Record the annotator's vote on two models' responses to one prompt.

    Parameters
    ----------
    question, annotator
        An arena question and one of its study's annotators, the prompt assigned to them.
    item_id : int
        The prompt (an item the question asks about).
    model_a, model_b : str
        The models shown as A (left) and B (right); two of the prompt's responses.
    outcome : {1, 0, -1}
        1: A is better, -1: B is better, 0: a tie.
    idempotency_key : uuid.UUID
        Made by the client once per vote: resending it returns the first revision.

    Returns
    -------
    revision : Revision
        The revision holding the annotator's votes on this prompt, this one last.
    created : bool
        False for a replay of an earlier key (nothing new stored).

    Raises
    ------
    ValidationError
        An unknown model, the same model twice, an outcome outside {1, 0, -1}, a pair this
        annotator already judged on this prompt, a vote beyond the question's ``budget``, a
        key reused for another vote, a prompt the question does not ask about, a closed
        study.
    PermissionDenied
        A prompt not assigned to the annotator, or anyone but the study's annotators.

    Notes
    -----
    The vote is appended as a new revision of the annotator's answer to the prompt (the
    value: every vote so far, :mod:`apps.arena.models`) through
    :func:`~apps.annotations.services.annotations_submit`, with the answer's row locked first,
    so two votes on one prompt never overwrite each other.
    """
    if question.kind != KIND:
        raise ValidationError({"question": "Not an arena question."})
    if isinstance(outcome, bool) or outcome not in OUTCOMES:
        raise ValidationError({"outcome": "Give 1 (A is better), 0 (a tie) or -1 (B is better)."})
    assignment = (
        assignments_to_answer()
        .filter(study_id=question.study_id, annotator=annotator, item_id=item_id, round=1)
        .first()
    )
    if assignment is None:
        raise PermissionDenied("This prompt is not assigned to you.")
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if not question_covers(question, assignment.item):
        raise ValidationError({"item": "This question does not ask about this prompt."})
    responses = item_responses(assignment.item.metadata)
    for name, model in (("model_a", model_a), ("model_b", model_b)):
        if model not in responses:
            raise ValidationError({name: f"No response of {model!r} to this prompt."})
    if model_a == model_b:
        raise ValidationError({"model_b": "Give two different models."})
    time_spent_check(time_spent_ms)
    vote: dict[str, Any] = {"model_a": model_a, "model_b": model_b, "outcome": int(outcome)}
    with transaction.atomic():
        annotation = locked_get_or_create(
            Annotation, question=question, item_id=item_id, annotator=annotator, round=1
        )
        replay = Revision.objects.filter(
            annotation=annotation, idempotency_key=idempotency_key
        ).first()
        if replay is not None:
            if votes_of(replay.value)[-1:] != [vote]:
                raise ValidationError(
                    {"idempotency_key": "This key was already used for a different vote."}
                )
            return replay, False
        budget = clean_arena_settings(question.settings).budget
        if budget and len(question_votes(question=question, annotator=annotator)) >= budget:
            raise ValidationError({"outcome": f"You have made the {budget} votes asked of you."})
        current = annotation.current_revision
        earlier = votes_of(current.value) if current else []
        if any({v["model_a"], v["model_b"]} == {model_a, model_b} for v in earlier):
            raise ValidationError(
                {"model_b": "You have already judged this pair of responses to this prompt."}
            )
        (revision,), created = annotations_submit(
            annotator=annotator,
            assignment=assignment,
            answers={question: {VOTES: [*earlier, vote]}},
            idempotency_key=idempotency_key,
            time_spent_ms=time_spent_ms,
            source=source,
        )
    return revision, created
