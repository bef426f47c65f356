"""Forms of recruitment: the manager's settings, consent with the questionnaire, training."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.preferences.models import clean_pairwise_settings
from apps.recruitment.models import GoldAnswer, Recruitment
from apps.recruitment.questionnaire import questionnaire_form_class
from apps.recruitment.services import GOLD_USE_NONE, RECRUITMENT_FIELDS
from apps.studies.models import Question
from core.forms import JSONTextField, ServiceFormMixin


class RecruitmentForm(ServiceFormMixin, forms.ModelForm):
    """A study's recruitment settings (written by :func:`recruitment_update`)."""

    completion_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=Recruitment._meta.get_field("completion_url").help_text
        + " Empty on Prolific: its standard completion address.",
    )

    questionnaire = JSONTextField(
        shape=list,
        example='[{"name": "age", "label": "Your age", "type": "integer", "min": 18}]',
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "mono"}),
    )

    class Meta:
        model = Recruitment
        fields = RECRUITMENT_FIELDS
        widgets = {
            "consent_text": forms.Textarea(attrs={"rows": 8}),
            "questionnaire": forms.Textarea(attrs={"rows": 6}),
            "check_rate": forms.NumberInput(attrs={"min": 0, "max": 1, "step": 0.05}),
            "qualification_threshold": forms.NumberInput(attrs={"min": 0, "max": 1, "step": 0.05}),
            "attention_floor": forms.NumberInput(attrs={"min": 0, "max": 1, "step": 0.05}),
            "trace_threshold": forms.NumberInput(attrs={"min": -1, "max": 1, "step": 0.05}),
        }
        labels = {"is_open": "Open the link to new participants"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["questionnaire"].help_text = (
            'A JSON list, e.g. [{"name": "age", "label": "Your age", "type": "integer", '
            '"min": 18}]; types: text, integer, number, choice (with "choices"), boolean.'
        )


def consent_form(questionnaire: list[dict[str, Any]], data: Any = None) -> forms.Form:
    """The questionnaire's form (no fields without one); ``data`` binds it."""
    return questionnaire_form_class(questionnaire)(data, prefix="q", label_suffix="")


OUTCOME_NAMES = {1: "A is better", 0: "A and B are equally good", -1: "B is better"}
"""A calibration pair's outcomes as the training page names them (A: the gold's item)."""


class TrainingAnswerForm(ServiceFormMixin, forms.Form):
    """One answer to one training question: a label, a pair's order, or a trace's samples.

    ``answer_value()`` is the answer as the services take it.
    """

    gold = forms.IntegerField(widget=forms.HiddenInput)
    answer = forms.ChoiceField(widget=forms.RadioSelect)

    def __init__(self, *args: Any, gold: GoldAnswer, **kwargs: Any) -> None:
        super().__init__(*args, initial={"gold": gold.pk}, **kwargs)
        self.kind = gold.question.kind
        self.fields["answer"].label = gold.question.prompt
        if self.kind == Question.Kind.PAIRWISE:
            strict = clean_pairwise_settings(gold.question.settings).strict
            self.fields["answer"].choices = [
                (str(outcome), name)
                for outcome, name in OUTCOME_NAMES.items()
                if outcome or not strict
            ]
        elif self.kind == Question.Kind.CONTINUOUS:
            self.fields["answer"] = forms.JSONField(
                widget=forms.HiddenInput,
                error_messages={"required": "Play the stimulus and follow it with the slider."},
            )
        else:
            self.fields["answer"].choices = [
                (lab.key, lab.name) for lab in gold.question.labels.all()
            ]

    def answer_value(self) -> Any:
        answer = self.cleaned_data["answer"]
        return int(answer) if self.kind == Question.Kind.PAIRWISE else answer


class GoldSignalForm(ServiceFormMixin, forms.Form):
    """Upload an item's true signal (a gold trace) from the manager's page."""

    item = forms.CharField(max_length=200, label="Item (external id)")
    rate_hz = forms.FloatField(label="Samples per second (Hz)", min_value=0.001)
    file = forms.FileField(
        label="Signal file",
        help_text="CSV (one number in [0, 1] per line, an optional header line) or a 1-D "
        "NumPy .npy array; at most 4 MiB.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.npy"}),
    )
    description = forms.CharField(max_length=300, required=False)


class GoldUseForm(ServiceFormMixin, forms.Form):
    """Make an item a hidden attention check or a training item of a question, or neither
    (written by :func:`~apps.recruitment.services.gold_use_set`).

    A gold trace's known answer is its item's signal; a pair's is given by ``versus`` and
    ``outcome`` (empty: the known pair stays); any other known answer stays as it is.
    """

    item = forms.CharField(max_length=200, label="Item (external id)")
    question = forms.ChoiceField(label="Question")
    use = forms.ChoiceField(
        choices=[
            (GoldAnswer.Use.CHECK, "Attention check (hidden among the work)"),
            (GoldAnswer.Use.TRAINING, "Training (answered first, with feedback)"),
            (GOLD_USE_NONE, "None (a regular item again)"),
        ],
        initial=GoldAnswer.Use.CHECK,
    )
    reason = forms.CharField(
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the answer is right; shown in training feedback.",
    )
    versus = forms.CharField(
        required=False,
        max_length=200,
        label="Pair: compared with (external id)",
        help_text="Pairwise questions only; empty keeps the known pair.",
    )
    outcome = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        label="Pair: the item is",
        choices=[("", "—"), ("1", "better"), ("0", "equally good"), ("-1", "worse")],
    )

    def __init__(self, *args: Any, questions: list[Question], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.questions = {question.key: question for question in questions}
        field = self.fields["question"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [
            (question.key, f"{question.prompt} ({question.get_kind_display().lower()})")
            for question in questions
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        question = self.questions.get(data.get("question", ""))
        versus, outcome = data.get("versus"), data.get("outcome")
        if (versus or outcome is not None) and question is not None:
            if question.kind != Question.Kind.PAIRWISE:
                self.add_error("versus", "Only a pairwise question compares two items.")
            elif not versus:
                self.add_error("versus", "Name the item the pair compares with.")
            elif outcome is None:
                self.add_error("outcome", "Give the pair's known order.")
        return data

    def chosen_question(self) -> Question:
        return self.questions[self.cleaned_data["question"]]

    def value(self) -> dict[str, Any] | None:
        """The known answer given on the form (a pair), or ``None`` to keep or derive it."""
        versus = self.cleaned_data.get("versus")
        return {"versus": versus, "outcome": self.cleaned_data["outcome"]} if versus else None

    def add_service_error(self, error: ValidationError) -> None:
        """A pair's answer errors belong to ``versus``; other answers' above the form."""
        if hasattr(error, "error_dict") and "value" in error.error_dict:
            pairwise = self.chosen_question().kind == Question.Kind.PAIRWISE
            moved = {"versus" if pairwise else "__all__": error.error_dict["value"]}
            rest = {key: value for key, value in error.error_dict.items() if key != "value"}
            error = ValidationError(moved | rest)
        super().add_service_error(error)
