"""Forms of the study pages; they validate input and show errors, the services do the writes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, QueryDict
from django.template.loader import render_to_string

from apps.studies.kinds import QUALITY, QuestionKind, clean_question_settings, own_settings
from apps.studies.models import RESERVED_SHORTCUTS, Label, Question, Study
from apps.studies.scope import ITEM_KINDS, clean_scope, scope_text
from apps.studies.selectors import coverage_mixed, label_answer_counts, question_coverage
from core.forms import JSONTextField, ServiceFormMixin

T = TypeVar("T")
ITEM_KIND_CHOICES = [(kind, kind.capitalize()) for kind in ITEM_KINDS]
SCOPE_FIELDS = ("scope_kinds", "scope_tags", "scope_items")
LABEL_FIELDS = ("key", "name", "shortcut", "valence", "arousal")


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
            "1 (0.1 = one item in ten), to measure test-retest agreement: each annotator gets "
            "exactly that share of their items, rounded (40 items at 0.1: 4 repeats), at most "
            f"{settings.STUDY_MAX_REPEATS}; a stimulus longer than "
            f"{settings.REPEAT_MAX_SECONDS:g} s is never repeated.",
        }


class StudyStatusForm(forms.Form):
    """The status a manager moves the study to (open, pause, close)."""

    status = forms.ChoiceField(choices=Study.Status.choices)


class QuestionForm(ServiceFormMixin, forms.Form):
    """The fields every question has, plus "ordered" for kinds with a label scale and the
    advanced box: settings typed as JSON (merged over the kind's settings form)."""

    key = forms.SlugField(
        max_length=50,
        help_text="Stable identifier in imports and exports: letters, digits, - and _.",
    )
    prompt = forms.CharField(
        max_length=500,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="The question annotators read.",
    )
    ordered = forms.BooleanField(
        label="Ordered scale",
        required=False,
        help_text="The labels go from low to high in the order of the rows (a Likert scale): "
        "agreement then counts near misses as partly right.",
    )
    instructions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Shown above this question on its pages, instead of the study's "
        "instructions (empty: the study's). Markdown: **bold**, lists, links.",
    )
    scope_kinds = forms.MultipleChoiceField(
        label="Item kinds",
        choices=ITEM_KIND_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Ask this question only about items of these kinds (none ticked: any kind).",
    )
    scope_tags = forms.CharField(
        label="Items tagged",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "autocapitalize": "none"}),
        help_text="One line per metadata column of the import: column = value, value (any "
        "of them), e.g. group = sentence. Empty: any item.",
    )
    scope_items = forms.CharField(
        label="Only these items",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "autocapitalize": "none"}),
        help_text="External ids, separated by spaces, commas or new lines. Empty: any item.",
    )
    advanced = JSONTextField(
        shape=dict,
        example='{"quality": {...}}',
        label="Advanced settings (JSON)",
        required=False,
        help_text='A JSON object merged over the fields above, e.g. {"quality": {...}}: this '
        "question's own quality thresholds (minimum evidence, flag rules; see docs/dashboard.md).",
    )

    def __init__(self, *args: Any, kind: QuestionKind, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not kind.has_labels:
            del self.fields["ordered"]

    def clean_scope_tags(self) -> dict[str, list[str]]:
        """``column = a, b`` lines as ``{"column": ["a", "b"]}``."""
        tags: dict[str, list[str]] = {}
        for line in self.cleaned_data.get("scope_tags", "").splitlines():
            if not line.strip():
                continue
            column, equals, values = line.partition("=")
            names = [value.strip() for value in values.split(",") if value.strip()]
            if not equals or not column.strip() or not names:
                raise ValidationError(f"Write {line.strip()!r} as column = value, value.")
            tags.setdefault(column.strip(), []).extend(names)
        return tags

    def clean_scope_items(self) -> list[str]:
        return re.findall(r"[^\s,]+", self.cleaned_data.get("scope_items", ""))

    def scope(self) -> dict[str, Any]:
        """The scope as typed, for :func:`apps.studies.scope.clean_scope`."""
        data = self.cleaned_data
        return {
            "kinds": list(data.get("scope_kinds") or []),
            "metadata": data.get("scope_tags") or {},
            "items": data.get("scope_items") or [],
        }


def scope_initial(scope: Mapping[str, Any]) -> dict[str, Any]:
    """A stored scope as the editor's fields show it."""
    return {
        "scope_kinds": list(scope.get("kinds", [])),
        "scope_tags": "\n".join(
            f"{column} = {', '.join(str(v) for v in values)}"
            for column, values in (scope.get("metadata") or {}).items()
        ),
        "scope_items": "\n".join(scope.get("items", [])),
    }


class LabelForm(ServiceFormMixin, forms.ModelForm):
    """One row of a label scale; the model's checks (shortcut, coordinates) run on it."""

    class Meta:
        model = Label
        fields = LABEL_FIELDS
        widgets = {
            "key": forms.TextInput(attrs={"size": 12, "autocapitalize": "none"}),
            "name": forms.TextInput(attrs={"size": 16}),
            "shortcut": forms.TextInput(attrs={"size": 2, "maxlength": 1}),
            "valence": forms.NumberInput(attrs={"step": "any"}),
            "arousal": forms.NumberInput(attrs={"step": "any"}),
        }
        help_texts = {
            "key": "Identifier in exports: letters, digits, - and _.",
            "name": "What annotators read; the key if empty.",
            "shortcut": "One key that picks the label; "
            + " and ".join(sorted(RESERVED_SHORTCUTS))
            + " are kept for skip and undo.",
            "valence": "Optional coordinates of the label in the valence-arousal plane, on one "
            "scale for all labels (e.g. -1 to 1, or 1 to 5): both or neither. Agreement then "
            "counts near emotions as partly right.",
        }
        error_messages = {
            "key": {"invalid": "Use only letters, digits, - and _."},
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = False
        for name, field in self.fields.items():  # the column's help, shown once for all rows
            if field.help_text:
                field.widget.attrs["aria-describedby"] = f"label-help-{name}"


LabelRows = forms.formset_factory(LabelForm, extra=0)


def label_rows_posted(data: Mapping[str, Any], *, prefix: str = "labels") -> list[dict[str, str]]:
    """The label rows as typed (text), from posted data, in order."""
    try:
        total = min(int(data.get(f"{prefix}-TOTAL_FORMS", 0)), LabelRows.absolute_max)
    except ValueError:
        total = 0
    return [
        {name: data.get(f"{prefix}-{i}-{name}", "") for name in LABEL_FIELDS} for i in range(total)
    ]


def rows_changed(rows: list[dict[str, str]], action: str) -> list[dict[str, str]]:
    """The rows after an editor button: ``add``, ``remove-<i>``, ``up-<i>``, ``down-<i>``."""
    rows = list(rows)
    verb, _, index = action.partition("-")
    if verb == "add":
        return [*rows, dict.fromkeys(LABEL_FIELDS, "")]
    i = int(index) if index.isdigit() else -1
    if not 0 <= i < len(rows):
        return rows
    if verb == "remove":
        del rows[i]
    elif verb in ("up", "down"):
        j = i - 1 if verb == "up" else i + 1
        if 0 <= j < len(rows):
            rows[i], rows[j] = rows[j], rows[i]
    return rows


F = TypeVar("F", bound=forms.BaseForm)


def _typed(form_class: type[F], data: QueryDict | None, bind: QueryDict | None, **kwargs: Any) -> F:
    """``form_class`` bound to ``bind``; or, when only ``data`` is given, unbound showing the
    values typed in ``data`` (the page redrawn after a row button, without error messages)."""
    if bind is not None or data is None:
        return form_class(bind, **kwargs)
    typed = form_class(data, **kwargs)
    kwargs["initial"] = {name: typed[name].value() for name in typed.fields}
    return form_class(**kwargs)


class QuestionEditor:
    """The question page of one kind: the question's fields, its label rows (kinds with a
    scale), its settings form (:attr:`QuestionKind.settings_form`) and the advanced box.

    ``is_valid`` also runs the kind's settings validator (the one the services run), so that
    every settings error shows at its field at once; ``apply`` calls a service and puts its
    errors on the field, row or setting they name.
    """

    def __init__(
        self,
        *,
        kind: QuestionKind,
        data: QueryDict | None = None,
        question: Question | None = None,
        initial: dict[str, Any] | None = None,
        action: str = "save",
    ) -> None:
        self.kind, self.question = kind, question
        self.label_errors: list[str] = []
        settings = dict(question.settings) if question else {}
        initial = dict(initial or {})
        if question is not None:
            initial |= {"key": question.key, "prompt": question.prompt}
            initial["ordered"] = question.ordered
            initial["instructions"] = question.instructions
            initial |= scope_initial(question.scope or {})
        fields = set(kind.settings_form.base_fields) if kind.settings_form else set()
        initial["advanced"] = {k: v for k, v in settings.items() if k not in fields}
        rows: list[dict[str, Any]] | None = None
        if data is not None and action not in ("save", "preview"):
            # a row button: the page again as typed, one row more, less or moved, no errors
            rows = rows_changed(label_rows_posted(data), action)
        elif data is None and question is not None:
            rows = list(question.labels.values(*LABEL_FIELDS))
        elif data is None:
            rows = [dict.fromkeys(LABEL_FIELDS, "") for _ in range(2)]
        bind = data if rows is None else None
        self.form = _typed(QuestionForm, data, bind, kind=kind, initial=initial)
        self.labels = (
            LabelRows(
                bind,
                prefix="labels",
                initial=rows,
                form_kwargs={"empty_permitted": True, "use_required_attribute": False},
            )
            if kind.has_labels
            else None
        )
        self.settings = (
            _typed(
                kind.settings_form, data, bind, prefix="settings", initial=own_settings(settings)
            )
            if kind.settings_form
            else None
        )

    def coverage(self) -> dict[str, Any] | None:
        """What the saved question's scope covers: ``text`` (the scope in words), ``total``
        items, ``kinds`` (item kind -> count) and ``mixed`` (several media kinds: a question
        asked of sentences and audio clips alike is rarely meant). ``None`` for a new one."""
        if self.question is None:
            return None
        counts = question_coverage(self.question)
        return {
            "text": scope_text(self.question.scope),
            "total": counts["total"],
            "kinds": {kind: n for kind, n in counts.items() if kind != "total"},
            "mixed": coverage_mixed(counts),
            "problem": self.kind.scope_problem(self.question),
        }

    def label_rows(self) -> list[tuple[LabelForm, int]]:
        """Each label row with the number of answers its label has (saved questions)."""
        assert self.labels is not None
        used = label_answer_counts(question=self.question) if self.question else {}
        return [(row, used.get(row["key"].value() or "", 0)) for row in self.labels.forms]

    def preview_html(self, request: HttpRequest) -> str:
        """The preview drawn by the kind's template (:attr:`QuestionKind.preview_template`),
        or "" when the kind has none."""
        if not self.kind.preview_template:
            return ""
        return render_to_string(self.kind.preview_template, self.preview(), request)

    @property
    def parts(self) -> list[Any]:
        return [part for part in (self.form, self.labels, self.settings) if part is not None]

    @property
    def http_status(self) -> int:
        """422 for a submitted page with errors, else 200."""
        return 422 if self.form.is_bound and self.has_errors else 200

    @property
    def has_errors(self) -> bool:
        return bool(
            self.label_errors or any(not part.is_valid() for part in self.parts if part.is_bound)
        )

    def is_valid(self) -> bool:
        """Every part valid, and the settings accepted by the kind's validator (run even when
        the key or prompt is wrong, so that every error shows at once)."""
        for part in self.parts:
            part.is_valid()
        if not (self.settings and self.settings.errors) and "advanced" not in self.form.errors:
            try:
                clean_question_settings(self.kind.key, self.settings_data())
            except ValidationError as exc:
                self.add_service_error(exc)
        if not any(name in self.form.errors for name in SCOPE_FIELDS):
            try:
                clean_scope(self.form.scope())
            except ValidationError as exc:
                self.add_service_error(exc)
        return not self.has_errors

    def settings_data(self) -> dict[str, Any]:
        """The settings as typed: the settings form's fields, then the advanced box."""
        typed = dict(self.settings.cleaned_data) if self.settings else {}
        return typed | self.form.cleaned_data.get("advanced", {})

    def label_data(self) -> list[dict[str, Any]]:
        """The non-empty label rows, in scale order, as the services take them."""
        assert self.labels is not None
        return [
            {name: form.cleaned_data.get(name) for name in LABEL_FIELDS}
            for form in self.filled_rows()
        ]

    def filled_rows(self) -> list[LabelForm]:
        assert self.labels is not None
        return [form for form in self.labels.forms if form.has_changed()]

    def cleaned_data(self) -> dict[str, Any]:
        """The keyword arguments of ``question_create`` / ``question_update``."""
        data = {name: self.form.cleaned_data[name] for name in ("key", "prompt", "instructions")}
        data["settings"] = self.settings_data()
        data["scope"] = self.form.scope()
        if self.labels is not None:
            data["ordered"] = self.form.cleaned_data["ordered"]
            data["labels"] = self.label_data()
        return data

    def apply(self, service: Callable[..., T], /, **kwargs: Any) -> T | None:
        """Call a service with the cleaned data; on ``ValidationError`` show it and return
        ``None``."""
        try:
            return service(**kwargs, **self.cleaned_data())
        except ValidationError as exc:
            self.add_service_error(exc)
            return None

    def add_service_error(self, error: ValidationError) -> None:
        """Put each message where it belongs: a question field, a label row (``labels[i]``),
        the label rows (``labels``), a setting's field, else the advanced box."""
        if not hasattr(error, "error_dict"):
            self.form.add_error(None, error)
            return
        rows = self.filled_rows() if self.labels is not None else []
        for key, messages in error.message_dict.items():
            name, _, index = key.partition("[")
            if name == "labels" and index and int(index.rstrip("]")) < len(rows):
                for message in messages:
                    rows[int(index.rstrip("]"))].add_error(None, message)
            elif name == "labels":
                self.label_errors += messages
            elif key in self.form.fields and key != "advanced":
                self.form.add_error(key, messages)
            elif self.settings is not None and key in self.settings.fields:
                self.settings.add_error(key, messages)
            elif key == "scope":
                for message in messages:
                    part = message.partition(":")[0]
                    field = {"kinds": "scope_kinds", "metadata": "scope_tags"}.get(part)
                    self.form.add_error(field or "scope_items", message)
            elif key in ("settings", QUALITY, "advanced"):
                self.form.add_error("advanced", messages)
            else:
                self.form.add_error(None, messages)

    def preview(self) -> dict[str, Any]:
        """The preview's context: an unsaved question as typed so far (settings that do not
        pass yet replaced by their defaults) and its labels."""
        kind = self.kind
        raw: dict[str, Any] = {}
        if self.settings is not None:
            if self.settings.is_bound:
                self.settings.is_valid()
                raw = dict(getattr(self.settings, "cleaned_data", {}))
            else:
                raw = {
                    name: self.settings.get_initial_for_field(field, name)
                    for name, field in self.settings.fields.items()
                }
        try:
            settings = kind.clean_settings(raw)
        except ValidationError as exc:
            bad = set(getattr(exc, "error_dict", {}))
            try:
                settings = kind.clean_settings({k: v for k, v in raw.items() if k not in bad})
            except ValidationError:
                settings = kind.clean_settings({})
        prompt = self.form.data.get("prompt") if self.form.is_bound else None
        ordered = self.form.data.get("ordered") if self.form.is_bound else None
        question = Question(
            kind=kind.key,
            prompt=prompt or self.form.initial.get("prompt") or "Your question",
            settings=settings,
            ordered=bool(ordered) if self.form.is_bound else bool(self.form.initial.get("ordered")),
        )
        labels = []
        if self.labels is not None:
            rows = (
                label_rows_posted(self.labels.data)
                if self.labels.is_bound
                else self.labels.initial or []
            )
            labels = [
                Label(key=row["key"], name=row["name"] or row["key"], shortcut=row["shortcut"])
                for row in rows
                if row.get("key")
            ]
        return {"question": question} | kind.preview_context(question=question, labels=labels)
