"""API of studies, their questions and their members."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from analytics.intervals import quality_record
from analytics.selectors import latest_snapshot
from apps.accounts.api.serializers import InvitationAddressedSerializer
from apps.accounts.services import annotator_create, invitation_address
from apps.exchange.api import LabelStudioImportSerializer
from apps.exchange.label_studio import label_studio_import
from apps.studies.api.permissions import (
    CanCreateStudies,
    InStudyMixin,
    IsStudyManager,
    IsStudyManagerOrReadOnly,
)
from apps.studies.api.serializers import (
    AnnotatorCreateSerializer,
    MembershipAddSerializer,
    MembershipSerializer,
    QualityRecordSerializer,
    QuestionSerializer,
    QuestionWriteSerializer,
    StudySerializer,
    StudyStatusSerializer,
    StudyWriteSerializer,
)
from apps.studies.kinds import question_kind
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import can_create_studies, studies_with_role
from apps.studies.services import (
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

    @extend_schema(
        request={"multipart/form-data": LabelStudioImportSerializer},
        responses={201: StudySerializer},
        description="Create a closed study from a Label Studio JSON export: one item per task, "
        "one categorical question per choices/rating control, the annotations as finished "
        "answers (needs the `studies.manage_studies` permission). All or nothing: what has no "
        "counterpart here is listed task by task (400) and nothing is stored.",
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import/label-studio",
        parser_classes=[MultiPartParser],
    )
    def import_label_studio(self, request: Request) -> Response:
        if not can_create_studies(user=request.user):
            raise PermissionDenied(CanCreateStudies.message)
        serializer = LabelStudioImportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        study = label_studio_import(
            manager=request.user,
            stream=serializer.validated_data["file"],
            name=serializer.validated_data["name"],
            label_config=serializer.validated_data["label_config"],
        )
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

    @extend_schema(responses=QualityRecordSerializer)
    @action(detail=True, methods=["get"], permission_classes=[IsAuthenticated, IsStudyManager])
    def quality(self, request: Request, study_pk: str, pk: str) -> Response:
        """The question's latest quality figures (managers): per annotator and study-wide, each
        with its 95 % interval and the evidence behind it, when the intervals were computed,
        and the rules' current flags. 404 before the first figures."""
        question = self.get_object()
        snapshot = latest_snapshot(question=question)
        if snapshot is None:
            raise NotFound("No quality figures yet.")
        return Response(quality_record(snapshot, question_kind(question.kind)))


class MembershipViewSet(InStudyMixin, mixins.ListModelMixin, GenericViewSet):
    """Who takes part in a study, and in which role. Managers only."""

    serializer_class = MembershipSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]

    def get_queryset(self) -> QuerySet[Membership]:
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return self.study.memberships.select_related("user")

    @extend_schema(request=MembershipAddSerializer, responses={202: InvitationAddressedSerializer})
    def create(self, request: Request, study_pk: str) -> Response:
        """Invite an existing account in a role; it becomes a member only when it accepts.

        The answer is the same whether or not an account has this username.
        """
        serializer = MembershipAddSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        invitation = invitation_address(
            study=self.study, created_by=request.user, **serializer.validated_data
        )
        return Response(
            InvitationAddressedSerializer(invitation).data, status=status.HTTP_202_ACCEPTED
        )

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
