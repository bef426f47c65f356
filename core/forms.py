"""Form habits shared by every page: binding to POST only, and services' errors on the form."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.core.exceptions import ValidationError
from django.http import HttpRequest, QueryDict

T = TypeVar("T")
_INDEXED_KEY = re.compile(r"^(?P<name>\w+)\[(?P<index>\d+)\]$")


def posted(request: HttpRequest) -> QueryDict | None:
    """The POST data to bind a form to, or ``None`` on GET (an empty POST still binds)."""
    return request.POST if request.method == "POST" else None


class ServiceFormMixin(forms.BaseForm):
    """Shared form habits: CSS hooks for required and invalid fields, service errors mapping.

    ``row_names`` names the rows of list-valued fields for errors keyed ``"field[i]"``. Views
    call ``form.apply(service, ...)`` after ``is_valid()`` and check ``form.errors`` after it.
    """

    required_css_class = "required"
    error_css_class = "has-error"
    row_names: dict[str, str] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")  # labels read "Name *", not "Name: *"
        super().__init__(*args, **kwargs)

    @property
    def http_status(self) -> int:
        """422 for a submitted form with errors (htmx swaps it in too), else 200."""
        return 422 if self.is_bound and self.errors else 200

    def apply(self, service: Callable[..., T], /, **kwargs: Any) -> T | None:
        """Call a service; on ``ValidationError`` show it on the form and return ``None``."""
        try:
            return service(**kwargs)
        except ValidationError as exc:
            self.add_service_error(exc)
            return None

    def add_service_error(self, error: ValidationError) -> None:
        """Show a service's ``ValidationError`` next to the matching field, else above the form."""
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)
            return
        for key, messages in error.message_dict.items():
            name, prefix = key, ""
            if match := _INDEXED_KEY.match(key):
                name = match["name"]
                row = self.row_names.get(name, "Row")
                prefix = f"{row} {int(match['index']) + 1}: "
            field = name if name in self.fields else None
            for message in messages:
                self.add_error(field, prefix + message)


class JSONTextField(forms.Field):
    """JSON typed in a text box, an object or a list (``shape``); a syntax error names its
    line and column (Django's JSONField says only "Enter a valid JSON.")."""

    widget = forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "mono"})

    def __init__(self, *, shape: type[dict] | type[list], example: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shape, self.example = shape, example

    def to_python(self, value: Any) -> Any:
        if isinstance(value, self.shape):
            return value
        text = str(value or "").strip()
        if not text:
            return self.shape()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"Line {exc.lineno}, column {exc.colno}: {exc.msg}.", code="invalid"
            ) from None
        if not isinstance(data, self.shape):
            what = "an object in braces" if self.shape is dict else "a list in brackets"
            raise ValidationError(f"Give {what}, e.g. {self.example}.", code="invalid")
        return data

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict | list):
            return json.dumps(value, indent=2) if value else ""
        return value
