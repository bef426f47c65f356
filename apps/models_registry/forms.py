"""Form of the leaderboard page: register a run from uploaded files (same formats as the API)."""

from __future__ import annotations

from django import forms
from django.core.files.uploadedfile import UploadedFile

from apps.models_registry.importing import upload_format
from apps.models_registry.services import Upload
from core.forms import ServiceFormMixin

UPLOAD_FIELDS = ("predictions", "features", "attention")
ACCEPT = ".csv,.jsonl,.ndjson,.npz"


class ModelRunUploadForm(ServiceFormMixin, forms.Form):
    """A run's name and version and its files; each file's format comes from its extension."""

    name = forms.CharField(max_length=200)
    version = forms.CharField(max_length=100, initial="1")
    predictions = forms.FileField(
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="One row per item and annotator (CSV, JSON Lines or NPZ).",
    )
    features = forms.FileField(
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="annotator, vector[, item]: feature vectors (feature-level BAE).",
    )
    attention = forms.FileField(
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="annotator, vector[, item]: attention vectors (region-level BAE).",
    )

    def _upload(self, field: str) -> Upload | None:
        file: UploadedFile | None = self.cleaned_data.get(field)
        if not file:
            return None
        return Upload(file, upload_format(file.name or ""))  # ValidationError: on the field

    def clean_predictions(self) -> Upload | None:
        return self._upload("predictions")

    def clean_features(self) -> Upload | None:
        return self._upload("features")

    def clean_attention(self) -> Upload | None:
        return self._upload("attention")
