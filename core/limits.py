"""Limits on what one request may send, shared by the services, forms and API serializers.

Every count, size and number a user controls is checked against a stated limit before any
work is done, so no request's cost grows without bound in what it sends and nothing reaches
the database that its columns cannot hold (a Python int beyond 64 bits made SQLite's driver
raise ``OverflowError``, a 500). The limits and their settings are listed in docs/security.md.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from rest_framework import serializers

MAX_ID = 2**63 - 1
"""The largest id a filter accepts: a 64-bit primary key (larger ones cannot name a row)."""

MAX_TIME_SPENT_MS = 24 * 60 * 60 * 1000
"""The longest time an answer may report having taken: a day, in milliseconds."""


MAX_ITEM_TEXT = 1_000_000
"""The longest text an item may hold, in characters (a long article fits; a 200 MB cell not)."""

MAX_LINE_CHARS = 2 * 1024 * 1024
"""The longest line of a JSON Lines upload, in characters (a vector of 65,536 numbers fits)."""

MAX_VECTOR_LENGTH = 65_536
"""The most numbers in one feature or attention vector of a model run."""

MAX_NPZ_ENTRIES = 16
"""The most arrays an NPZ upload may hold (a model run names at most five fields)."""


def max_labels() -> int:
    """The most labels a categorical question may have (``QUESTION_MAX_LABELS``, 100).

    The live quality state keeps a labels x labels table per annotator pair, so its memory and
    time grow with the square of the scale: 6,000 labels took 3.1 GB for one answer.
    """
    return int(settings.QUESTION_MAX_LABELS)


def labels_count_check(count: int, *, field: str = "labels") -> None:
    """Refuse a scale of more than :func:`max_labels` labels, naming the limit."""
    if count > max_labels():
        raise ValidationError(
            {
                field: f"{count} labels: a question has at most {max_labels()} "
                "(the setting QUESTION_MAX_LABELS)."
            }
        )


def time_spent_check(time_spent_ms: int | None) -> None:
    """Refuse a time spent below 0 or above :data:`MAX_TIME_SPENT_MS` (field ``time_spent_ms``)."""
    if time_spent_ms is not None and not 0 <= time_spent_ms <= MAX_TIME_SPENT_MS:
        raise ValidationError(
            {"time_spent_ms": f"Give a time spent from 0 to {MAX_TIME_SPENT_MS} ms (a day)."}
        )


def time_spent_field() -> serializers.IntegerField:
    """The API field of an answer's time spent, with the limits of :func:`time_spent_check`."""
    return serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TIME_SPENT_MS
    )


def id_filter_field(help_text: str) -> serializers.IntegerField:
    """An optional id in a query string: a 64-bit integer from 0 (0 names nothing)."""
    return serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_ID, help_text=help_text
    )
