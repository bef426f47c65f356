"""A participant's browser session: signed in by the recruitment link, and marked as such.

The mark lets the annotator queue ask "is this a recruited participant?" without a query for
everyone else (the queue's answer path has a query budget).
"""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest

from apps.recruitment.models import Participant

SESSION_KEY = "recruitment_participant"


def participant_session_start(request: HttpRequest, participant: Participant) -> None:
    """Sign the participant's account in (no password: the platform id is the key)."""
    if request.user != participant.user:
        login(request, participant.user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_KEY] = participant.pk


def is_participant_session(request: HttpRequest) -> bool:
    """Whether this session was opened by a recruitment link."""
    return SESSION_KEY in request.session
