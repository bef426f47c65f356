"""Item stimuli: which uploads are accepted, the names they are stored under, how they are served.

A stimulus is accepted only if its first bytes (sniffed with ``filetype``; never its name or
the browser's content type) show one of :data:`MEDIA_TYPES`: JPEG, PNG, GIF or WebP images;
MP3, M4A, WAV, FLAC or Ogg audio; MP4 or WebM video. Everything else is refused, SVG and HTML
included: both can carry scripts that would run on the studio's origin. It is stored under a
random name (``uuid4`` hex) with the extension of its sniffed type.

:func:`media_response` serves a stored stimulus with the sniffed type, ``nosniff``,
``Content-Security-Policy: sandbox`` and an inline ``Content-Disposition``, in 64 KiB parts;
it answers byte ranges (players seek with them), or hands the file to the proxy with
``X-Accel-Redirect`` (``settings.MEDIA_ACCEL_REDIRECT``, nginx) or ``X-Sendfile``
(``settings.MEDIA_X_SENDFILE``, Apache). Files stored before these checks are sniffed again
and not served unless accepted.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import IO
from urllib.parse import quote
from uuid import uuid4

import filetype
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db.models.fields.files import FieldFile
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import content_disposition_header

from apps.items.models import Item
from apps.items.uploads import RefusedUpload

_SNIFF_BYTES = 8192  # what filetype reads
_IMAGE = frozenset({Item.Kind.IMAGE})
_AUDIO = frozenset({Item.Kind.AUDIO})
_AUDIO_OR_VIDEO = frozenset({Item.Kind.AUDIO, Item.Kind.VIDEO})


@dataclass(frozen=True, slots=True)
class MediaType:
    """An accepted stimulus type: served as ``mime``, stored as ``.extension``, for ``kinds``."""

    mime: str
    extension: str
    label: str
    kinds: frozenset[str]

    @property
    def description(self) -> str:
        """In words, for messages: "an image (PNG)", "audio (WAV)"."""
        category = {"image": "an image", "audio": "audio", "video": "a video"}
        return f"{category[self.mime.split('/')[0]]} ({self.label})"


MEDIA_TYPES: dict[str, MediaType] = {  # keyed by the MIME type filetype reports
    "image/jpeg": MediaType("image/jpeg", "jpg", "JPEG", _IMAGE),
    "image/png": MediaType("image/png", "png", "PNG", _IMAGE),
    "image/gif": MediaType("image/gif", "gif", "GIF", _IMAGE),
    "image/webp": MediaType("image/webp", "webp", "WebP", _IMAGE),
    "audio/mpeg": MediaType("audio/mpeg", "mp3", "MP3", _AUDIO),
    "audio/mp4": MediaType("audio/mp4", "m4a", "M4A", _AUDIO),
    "audio/x-wav": MediaType("audio/wav", "wav", "WAV", _AUDIO),
    "audio/x-flac": MediaType("audio/flac", "flac", "FLAC", _AUDIO),
    # Ogg, MP4 and WebM are containers: audio alone or a video, told apart only by decoding.
    "audio/ogg": MediaType("audio/ogg", "ogg", "Ogg", _AUDIO_OR_VIDEO),
    "video/mp4": MediaType("video/mp4", "mp4", "MP4", _AUDIO_OR_VIDEO),
    "video/webm": MediaType("video/webm", "webm", "WebM", _AUDIO_OR_VIDEO),
}
ACCEPTED = "JPEG, PNG, GIF, WebP; MP3, M4A, WAV, FLAC, Ogg; MP4, WebM"


def media_type(file: IO[bytes], *, name: str) -> MediaType:
    """The accepted type of a stimulus, sniffed from its first bytes (the position is kept).

    Raises
    ------
    ValidationError
        If the bytes are not one of :data:`MEDIA_TYPES` (SVG and HTML never are).
    """
    position = file.tell()
    head = file.read(_SNIFF_BYTES)
    file.seek(position)
    guess = filetype.guess(head)
    found = MEDIA_TYPES.get(guess.mime) if guess else None
    if found is None:
        what = f" ({guess.mime})" if guess else ""
        raise ValidationError(
            f"{name}{what} is not an accepted image, audio or video file ({ACCEPTED}). "
            "SVG and HTML are refused: they can carry scripts. Convert SVG to PNG."
        )
    return found


def stimulus_file(upload: File, *, kind: str) -> File:
    """An uploaded stimulus, checked, to assign to ``Item.media``: it saves under a random name.

    Raises
    ------
    ValidationError
        If the upload is larger than ``settings.UPLOAD_MAX_MEDIA_BYTES``, is not an accepted
        type (:func:`media_type`), or its type does not suit an item of ``kind``.
    """
    name = PurePath(upload.name or "").name
    limit = settings.UPLOAD_MAX_MEDIA_BYTES
    if upload.size is not None and upload.size > limit:
        raise ValidationError(str(RefusedUpload("media", name, limit)))
    found = media_type(upload, name=name)
    if kind != Item.Kind.TEXT and kind not in found.kinds:
        raise ValidationError(f"{name} is {found.description}; this item is {kind}.")
    return File(upload, name=f"{uuid4().hex}.{found.extension}")


class MediaFileResponse(FileResponse):
    """A file response that ASGI servers (uvicorn) stream in 64 KiB parts, read in a thread.

    Django's own consumes a file's synchronous iterator whole (``list``) before sending it
    under ASGI: every request for a 50 MB video would hold all of it in memory.
    """

    block_size = 64 * 1024

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = iter(self.streaming_content)
        read = sync_to_async(next, thread_sensitive=False)
        while (part := await read(parts, None)) is not None:
            yield part


def media_response(request: HttpRequest, media: FieldFile) -> HttpResponseBase:
    """Serve a stored stimulus safely: its sniffed type, sandboxed, inline, by byte ranges.

    Raises :class:`~django.http.Http404` when the file is missing or not an accepted type.
    """
    try:
        file = media.storage.open(media.name, "rb")
    except FileNotFoundError:
        raise Http404("No such media file.") from None
    try:
        found = media_type(file, name=media.name)
    except ValidationError:
        file.close()
        raise Http404("Not a media file.") from None
    filename = PurePath(media.name).name
    headers = {
        "Content-Security-Policy": "sandbox",
        "X-Content-Type-Options": "nosniff",
        "Accept-Ranges": "bytes",
        "Cache-Control": "private, max-age=3600",
    }
    if settings.MEDIA_ACCEL_REDIRECT or settings.MEDIA_X_SENDFILE:
        file.close()
        response = HttpResponse(content_type=found.mime, headers=headers)
        response["Content-Disposition"] = content_disposition_header(False, filename)
        if settings.MEDIA_ACCEL_REDIRECT:
            response["X-Accel-Redirect"] = settings.MEDIA_ACCEL_REDIRECT + quote(media.name)
        else:
            response["X-Sendfile"] = media.path
        return response
    size = file.size
    byte_range = _byte_range(request.headers.get("Range", ""), size)
    if byte_range is None:
        return MediaFileResponse(file, content_type=found.mime, filename=filename, headers=headers)
    if byte_range == ():
        file.close()
        headers["Content-Range"] = f"bytes */{size}"
        return HttpResponse(status=416, headers=headers)
    start, end = byte_range
    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(end - start + 1)
    return MediaFileResponse(
        _Slice(file, start, end - start + 1),
        status=206,
        content_type=found.mime,
        filename=filename,
        headers=headers,
    )


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def _byte_range(header: str, size: int) -> tuple[int, int] | tuple[()] | None:
    """The first and last byte asked for by a single-range ``Range`` header.

    ``None`` to send the whole file (no header, several ranges, or one not understood, as RFC
    9110 allows); ``()`` when the range lies outside the file (416).
    """
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":  # the last N bytes
        start, end = size - min(int(last), size), size - 1
        return (start, end) if int(last) and size else ()
    start = int(first)
    if last and int(last) < start:
        return None  # not a valid range: ignored
    if start >= size:
        return ()
    return start, min(int(last), size - 1) if last else size - 1


class _Slice:
    """``length`` bytes of an open file from ``start``, read as :class:`FileResponse` streams."""

    def __init__(self, file: IO[bytes], start: int, length: int) -> None:
        file.seek(start)
        self.file = file
        self.left = length

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(self.left if size < 0 else min(size, self.left))
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.file.close()
