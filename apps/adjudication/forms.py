"""Forms of the adjudication page: a final label or "genuinely ambiguous", and the overlap rule."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.adjudication.models import OverlapRule
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
    """Base k, k_max and the disagreement threshold of a question's adaptive overlap."""

    class Meta:
        model = OverlapRule
        fields = ("base_k", "k_max", "threshold")
        labels = {"base_k": "Base k", "k_max": "Maximum k", "threshold": "AAD-RMSE threshold"}


class PredictedOverlapForm(ServiceFormMixin, forms.Form):
    """Items whose predicted disagreement exceeds ``threshold`` get ``k`` annotators."""

    threshold = forms.FloatField(
        label="Predicted AAD-RMSE above", min_value=0.0, widget=forms.NumberInput({"step": "any"})
    )
    k = forms.IntegerField(label="Annotators per item", min_value=2, max_value=50)
