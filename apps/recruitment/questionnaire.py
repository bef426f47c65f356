"""The pre-study questionnaire: a manager's JSON list of typed fields, checked, made a form.

Each field is an object with ``name`` (a slug, the key its answer is stored under), ``label``
(the question shown), ``type`` (``text``, ``integer``, ``number``, ``choice`` or ``boolean``)
and optionally ``required`` (default true), ``choices`` (a list of strings, for ``choice``),
``min`` and ``max`` (for ``integer`` and ``number``) and ``max_length`` (for ``text``, default
200). For example::

    [{"name": "age", "label": "Your age", "type": "integer", "min": 18, "max": 99},
     {"name": "native", "label": "Is English your first language?", "type": "choice",
      "choices": ["yes", "no"]}]
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

TYPES = ("text", "integer", "number", "choice", "boolean")
MAX_FIELDS = 20
_KEYS = {"name", "label", "type", "required", "choices", "min", "max", "max_length"}
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,49}\Z")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def questionnaire_validate(fields: Any) -> None:
    """Raise ``ValidationError`` naming the first problem of a questionnaire definition."""
    if not isinstance(fields, list):
        raise ValidationError("Give a JSON list of fields.")
    if len(fields) > MAX_FIELDS:
        raise ValidationError(f"At most {MAX_FIELDS} questions.")
    names: set[str] = set()
    for n, spec in enumerate(fields, start=1):
        where = f"Question {n}"
        if not isinstance(spec, dict):
            raise ValidationError(f"{where}: give an object.")
        if unknown := set(spec) - _KEYS:
            raise ValidationError(f"{where}: unknown keys {', '.join(sorted(unknown))}.")
        name = spec.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValidationError(f"{where}: name must be lower-case letters, digits or '_'.")
        if name in names:
            raise ValidationError(f"{where}: the name {name!r} is used twice.")
        names.add(name)
        if not isinstance(spec.get("label"), str) or not spec["label"].strip():
            raise ValidationError(f"{where}: give a label (the question shown).")
        kind = spec.get("type")
        if kind not in TYPES:
            raise ValidationError(f"{where}: type must be one of {', '.join(TYPES)}.")
        if not isinstance(spec.get("required", True), bool):
            raise ValidationError(f"{where}: required is true or false.")
        choices = spec.get("choices")
        if (kind == "choice") != (choices is not None):
            raise ValidationError(f"{where}: choices belong to (and are needed by) type choice.")
        if choices is not None and (
            not isinstance(choices, list)
            or not choices
            or not all(isinstance(c, str) and c for c in choices)
            or len(set(choices)) != len(choices)
        ):
            raise ValidationError(f"{where}: choices is a list of distinct texts.")
        for bound in ("min", "max"):
            if bound in spec and (kind not in ("integer", "number") or not _is_number(spec[bound])):
                raise ValidationError(f"{where}: {bound} is a number, for integer or number.")
        if "max_length" in spec and (
            kind != "text" or not isinstance(spec["max_length"], int) or spec["max_length"] < 1
        ):
            raise ValidationError(f"{where}: max_length is a positive integer, for text.")


def _field(spec: dict[str, Any]) -> forms.Field:
    required = spec.get("required", True)
    common = {"label": spec["label"], "required": required}
    kind = spec["type"]
    if kind == "text":
        return forms.CharField(max_length=spec.get("max_length", 200), **common)
    if kind == "choice":
        choices = [("", "—")] * (not required) + [(c, c) for c in spec["choices"]]
        return forms.ChoiceField(choices=choices, widget=forms.RadioSelect, **common)
    if kind == "boolean":
        choices = [("yes", "Yes"), ("no", "No")]
        return forms.TypedChoiceField(
            choices=choices, coerce=lambda v: v == "yes", widget=forms.RadioSelect, **common
        )
    field_class = forms.IntegerField if kind == "integer" else forms.FloatField
    return field_class(min_value=spec.get("min"), max_value=spec.get("max"), **common)


def questionnaire_form_class(fields: list[dict[str, Any]]) -> type[forms.Form]:
    """A form class with one field per questionnaire entry, validated by its type."""
    return type("QuestionnaireForm", (forms.Form,), {s["name"]: _field(s) for s in fields})
