"""Forms of the adjudication page: a final label or "genuinely ambiguous", and the overlap rule."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.adjudication.models import OverlapRule
from apps.studies.models import Question
from core.forms import ServiceFormMixin


class AdjudicationForm(ServiceFormMixin, forms.Form):
    """One decision on one item: ``label`` (a key), or ``ambiguous`` with a ``note``."""

    item = forms.IntegerField(widget=forms.HiddenInput)
    label = forms.CharField(required=False, max_length=50)
    ambiguous = forms.BooleanField(required=False)
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("label") and not data.get("ambiguous"):
            raise forms.ValidationError("Pick the final label or mark the item ambiguous.")
        if data.get("ambiguous"):
            data["label"] = None
        return data


class OverlapRuleForm(ServiceFormMixin, forms.ModelForm):
    """Base k, k_max, the disagreement measure and its threshold of a question's adaptive
    overlap (the measures the question's kind allows)."""

    class Meta:
        model = OverlapRule
        fields = ("base_k", "k_max", "measure", "threshold")
        labels = {
            "base_k": "Base k",
            "k_max": "Maximum k",
            "measure": "Disagreement measure",
            "threshold": "Threshold",
        }
        widgets = {"threshold": forms.NumberInput({"step": "any"})}

    def __init__(self, *args: Any, question: Question, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.question = question  # the model's checks read its kind and labels
        allowed = OverlapRule.MEASURES_OF_KIND.get(question.kind, ())
        self.fields["measure"].choices = [(m.value, m.label) for m in allowed]
        self.fields["measure"].required = False  # the kind's first measure when not sent

    def clean_measure(self) -> str:
        allowed = OverlapRule.MEASURES_OF_KIND.get(self.instance.question.kind, ())
        return self.cleaned_data["measure"] or (allowed[0] if allowed else "")


class PredictedOverlapForm(ServiceFormMixin, forms.Form):
    """Items whose predicted disagreement exceeds ``threshold`` get ``k`` annotators."""

    threshold = forms.FloatField(
        label="Predicted AAD-RMSE above", min_value=0.0, widget=forms.NumberInput({"step": "any"})
    )
    k = forms.IntegerField(label="Annotators per item", min_value=2, max_value=50)
