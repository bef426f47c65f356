"""Translate the services' Django exceptions into DRF responses.

Services raise :class:`django.core.exceptions.ValidationError` (field errors in ``message_dict``)
and :class:`~django.core.exceptions.PermissionDenied`. DRF already turns ``PermissionDenied``
into 403 and ``Http404`` into 404; this handler adds ``ValidationError`` -> 400 with the same
body shape as a serializer error: ``{"field": ["message", ...]}``, with the model's
``__all__`` errors under ``non_field_errors``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.template.defaultfilters import filesizeformat
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler


def _detail(exc: DjangoValidationError) -> dict[str, list[str]]:
    if not hasattr(exc, "error_dict"):
        return {api_settings.NON_FIELD_ERRORS_KEY: exc.messages}
    return {
        api_settings.NON_FIELD_ERRORS_KEY if field == NON_FIELD_ERRORS else field: messages
        for field, messages in exc.message_dict.items()
    }


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django ``ValidationError`` -> 400 with field errors, and a body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` -> 413 (Django alone answers an HTML 400)."""
    if isinstance(exc, RequestDataTooBig):
        limit = filesizeformat(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        detail = f"The request body is larger than {limit}; send less at a time."
        return Response({"detail": detail}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=_detail(exc))
    return drf_exception_handler(exc, context)


@contextmanager
def service_fields_as(renames: Mapping[str, str]) -> Iterator[None]:
    """Report a service's field errors under the request's field names.

    A service names the fields of its own arguments (``value``); the client sent another
    (``answers``). Errors of fields not in ``renames`` keep their names.
    """
    try:
        yield
    except DjangoValidationError as exc:
        detail: dict[str, list[str]] = {}
        for field, messages in _detail(exc).items():
            detail.setdefault(renames.get(field, field), []).extend(messages)
        raise exceptions.ValidationError(detail=detail) from exc
