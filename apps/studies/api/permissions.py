"""Membership-based access for every app's API views (the pages' policy: apps/studies/access).

Visibility comes first and is decided by scoping, not here: a study the user has no role in is
simply not in the queryset, so its URLs answer 404 and never reveal that it exists. What a
member may *do* is decided by role, and refused with 403:

- :class:`IsStudyManagerOrReadOnly`: members read, managers write.
- :class:`IsStudyManager`: managers only, reads included (memberships, export).
- :class:`IsStudyAnnotator`: annotators only (their queue: next, skip, undo).

On a study's own routes (``/api/studies/{id}/...``) the role is checked against the object;
on routes nested under a study (``/api/studies/{study_pk}/questions/``), views use
:class:`InStudyMixin` and the role is checked before anything else runs.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from apps.studies.access import ANNOTATOR_ROLE, MANAGER_ROLE, MEMBER_ROLES
from apps.studies.models import Study
from apps.studies.selectors import can_create_studies, study_with_role

# For the schema of nested views without a model queryset to derive the parameter's type from.
STUDY_PK = OpenApiParameter(
    "study_pk", OpenApiTypes.INT, OpenApiParameter.PATH, description="The study's id."
)


class InStudyMixin:
    """For ViewSets routed under ``studies/{study_pk}/``: that study, if the user has a role."""

    request: Request
    kwargs: dict[str, Any]

    @cached_property
    def study(self) -> Study:
        """The study of the URL, annotated with the user's ``role``; 404 for anyone else's."""
        study = study_with_role(user=self.request.user, pk=self.kwargs["study_pk"])
        if study is None:
            raise Http404("No such study.")
        return study


class _StudyRolePermission(BasePermission):
    read_roles: frozenset[str]
    write_roles: frozenset[str]

    def _allows(self, request: Request, role: str | None) -> bool:
        roles = self.read_roles if request.method in SAFE_METHODS else self.write_roles
        return role in roles

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(view, InStudyMixin):
            return self._allows(request, view.study.role)
        return True  # a study's own routes: checked against the object

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if isinstance(view, InStudyMixin):
            return True  # the object belongs to view.study, checked above
        return self._allows(request, obj.role)  # a Study from studies_with_role


class IsStudyManagerOrReadOnly(_StudyRolePermission):
    message = "Only managers of this study may change it."
    read_roles = MEMBER_ROLES
    write_roles = MANAGER_ROLE


class IsStudyManager(_StudyRolePermission):
    message = "Only managers of this study may do this."
    read_roles = write_roles = MANAGER_ROLE


class IsStudyAnnotator(_StudyRolePermission):
    message = "Only annotators of this study have a queue."
    read_roles = write_roles = ANNOTATOR_ROLE


class CanCreateStudies(BasePermission):
    """Gates the ``create`` action: it needs the ``studies.manage_studies`` permission."""

    message = "You may not create studies."

    def has_permission(self, request: Request, view: Any) -> bool:
        return view.action != "create" or can_create_studies(user=request.user)
