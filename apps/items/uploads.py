"""Size limits of uploaded files, enforced while the request body streams in.

A view puts an :class:`UploadLimits` handler first in ``request.upload_handlers`` (with
:func:`limit_uploads`) before anything reads ``request.POST`` or ``request.FILES``. The handler
counts each file's bytes as they arrive and drops a file (``SkipFile``: nothing more of it is
kept, in memory or on disk) the moment it passes its field's limit; the view then answers 413
naming each refused file. Files in fields the view does not read are dropped unread.

Django's CSRF middleware reads ``request.POST`` before the view runs, which would parse the body
before the limits are in place: page views that limit uploads are therefore ``csrf_exempt`` and
check the token themselves with ``csrf_protect`` once the handler is installed (the pattern of
Django's upload handler documentation). DRF views are CSRF-exempt already and install the
handler in ``initialize_request``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat


@dataclass(frozen=True, slots=True)
class RefusedUpload:
    """A file dropped for its size: its field, its name and the limit it passed."""

    field: str
    name: str
    limit: int

    def __str__(self) -> str:
        return f"{self.name} is larger than {filesizeformat(self.limit)}, the limit for this file."


class UploadLimits(FileUploadHandler):
    """Drops each file past its field's limit (bytes, by field name) and lists it in ``refused``."""

    def __init__(self, request: HttpRequest, *, limits: dict[str, int]) -> None:
        super().__init__(request)
        self.limits = limits
        self.refused: list[RefusedUpload] = []

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        if field_name not in self.limits:
            raise SkipFile

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        limit = self.limits[self.field_name]
        if start + len(raw_data) > limit:
            self.refused.append(RefusedUpload(self.field_name, self.file_name or "", limit))
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handlers make the file


def limit_uploads(request: HttpRequest, **limits: int) -> UploadLimits:
    """Limit the files of ``request`` by field (``media=50_000_000``); call before reading it."""
    handler = UploadLimits(request, limits=limits)
    request.upload_handlers.insert(0, handler)
    return handler
