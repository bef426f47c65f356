"""Who may open a study's pages and API routes: one policy for both.

Visibility first: a study in which the user has no role does not exist for them, so its URLs
answer 404 and never reveal it. A member whose role does not fit is refused with 403: the
study is theirs to know about, the page is not theirs to use. Anonymous visitors of pages are
sent to sign in first (``login_required``); the API answers them 401.

The API's permission classes (:mod:`apps.studies.api.permissions`) read the same role sets.
"""

from __future__ import annotations

from collections.abc import Collection

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from apps.studies.models import Membership, Study
from apps.studies.selectors import study_with_role

MEMBER_ROLES: frozenset[str] = frozenset(Membership.Role.values)
MANAGER_ROLE: frozenset[str] = frozenset({Membership.Role.MANAGER})
ANNOTATOR_ROLE: frozenset[str] = frozenset({Membership.Role.ANNOTATOR})
#: Who may read every answer and adjudicate disputed items: managers and reviewers.
ADJUDICATOR_ROLES: frozenset[str] = frozenset({Membership.Role.MANAGER, Membership.Role.REVIEWER})

MANAGERS_ONLY = "Only managers of this study may open this page."
ANNOTATORS_ONLY = "Only annotators of this study may open this page."
ADJUDICATORS_ONLY = "Only managers and reviewers of this study may open this page."


def study_for(
    request: HttpRequest,
    study_id: int | str,
    *,
    roles: Collection[str] = MEMBER_ROLES,
    refusal: str = "Your role in this study does not give access to this page.",
) -> Study:
    """The study of the URL, annotated with the user's ``role``.

    Raises ``Http404`` when the user has no role in it (or does not exist) and
    ``PermissionDenied`` (403, with ``refusal``) when their role is not in ``roles``.
    """
    study = study_with_role(user=request.user, pk=study_id)
    if study is None:
        raise Http404("No such study.")
    if study.role not in roles:  # type: ignore[attr-defined]  # annotated by the selector
        raise PermissionDenied(refusal)
    return study


def managed_study(request: HttpRequest, study_id: int | str) -> Study:
    """The study if the user manages it: 404 for outsiders, 403 for its annotators."""
    return study_for(request, study_id, roles=MANAGER_ROLE, refusal=MANAGERS_ONLY)


def annotated_study(request: HttpRequest, study_id: int | str) -> Study:
    """The study if the user annotates it: 404 for outsiders, 403 for its managers."""
    return study_for(request, study_id, roles=ANNOTATOR_ROLE, refusal=ANNOTATORS_ONLY)


def adjudicated_study(request: HttpRequest, study_id: int | str) -> Study:
    """The study if the user manages or reviews it: 404 for outsiders, 403 for annotators."""
    return study_for(request, study_id, roles=ADJUDICATOR_ROLES, refusal=ADJUDICATORS_ONLY)
