"""The pre-study questionnaire's definition is checked, and its form validates by type."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.recruitment.questionnaire import questionnaire_form_class, questionnaire_validate

GOOD = [
    {"name": "age", "label": "Your age", "type": "integer", "min": 18, "max": 99},
    {"name": "native", "label": "English first?", "type": "choice", "choices": ["yes", "no"]},
    {"name": "hours", "label": "Hours online a day", "type": "number", "required": False},
    {"name": "note", "label": "Anything else?", "type": "text", "max_length": 10},
    {"name": "headphones", "label": "Wearing headphones?", "type": "boolean"},
]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "JSON list"),
        ([{"name": "Age", "label": "x", "type": "text"}], "lower-case"),
        ([{"name": "a", "label": "x", "type": "date"}], "type must be"),
        ([{"name": "a", "label": "", "type": "text"}], "label"),
        ([{"name": "a", "label": "x", "type": "choice"}], "choices"),
        ([{"name": "a", "label": "x", "type": "text", "choices": ["a"]}], "choices"),
        ([{"name": "a", "label": "x", "type": "text", "min": 1}], "min is a number"),
        ([{"name": "a", "label": "x", "type": "text", "colour": 1}], "unknown keys"),
        ([{"name": "a", "label": "x", "type": "text"}] * 2, "used twice"),
    ],
)
def test_bad_definitions_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        questionnaire_validate(fields)


def test_the_form_validates_each_type():
    questionnaire_validate(GOOD)
    form_class = questionnaire_form_class(GOOD)
    form = form_class(
        {"age": "17", "native": "maybe", "note": "far too long a note", "headphones": "yes"}
    )
    assert not form.is_valid()
    assert set(form.errors) == {"age", "native", "note"}
    form = form_class({"age": "30", "native": "no", "hours": "", "note": "ok", "headphones": "no"})
    assert form.is_valid()
    assert form.cleaned_data == {
        "age": 30,
        "native": "no",
        "hours": None,
        "note": "ok",
        "headphones": False,
    }
