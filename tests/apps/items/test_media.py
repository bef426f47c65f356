"""The stimulus allow-list (sniffed from the first bytes) and the byte ranges media answers."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from apps.items.media import _byte_range, media_type, stimulus_file

# The first bytes of each accepted type, as their format specifications put them.
SAMPLES = {
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/gif": b"GIF89a",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    "audio/mpeg": b"ID3\x03\x00",
    "audio/mp4": b"\x00\x00\x00\x20ftypM4A ",
    "audio/wav": b"RIFF\x00\x00\x00\x00WAVEfmt ",
    "audio/flac": b"fLaC",
    "audio/ogg": b"OggS",
    "video/mp4": b"\x00\x00\x00\x20ftypisom",
    "video/webm": b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81\x04\x42\xf3"
    b"\x81\x08\x42\x82\x84webm",
}
EXTENSIONS = {"image/jpeg": "jpg", "audio/mpeg": "mp3", "audio/mp4": "m4a", "video/mp4": "mp4"}


@pytest.mark.parametrize(("mime", "head"), SAMPLES.items())
def test_accepted_types_are_served_as_their_standard_type(mime, head):
    found = media_type(io.BytesIO(head + bytes(64)), name="x")
    assert found.mime == mime
    assert found.extension == EXTENSIONS.get(mime, mime.split("/")[1])


@pytest.mark.parametrize(
    "head",
    [
        b"<svg xmlns='http://www.w3.org/2000/svg'/>",
        b"<html><body>",
        b"%PDF-1.7",
        b"MZ\x90\x00",  # a Windows program
        b"II*\x00",  # TIFF: an image, but not one browsers show
        b"",
    ],
)
def test_anything_else_is_refused(head):
    with pytest.raises(ValidationError, match="not an accepted image, audio or video file"):
        media_type(io.BytesIO(head + bytes(64)), name="x")


@pytest.mark.parametrize(
    ("mime", "kind", "accepted"),
    [
        ("image/png", "image", True),
        ("image/png", "video", False),
        ("audio/wav", "audio", True),
        ("audio/wav", "video", False),
        ("video/webm", "audio", True),  # containers: audio alone or a video
        ("video/mp4", "audio", True),
        ("audio/ogg", "video", True),
        ("video/mp4", "image", False),
        ("image/gif", "text", True),  # a text item's file is not shown; only the type counts
    ],
)
def test_the_type_must_suit_the_item_kind(mime, kind, accepted):
    upload = ContentFile(SAMPLES[mime] + bytes(64), name="upload.bin")
    if accepted:
        stored = stimulus_file(upload, kind=kind)
        assert stored.name.endswith("." + EXTENSIONS.get(mime, mime.split("/")[1]))
    else:
        with pytest.raises(ValidationError, match=f"this item is {kind}"):
            stimulus_file(upload, kind=kind)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("", None),
        ("bytes=0-99", (0, 99)),
        ("bytes=100-", (100, 999)),
        ("bytes=900-5000", (900, 999)),
        ("bytes=-100", (900, 999)),
        ("bytes=-5000", (0, 999)),
        ("bytes=999-999", (999, 999)),
        ("bytes=1000-", ()),  # past the end: 416
        ("bytes=-0", ()),
        ("bytes=50-10", None),  # invalid: ignored, the whole file
        ("bytes=0-1,5-6", None),  # several ranges: the whole file
        ("items=0-1", None),
        ("bytes=-", None),
    ],
)
def test_byte_ranges(header, expected):
    assert _byte_range(header, 1000) == expected
