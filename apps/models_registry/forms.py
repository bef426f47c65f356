"""Forms of the leaderboard page: register a run from uploaded files (same formats as the API),
configure the question's model endpoint."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from apps.models_registry.importing import upload_format
from apps.models_registry.models import ModelEndpoint
from apps.models_registry.services import ENDPOINT_CONFIG_FIELDS, Upload
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


class ModelEndpointForm(ServiceFormMixin, forms.Form):
    """A categorical question's model endpoint; the stored API key is never put back in the
    page (a blank key field keeps it)."""

    kind = forms.ChoiceField(label="Format", choices=ModelEndpoint.Kind.choices)
    url = forms.CharField(
        label="URL",
        max_length=1000,
        help_text="http:// or https://; for the OpenAI format the chat-completions URL "
        "(…/v1/chat/completions).",
    )
    model = forms.CharField(
        max_length=200, help_text="Model name: sent to chat completions; names the run."
    )
    version = forms.CharField(
        max_length=100, initial="1", help_text="A new model name or version starts a new run."
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Sent as a Bearer token; stored and never shown again. Blank: keep the "
        "stored key.",
    )
    remove_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    api_key_env = forms.CharField(
        label="Key from environment variable",
        required=False,
        max_length=100,
        help_text="Instead of a key: the name of a server environment variable holding it.",
    )
    timeout = forms.FloatField(label="Time-out (s)", initial=10.0)
    retries = forms.IntegerField(
        initial=2, help_text="After a time-out, no connection, 429 or 5xx; back-off doubles."
    )
    max_calls = forms.IntegerField(
        label="Call budget", initial=1000, help_text="HTTP requests in all, retries included."
    )
    logprobs = forms.BooleanField(
        label="Ask for log-probabilities",
        required=False,
        help_text="OpenAI format: store the label tokens' probabilities (logprobs); leave off "
        "for servers that refuse the field.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # its own ids: the page's upload form has a "version" field too
        kwargs.setdefault("auto_id", "id_endpoint_%s")
        super().__init__(*args, **kwargs)

    @classmethod
    def of(cls, endpoint: ModelEndpoint | None, data: Any = None) -> ModelEndpointForm:
        """The form bound to ``data``, or showing ``endpoint``'s configuration (no key)."""
        initial = {}
        if endpoint is not None:
            initial = {field: getattr(endpoint, field) for field in ENDPOINT_CONFIG_FIELDS}
        return cls(data, initial=initial)

    def service_arguments(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~apps.models_registry.services.model_endpoint_save`."""
        data = dict(self.cleaned_data)
        remove = data.pop("remove_api_key")
        data["api_key"] = "" if remove else (data["api_key"] or None)
        return data
