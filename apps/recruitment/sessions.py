"""A participant's browser session: signed in by the recruitment link, and marked as such.

The mark lets the annotator queue ask "is this a recruited participant?" without a query for
everyone else (the queue's answer path has a query budget).
"""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRedirect

from apps.recruitment.models import Participant
from apps.recruitment.selectors import participant_redirect
from apps.studies.models import Study
from core.auth import BACKEND

SESSION_KEY = "recruitment_participant"
RESUME_KEY = "recruitment_resume_code"  # shown on the participant's pages (the row keeps a hash)


def participant_session_start(request: HttpRequest, participant: Participant) -> None:
    """Sign the participant's account in (no password: the platform id is the key)."""
    if request.user != participant.user:
        login(request, participant.user, backend=BACKEND)
    request.session[SESSION_KEY] = participant.pk


def is_participant_session(request: HttpRequest) -> bool:
    """Whether this session was opened by a recruitment link."""
    return SESSION_KEY in request.session


def participant_elsewhere(request: HttpRequest, study: Study, *, here: str) -> HttpResponse | None:
    """For a work page (``here``): send a recruited participant whose package is done, timed
    out, or worked on another page there; ``None`` for everyone else (no query for them)."""
    if not is_participant_session(request):
        return None
    url = participant_redirect(user=request.user, study=study, here=here)
    if url is None:
        return None
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
