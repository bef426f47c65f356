"""``{% question_controls entry single_question %}``: a queue question's prompt and label
controls (``annotations/_question.html``), rendered once per content.

The queue renders the same controls for every item it shows: only a model's shown suggestion
makes them differ. Rendering them through Django's template engine took a quarter of the
page answer's template time (a loop of conditions per label), so the HTML without a shown
suggestion is kept per process, keyed on everything the template reads (prompt, scale, each
label's id, key, name and shortcut, field name, buttons or radios): an edit of any of them
is a new key, and an unused key falls out of the least-recently-used cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from apps.annotations.forms import QueueQuestion
from apps.models_registry.suggestions import QueueSuggestion

register = template.Library()

TEMPLATE = "annotations/_question.html"


class LabelShown(NamedTuple):
    """What the template reads of a label."""

    pk: int
    key: str
    name: str
    shortcut: str


@register.simple_tag
def question_controls(entry: QueueQuestion, single_question: bool) -> SafeString:
    """The entry's controls: from the cache unless a model's suggestion is shown."""
    question = entry.question
    if entry.suggestion is not None and entry.suggestion.shown:
        return _render(
            question.prompt,
            question.ordered,
            entry.labels,
            entry.field_name,
            single_question,
            suggestion=entry.suggestion,
        )
    labels = tuple(
        LabelShown(label.pk, label.key, label.name, label.shortcut) for label in entry.labels
    )
    return _controls(question.prompt, question.ordered, labels, entry.field_name, single_question)


def _render(
    prompt: str,
    ordered: bool,
    labels: Sequence[object],
    field_name: str,
    single_question: bool,
    suggestion: QueueSuggestion | None = None,
) -> SafeString:
    context = {
        "prompt": prompt,
        "ordered": ordered,
        "labels": labels,
        "field_name": field_name,
        "single_question": single_question,
        "suggestion": suggestion,
    }
    return render_to_string(TEMPLATE, context)


_controls = lru_cache(maxsize=1024)(_render)
