"""Helpers of the API tests: submitting an answer through the API."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from rest_framework.response import Response
from rest_framework.test import APIClient

from apps.annotations.selectors import assignment_next

ClientFor = Callable[..., APIClient]


def submit(
    client: APIClient,
    assignment_id: int,
    answer: Any = "positive",
    *,
    key: uuid.UUID | str | None = None,
    question: str = "sentiment",
    include_next: bool = False,
) -> Response:
    """POST one answer to ``/api/annotations/`` (``include_next``: ask for the next item)."""
    body = {
        "assignment": assignment_id,
        "answers": {question: answer},
        "idempotency_key": str(key or uuid.uuid4()),
        "time_spent_ms": 900,
    }
    if include_next:
        body["include_next"] = True
    return client.post("/api/annotations/", body, format="json")


def next_assignment_id(study: Any, annotator: Any) -> int:
    """The id of the annotator's next unfinished assignment."""
    return assignment_next(annotator=annotator, study=study).pk
