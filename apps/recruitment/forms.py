"""Forms of recruitment: the manager's settings, consent with the questionnaire, training."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.preferences.models import clean_pairwise_settings
from apps.recruitment.models import GoldAnswer, Recruitment
from apps.recruitment.questionnaire import questionnaire_form_class
from apps.recruitment.services import RECRUITMENT_FIELDS
from apps.studies.models import Question
from core.forms import ServiceFormMixin


class RecruitmentForm(ServiceFormMixin, forms.ModelForm):
    """A study's recruitment settings (written by :func:`recruitment_update`)."""

    completion_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=Recruitment._meta.get_field("completion_url").help_text
        + " Empty on Prolific: its standard completion address.",
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
