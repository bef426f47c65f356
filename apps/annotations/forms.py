"""Forms of the annotator queue.

Every rendered item form carries a fresh idempotency key and a signed *ticket* naming the
assignment shown and the moment it was shown. The ticket lets the server compute the time spent
on the item without trusting the browser's clock, and a repeated key (double click, retry, a
second tab) makes the services return the first submission instead of storing another.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError

from apps.annotations.models import Assignment
from apps.annotations.selectors import AnswerShown, assignment_to_answer
from apps.annotations.tickets import ticket_issue, ticket_read
from apps.items.models import Item
from apps.models_registry.suggestions import (
    QueueSuggestion,
    queue_suggestions,
    ticket_suggestions,
)
from apps.studies.kinds import queue_kinds
from apps.studies.models import Label, Question, Study
from apps.studies.selectors import covering_questions, study_questions_cached
from core.forms import ServiceFormMixin

TICKET_SALT = "annotations.queue.ticket"


@dataclass(frozen=True)
class QueueQuestion:
    """A question as the queue renders it: its form field name, its labels in order and
    the model's suggestion for the item shown, if the question has one."""

    question: Question
    field_name: str
    labels: list[Label]
    suggestion: QueueSuggestion | None = None


def queue_questions(*, study: Study) -> list[QueueQuestion]:
    """The study's questions answered in the queue, with their labels and their
    adaptive-overlap rule, which the submit reads (:func:`~apps.studies.selectors.
    study_questions_cached`: no query when cached; ``study`` read in this request)."""
    kinds = set(queue_kinds())
    return [
        QueueQuestion(question=q, field_name=f"q{q.pk}", labels=list(q.labels.all()))
        for q in study_questions_cached(study=study)
        if q.kind in kinds
    ]


class AnswerForm(ServiceFormMixin, forms.Form):
    """Answer (or skip) the item named by the ticket; one choice field per queue question.

    With a single question each label is a submit button; with several they are radio groups
    answered together. ``cleaned_data`` gains ``assignment``, ``answers`` (question -> label key)
    and ``time_spent_ms``.
    """

    ANSWER, SKIP = "answer", "skip"

    idempotency_key = forms.UUIDField(widget=forms.HiddenInput)
    ticket = forms.CharField(widget=forms.HiddenInput)
    action = forms.ChoiceField(choices=[(ANSWER, "Answer"), (SKIP, "Skip")], required=False)

    def __init__(
        self,
        *args: Any,
        study: Study,
        annotator: AbstractBaseUser,
        questions: list[QueueQuestion] | None = None,
        **kwargs: Any,
    ) -> None:
        """``questions``: the study's :func:`queue_questions`, if the caller has them already."""
        super().__init__(*args, **kwargs)
        self.study = study
        self.annotator = annotator
        self.questions = queue_questions(study=study) if questions is None else questions
        for entry in self.questions:
            self.fields[entry.field_name] = forms.ChoiceField(
                label=entry.question.prompt,
                choices=[(label.key, label.name) for label in entry.labels],
                required=False,
            )

    @classmethod
    def for_assignment(
        cls,
        *,
        study: Study,
        annotator: AbstractBaseUser,
        assignment: Assignment | None,
        questions: list[QueueQuestion] | None = None,
    ) -> AnswerForm:
        """A fresh, unbound form for showing ``assignment``: new key, ticket signed now."""
        form = cls(
            study=study,
            annotator=annotator,
            questions=questions,
            initial={"idempotency_key": uuid.uuid4()},
        )
        if assignment is None:
            return form.ask_about(None)
        form.ask_about(assignment.item)
        # a model's suggestion (or its held-out draw), signed into the ticket so the answer
        # records what this page showed
        found = queue_suggestions(
            questions=form.questions, item_id=assignment.item_id, annotator_id=annotator.pk
        )
        form.questions = [
            dataclasses.replace(entry, suggestion=found.get(entry.question.pk))
            for entry in form.questions
        ]
        shown: dict[str, Any] = {"assignment": assignment.pk}
        if found:
            shown["suggested"] = {str(pk): s.ticket() for pk, s in found.items()}
        form.initial["ticket"] = ticket_issue(shown, salt=TICKET_SALT)
        return form

    def ask_about(self, item: Item | None) -> AnswerForm:
        """Keep only the questions that apply to ``item`` (their scope covers it): the page
        asks those, and an answer is complete when each of them has one."""
        if item is not None:
            keep = {q.pk for q in covering_questions([e.question for e in self.questions], item)}
            for entry in self.questions:
                if entry.question.pk not in keep:
                    self.fields.pop(entry.field_name, None)
            self.questions = [entry for entry in self.questions if entry.question.pk in keep]
        return self

    @property
    def single_question(self) -> bool:
        """One question: each label button submits at once."""
        return len(self.questions) == 1

    def clean(self) -> dict[str, Any]:
        """Resolve the ticket to the annotator's assignment and time the answer from it."""
        data = super().clean()
        ticket = data.get("ticket")
        if ticket is None:
            return data
        shown, data["time_spent_ms"] = ticket_read(
            ticket,
            salt=TICKET_SALT,
            stale_message="This page is out of date; please answer the item again.",
        )
        data["assignment"] = assignment_to_answer(
            pk=shown["assignment"], study=self.study.pk, annotator=self.annotator.pk
        )
        if data["assignment"] is None:
            raise ValidationError("That item is not in your queue.")
        data["suggestions"] = ticket_suggestions(
            shown.get("suggested", {}),
            item_id=data["assignment"].item_id,
            annotator_id=self.annotator.pk,
        )
        self.ask_about(data["assignment"].item)
        data["answers"] = {
            entry.question: data[entry.field_name]
            for entry in self.questions
            if data.get(entry.field_name)
        }
        if (data.get("action") or self.ANSWER) == self.ANSWER:
            missing = [
                e.question.prompt for e in self.questions if e.question not in data["answers"]
            ]
            if missing:
                raise ValidationError(f"Please answer every question: {'; '.join(missing)}")
        return data


class UndoForm(ServiceFormMixin, forms.Form):
    """Retract the latest answered item; the key makes a repeated undo harmless, and the
    assignment (the answer the button names) keeps a stale page from undoing another one."""

    idempotency_key = forms.UUIDField(widget=forms.HiddenInput)
    assignment = forms.IntegerField(widget=forms.HiddenInput, required=False)

    @classmethod
    def fresh(cls, *, undo: AnswerShown | None) -> UndoForm:
        """An unbound form, with a new key, that undoes ``undo`` (the latest answer)."""
        return cls(
            initial={
                "idempotency_key": uuid.uuid4(),
                "assignment": undo.assignment_id if undo else None,
            }
        )
