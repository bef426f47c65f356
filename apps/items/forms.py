"""The item import form: one CSV or JSON Lines file, plus the media files it names."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile

from apps.items.importing import format_for_name
from core.forms import ServiceFormMixin


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Any number of files (``<input type=file multiple>``), cleaned to a list."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[UploadedFile]:
        uploads = data if isinstance(data, list | tuple) else [data]
        return [
            super(MultipleFileField, self).clean(upload, initial) for upload in uploads if upload
        ]


class ItemImportForm(ServiceFormMixin, forms.Form):
    """The item file and the optional media files its ``media`` column names."""

    file = forms.FileField(
        label="Item file",
        help_text="CSV with a header row, JSON Lines (.jsonl / .ndjson), UTF-8, or Parquet.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.jsonl,.ndjson,.parquet"}),
    )
    media = MultipleFileField(
        label="Media files",
        required=False,
        help_text="Images, audio or video named in the file's media column (select several).",
        widget=MultipleFileInput(attrs={"accept": "image/*,audio/*,video/*"}),
    )

    def clean(self) -> dict[str, Any]:
        """Tell the format from the file name's extension (``cleaned_data["format"]``)."""
        data = super().clean()
        if upload := data.get("file"):
            try:
                data["format"] = format_for_name(upload.name)
            except ValidationError as exc:
                self.add_error("file", exc.messages)
        return data

    def files_by_name(self) -> dict[str, UploadedFile]:
        """The media uploads keyed by their file names, as the import's ``media`` column uses."""
        return {upload.name: upload for upload in self.cleaned_data["media"]}
