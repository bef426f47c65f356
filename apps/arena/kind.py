"""The model-arena question kind: which of two models' responses to a prompt is better.

Registered once in ``settings.QUESTION_KINDS`` as ``apps.arena.kind.ARENA``. Items are prompts
with their model responses (:mod:`apps.arena.models`); annotators vote on the arena page
(:mod:`apps.arena.views`), the next pair chosen by active sampling
(:func:`apps.arena.selectors.arena_state`); managers read the ranking on the results page.
The votes are ``Annotation`` revisions, so the study's answer export holds them; the arena
keeps no per-annotator dashboard figures of its own (the annotators' weights come from the
study's pairwise questions, :func:`apps.arena.selectors.arena_weights`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from analytics.indicators import Derived, Json
from analytics.models import QualityState
from apps.annotations.models import Annotation, Assignment
from apps.arena.exporting import arena_preference_rows
from apps.arena.forms import ArenaSettingsForm
from apps.arena.models import clean_arena_settings, clean_votes, item_responses, response_problem
from apps.arena.selectors import KIND, arena_progress, votes_of
from apps.items.models import Item
from apps.studies.kinds import QuestionKind
from apps.studies.models import Label, Question
from apps.studies.selectors import question_items
from core.types import Account


class ArenaKind(QuestionKind):
    """Votes on pairs of model responses, on the arena page (not in the item queue)."""

    key = KIND
    label = Question.Kind.ARENA.label
    count = ""
    agreement = ""
    answers_label = "Votes"
    overlap_unit = None
    export_functions = {"preferences": arena_preference_rows}
    settings_form = ArenaSettingsForm
    preview_template = "arena/preview.html"

    def clean_settings(self, raw: Any) -> dict[str, Any]:
        return clean_arena_settings(raw).as_dict()

    def clean_value(
        self, question: Question, value: Any, assignment: Assignment | None
    ) -> tuple[dict[str, Any], Label | None]:
        """``{"votes": [...]}`` on the prompt's responses; for an annotator's assignment, the
        votes stored so far plus exactly one new vote (votes are appended, never rewritten:
        :func:`apps.arena.services.arena_vote_record`)."""
        if assignment is None:
            raise ValidationError(
                {"value": "Arena votes are made on the arena page or its API, not imported."}
            )
        votes = clean_votes(value, responses=item_responses(assignment.item.metadata))
        stored = (
            Annotation.objects.filter(
                question=question,
                item_id=assignment.item_id,
                annotator_id=assignment.annotator_id,
                round=assignment.round,
            )
            .values_list("current_revision__value", flat=True)
            .first()
        )
        if votes[:-1] != votes_of(stored):
            raise ValidationError(
                {"value": "Add one vote to the votes stored so far (votes are never rewritten)."}
            )
        return {"votes": votes}, None

    def item_problems(self, question: Question, item: Item) -> dict[str, str]:
        problem = response_problem(item.metadata)
        return {"metadata": f"Question {question.key!r}: {problem}"} if problem else {}

    def scope_problem(self, question: Question) -> str:
        metadata = question_items(question).values_list("metadata", flat=True)
        total = short = 0
        for found in metadata.iterator(chunk_size=2000):
            total += 1
            short += bool(response_problem(found))
        if not short:
            return ""
        return (
            f"{short} of its {total} prompts have fewer than two model responses (item "
            'metadata "responses": {model name: text}); they are never shown.'
        )

    def progress(self, *, question: Question, annotator: Account) -> dict[str, int]:
        return arena_progress(question=question, annotator=annotator)

    @transaction.atomic
    def process(self, *, question_id: int) -> int:
        """Mark the new votes seen: the arena keeps no per-annotator quality state (its
        ranking is fitted on the results page, from every current vote)."""
        return Annotation.objects.filter(question_id=question_id, analysis_pending=True).update(
            analysed_revision=F("current_revision"), analysis_pending=False
        )

    def rebuild(self, *, question_id: int) -> Any:
        return self.process(question_id=question_id)

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        """No per-annotator figures: an empty set (the dashboard says nobody has answered)."""
        return Derived(
            annotators=[], indicators={}, evidence={}, study={"n_ratings": 0, "n_annotators": 0}
        )


ARENA = ArenaKind()
