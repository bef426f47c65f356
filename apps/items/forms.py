"""The item import form: one CSV or JSON Lines file, plus the media files it names."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile

from apps.items.importing import format_for_name
from apps.items.models import Item
from apps.items.selectors import SORTS, ItemFilter
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


class ItemListForm(forms.Form):
    """The items list's search, filters, order and page (GET parameters, all optional)."""

    q = forms.CharField(
        label="Search", required=False, max_length=200, help_text="External id or text."
    )
    kind = forms.ChoiceField(
        label="Kind", required=False, choices=[("", "Any kind"), *Item.Kind.choices]
    )
    min_answers = forms.IntegerField(label="Answers from", required=False, min_value=0)
    max_answers = forms.IntegerField(label="to", required=False, min_value=0)
    disputed = forms.BooleanField(label="Disputed", required=False)
    flagged = forms.BooleanField(label="Answered by a flagged annotator", required=False)
    sort = forms.ChoiceField(
        label="Order",
        required=False,
        choices=[(key, label) for key, (label, _) in SORTS.items()],
    )
    page = forms.IntegerField(label="Page", required=False, min_value=1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        low, high = data.get("min_answers"), data.get("max_answers")
        if low is not None and high is not None and high < low:
            self.add_error("max_answers", "Must be at least the lower bound.")
        return data

    def filters(self) -> ItemFilter:
        """The cleaned filters (call after ``is_valid()``)."""
        data = self.cleaned_data
        return ItemFilter(
            search=data["q"].strip(),
            kind=data["kind"],
            min_answers=data["min_answers"],
            max_answers=data["max_answers"],
            disputed=data["disputed"],
            flagged=data["flagged"],
            sort=data["sort"] or "position",
        )
