"""API of studies, their questions and their members."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts.services import annotator_create
from apps.studies.api.permissions import (
    CanCreateStudies,
    InStudyMixin,
    IsStudyManager,
    IsStudyManagerOrReadOnly,
    studies_with_role,
)
from apps.studies.api.serializers import (
    AnnotatorCreateSerializer,
    MembershipAddSerializer,
    MembershipSerializer,
    QuestionSerializer,
    QuestionWriteSerializer,
    StudySerializer,
    StudyStatusSerializer,
    StudyWriteSerializer,
)
from apps.studies.models import Membership, Question, Study
from apps.studies.services import (
    membership_add,
    question_create,
    question_update,
    study_create,
    study_set_status,
    study_update,
)


class StudyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Studies in which you have a role, with that role. Members read; managers change."""

    serializer_class = StudySerializer
    permission_classes = [IsAuthenticated, CanCreateStudies, IsStudyManagerOrReadOnly]

    def get_queryset(self) -> QuerySet[Study]:
        return studies_with_role(user=self.request.user)

    @extend_schema(
        request=StudyWriteSerializer,
        responses={201: StudySerializer},
        description="Create a draft study (needs the `studies.manage_studies` permission); "
        "you become its manager.",
    )
    def create(self, request: Request) -> Response:
        serializer = StudyWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        study = study_create(creator=request.user, **serializer.validated_data)
        study = self.get_queryset().get(pk=study.pk)  # with your role
        return Response(StudySerializer(study).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=StudyWriteSerializer, responses=StudySerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        study = self.get_object()
        serializer = StudyWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        study_update(study=study, **serializer.validated_data)
        return Response(StudySerializer(study).data)

    @extend_schema(responses=StudySerializer)
    @action(
        detail=True, methods=["post"], url_path="status", serializer_class=StudyStatusSerializer
    )
    def set_status(self, request: Request, pk: str) -> Response:
        """Open (``running``), pause (``draft``) or close (``closed``) the study. Managers."""
        study = self.get_object()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        study_set_status(study=study, status=serializer.validated_data["status"])
        return Response(StudySerializer(study).data)


class QuestionViewSet(
    InStudyMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet
):
    """A study's questions with their labels. Members read; managers create and change."""

    serializer_class = QuestionSerializer
    permission_classes = [IsAuthenticated, IsStudyManagerOrReadOnly]

    def get_queryset(self) -> QuerySet[Question]:
        if getattr(self, "swagger_fake_view", False):
            return Question.objects.none()
        return self.study.questions.prefetch_related("labels")

    def _data(self, question: Question) -> dict[str, Any]:
        return QuestionSerializer(self.get_queryset().get(pk=question.pk)).data

    @extend_schema(request=QuestionWriteSerializer, responses={201: QuestionSerializer})
    def create(self, request: Request, study_pk: str) -> Response:
        serializer = QuestionWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        question = question_create(study=self.study, **serializer.validated_data)
        return Response(self._data(question), status=status.HTTP_201_CREATED)

    @extend_schema(request=QuestionWriteSerializer, responses=QuestionSerializer)
    def partial_update(self, request: Request, study_pk: str, pk: str) -> Response:
        question = self.get_object()
        serializer = QuestionWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        question_update(question=question, **serializer.validated_data)
        return Response(self._data(question))


class MembershipViewSet(InStudyMixin, mixins.ListModelMixin, GenericViewSet):
    """Who takes part in a study, and in which role. Managers only."""

    serializer_class = MembershipSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]

    def get_queryset(self) -> QuerySet[Membership]:
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return self.study.memberships.select_related("user")

    @extend_schema(request=MembershipAddSerializer, responses={201: MembershipSerializer})
    def create(self, request: Request, study_pk: str) -> Response:
        """Give an existing account a role (or change its role); idempotent."""
        serializer = MembershipAddSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = membership_add(study=self.study, **serializer.validated_data)
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={201: MembershipSerializer})
    @action(
        detail=False,
        methods=["post"],
        url_path="new-annotator",
        serializer_class=AnnotatorCreateSerializer,
    )
    def new_annotator(self, request: Request, study_pk: str) -> Response:
        """Create an annotator account and add it to the study."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = annotator_create(study=self.study, **serializer.validated_data)
        membership = self.get_queryset().get(user=user)
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)
