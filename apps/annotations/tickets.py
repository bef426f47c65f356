"""Signed *tickets*: what an annotation form shows, and when it was shown.

A rendered form carries a ticket naming what it shows (an assignment, a pair of items) and the
moment it was shown, signed with the site's key. The server learns from it what is answered
and how long the answer took, without trusting hidden fields or the browser's clock.
"""

from __future__ import annotations

import time
from typing import Any

from django.core import signing
from django.core.exceptions import ValidationError

# Time spent is stored in a PositiveIntegerField; a tab left open for weeks must still fit.
MAX_TIME_SPENT_MS = 2**31 - 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def ticket_issue(payload: dict[str, Any], *, salt: str) -> str:
    """Sign ``payload`` together with the current time."""
    return signing.dumps({**payload, "shown_at": _now_ms()}, salt=salt)


def ticket_read(ticket: str, *, salt: str, stale_message: str) -> tuple[dict[str, Any], int]:
    """The signed payload and the milliseconds since it was shown.

    Raises ``ValidationError(stale_message)`` when the ticket was not signed here with ``salt``.
    """
    try:
        shown = signing.loads(ticket, salt=salt)
    except signing.BadSignature:
        raise ValidationError(stale_message) from None
    return shown, min(max(0, _now_ms() - int(shown["shown_at"])), MAX_TIME_SPENT_MS)
