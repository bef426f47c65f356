"""Forms of the study pages; they validate input and show errors, the services do the writes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from apps.studies.models import Label, Question, Study, shortcut_problem
from core.forms import ServiceFormMixin

LABEL_COLUMNS = ("key", "name", "shortcut", "valence", "arousal")


class StudyForm(ServiceFormMixin, forms.ModelForm):
    """Name, instructions, overlap and repeat rate of a study (written by the study services)."""

    class Meta:
        model = Study
        fields = ("name", "instructions", "overlap", "repeat_rate")
        widgets = {
            "instructions": forms.Textarea(attrs={"rows": 10}),
            "overlap": forms.NumberInput(attrs={"min": 1, "placeholder": "everyone"}),
            "repeat_rate": forms.NumberInput(attrs={"min": 0, "max": 1, "step": 0.05}),
        }
        labels = {"overlap": "Annotators per item", "repeat_rate": "Repeat rate"}
        help_texts = {
            "instructions": "Shown to annotators above each item. Markdown: **bold**, lists, "
            "links, tables.",
            "repeat_rate": "Share of items shown a second time to the same annotator, from 0 to "
            "1 (0.1 = one item in ten), to measure test-retest agreement.",
        }


class StudyStatusForm(forms.Form):
    """The status a manager moves the study to (open, pause, close)."""

    status = forms.ChoiceField(choices=Study.Status.choices)


def _number(text: str, *, column: str, line: int) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValidationError(f"Line {line}: {column} must be a number, not {text!r}.") from None


def _parse_label_line(line: str, *, number: int) -> dict[str, Any]:
    """One ``key | Name | shortcut | valence | arousal`` line as the services' label dict."""
    cells = [cell.strip() for cell in line.split("|")]
    if len(cells) > len(LABEL_COLUMNS):
        raise ValidationError(f"Line {number}: at most {len(LABEL_COLUMNS)} columns.")
    key, name, shortcut, valence, arousal = cells + [""] * (len(LABEL_COLUMNS) - len(cells))
    try:
        validate_slug(key)
    except ValidationError:
        raise ValidationError(
            f"Line {number}: the key {key!r} may use only letters, digits, - and _."
        ) from None
    if len(shortcut) > 1:
        raise ValidationError(f"Line {number}: a shortcut is a single key, not {shortcut!r}.")
    if problem := shortcut_problem(shortcut):
        raise ValidationError(f"Line {number}: {problem}")
    return {
        "key": key,
        "name": name or key,
        "shortcut": shortcut,
        "valence": _number(valence, column="valence", line=number),
        "arousal": _number(arousal, column="arousal", line=number),
    }


def labels_to_text(labels: Iterable[Label]) -> str:
    """The editable text of a scale: one ``key | Name | shortcut | valence | arousal`` a line."""
    lines = []
    for label in labels:
        cells = [
            label.key,
            label.name,
            label.shortcut,
            "" if label.valence is None else f"{label.valence:g}",
            "" if label.arousal is None else f"{label.arousal:g}",
        ]
        while cells and not cells[-1]:
            cells.pop()
        lines.append(" | ".join(cells))
    return "\n".join(lines)


class _SettingsField(forms.JSONField):
    """A JSON object field that shows "no settings" as an empty box, not ``null`` or ``{}``."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value in (None, {}, "null") else super().prepare_value(value)


class QuestionForm(ServiceFormMixin, forms.ModelForm):
    """A question: categorical ones with their labels, typed one label per line; continuous and
    pairwise ones with their settings (JSON, checked by the kind's own validator)."""

    row_names = {"labels": "Label"}

    labels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 7, "spellcheck": "false", "class": "mono"}),
        help_text="Categorical questions: one label per line: key | Name | shortcut | valence | "
        "arousal. Only the key is required; valence and arousal (from -1 to 1) go together. "
        "Lines are shown in this order, from low to high on an ordered scale.",
    )
    kind = forms.ChoiceField(
        choices=Question.Kind.choices, required=False, initial=Question.Kind.CATEGORICAL
    )
    settings = _SettingsField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "mono"}),
        help_text="Continuous and pairwise questions: their settings as a JSON object, e.g. "
        '{"allow_seek": true} or {"strict": true, "kappa_floor": 0.5}; empty = the defaults.',
    )

    class Meta:
        model = Question
        fields = ("key", "prompt", "kind", "ordered", "settings")
        labels = {"ordered": "Ordered scale (categorical)"}
        widgets = {"prompt": forms.TextInput(attrs={"size": 60})}

    def clean(self) -> dict[str, Any]:
        """Labels belong to categorical questions, settings to the other kinds."""
        data = super().clean()
        kind = data["kind"] = data.get("kind") or Question.Kind.CATEGORICAL
        if kind == Question.Kind.CATEGORICAL:
            if not data.get("labels") and "labels" not in self.errors:
                self.add_error("labels", "A categorical question needs at least two labels.")
            if data.get("settings"):
                self.add_error("settings", "Categorical questions take no settings.")
            data["settings"] = {}
        elif data.get("labels"):
            self.add_error("labels", "Only categorical questions have labels.")
        if data.get("settings") is None:
            data["settings"] = {}
        return data

    def clean_labels(self) -> list[dict[str, Any]]:
        """Parse the label lines; report every bad line, repeated key or shortcut at once."""
        labels, errors = [], []
        first_line: dict[tuple[str, str], int] = {}
        for number, line in enumerate(self.cleaned_data["labels"].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                label = _parse_label_line(line, number=number)
            except ValidationError as exc:
                errors.append(exc)
                continue
            labels.append(label)
            for column in ("key", "shortcut"):
                seen = (column, label[column].lower())
                if label[column] and seen in first_line:
                    errors.append(
                        ValidationError(
                            f"Line {number}: the {column} {label[column]!r} is already used on "
                            f"line {first_line[seen]}."
                        )
                    )
                first_line.setdefault(seen, number)
        if errors:
            raise ValidationError(errors)
        return labels
