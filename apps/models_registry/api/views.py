"""API of a study's model runs (register one from files, list them, read their figures) and of
its model endpoints (configure, read the status, call again)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.items.uploads import limit_uploads
from apps.models_registry.api.serializers import (
    EndpointSerializer,
    EndpointWriteSerializer,
    EvaluationSerializer,
    ModelRunCreateSerializer,
    ModelRunSerializer,
)
from apps.models_registry.importing import upload_format
from apps.models_registry.models import ModelEndpoint, ModelRun
from apps.models_registry.selectors import model_run_questions
from apps.models_registry.services import (
    ENDPOINT_CONFIG_FIELDS,
    Upload,
    model_endpoint_delete,
    model_endpoint_request,
    model_endpoint_save,
    model_run_delete,
    model_run_register,
    model_runs_request,
)
from apps.studies.api.permissions import STUDY_PK, InStudyMixin, IsStudyManager
from apps.studies.models import Question

UPLOAD_FIELDS = ("predictions", "features", "attention")


@extend_schema(parameters=[STUDY_PK])
class ModelRunViewSet(
    InStudyMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    GenericViewSet,
):
    """Model runs of the study and their DIC / BAE figures. Managers of the study only."""

    serializer_class = ModelRunSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]
    parser_classes = [MultiPartParser, FormParser]

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        """Limit the run's files (``settings.UPLOAD_MAX_MODEL_RUN_BYTES``) before any parsing."""
        self.upload_limits = limit_uploads(
            request, **dict.fromkeys(UPLOAD_FIELDS, settings.UPLOAD_MAX_MODEL_RUN_BYTES)
        )
        return super().initialize_request(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[ModelRun]:
        if getattr(self, "swagger_fake_view", False):
            return ModelRun.objects.none()
        return (
            ModelRun.objects.filter(study=self.study)
            .select_related("question", "created_by")
            .order_by("-created_at", "-id")
        )

    @extend_schema(
        request={"multipart/form-data": ModelRunCreateSerializer},
        responses={
            201: ModelRunSerializer,
            400: OpenApiResponse(
                description="Invalid run: errors keyed by field or file (`predictions`, "
                "`features`, `attention`), each naming line and field. Nothing is stored."
            ),
            413: OpenApiResponse(
                description="A file is larger than the limit (`UPLOAD_MAX_MODEL_RUN_BYTES`): "
                "errors keyed by file. Nothing is stored."
            ),
        },
        description="Register a model run from per-annotator predictions and optional feature "
        "and attention vectors (CSV, JSON Lines or NPZ: the format comes from each file's "
        "extension); all or nothing. The run is evaluated in the background (DIC, BAE, "
        "accuracy, Fleiss' kappa and the reference rows): the response has `evaluating` true "
        "and `evaluation` null; read the run again until `evaluating` is false.",
    )
    def create(self, request: Request, study_pk: str) -> Response:
        serializer = ModelRunCreateSerializer(data=request.data)  # parsed through the limits
        if self.upload_limits.refused:
            errors = {upload.field: [str(upload)] for upload in self.upload_limits.refused}
            return Response(errors, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        question = model_run_questions(study=self.study).filter(key=data["question"]).first()
        if question is None:
            raise ValidationError(
                {"question": "Choose a categorical or continuous question of this study."}
            )
        uploads: dict[str, Upload | None] = {}
        for field in UPLOAD_FIELDS:
            upload = data.get(field)
            try:
                uploads[field] = upload and Upload(upload, upload_format(upload.name))
            except ValidationError as exc:
                raise ValidationError({field: exc.messages}) from exc
        run = model_run_register(
            study=self.study,
            question=question,
            name=data["name"],
            version=data["version"],
            created_by=request.user,
            metadata=data.get("metadata"),
            predictions=uploads["predictions"],  # type: ignore[arg-type]
            features=uploads["features"],
            attention=uploads["attention"],
        )
        return Response(ModelRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        description="Delete the run with its predictions, vectors and evaluations, as its page "
        "does (204)."
    )
    def destroy(self, request: Request, study_pk: str, pk: str) -> Response:
        model_run_delete(run=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=EvaluationSerializer(many=True))
    @action(detail=True, methods=["get"])
    def evaluations(self, request: Request, study_pk: str, pk: str) -> Response:
        """Every evaluation of the run, newest first (the figures' history)."""
        run = self.get_object()
        return Response(EvaluationSerializer(run.evaluations.all(), many=True).data)

    @extend_schema(
        request=None,
        responses={202: ModelRunSerializer},
        description="Ask for a new evaluation of the run on the current answers (keeps the "
        "history). It runs in the background: the response (202) has `evaluating` true and "
        "the previous `evaluation`, if any; read the run again until `evaluating` is false. "
        "Asking again while it is pending or running never evaluates twice at once.",
    )
    @action(detail=True, methods=["post"])
    def recompute(self, request: Request, study_pk: str, pk: str) -> Response:
        run = self.get_object()
        model_runs_request(question_id=run.question_id, run_ids=[run.pk])
        run.refresh_from_db()
        return Response(ModelRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


_ENDPOINT_400 = OpenApiResponse(
    description="Invalid configuration: messages keyed by field. Nothing is stored."
)


@extend_schema(parameters=[STUDY_PK])
class ModelEndpointViewSet(
    InStudyMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    GenericViewSet,
):
    """Model endpoints of the study's categorical questions (one per question), their call
    budget and status. Managers of the study only; the API key is never returned."""

    serializer_class = EndpointSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]

    def get_queryset(self) -> QuerySet[ModelEndpoint]:
        if getattr(self, "swagger_fake_view", False):
            return ModelEndpoint.objects.none()
        return ModelEndpoint.objects.filter(study=self.study).select_related("question")

    def _question(self, key: str) -> Question:
        question = self.study.questions.filter(key=key, kind=Question.Kind.CATEGORICAL).first()
        if question is None:
            raise ValidationError({"question": "Choose a categorical question of this study."})
        return question

    @extend_schema(
        request=EndpointWriteSerializer,
        responses={201: EndpointSerializer, 400: _ENDPOINT_400},
        description="Configure the model endpoint of a categorical question (one per question: "
        "change an existing one with PATCH). Its labels are fetched in the background into a "
        "new model run named after `model` and `version` (the response has `predicting` true); "
        "a question suggests from that run by naming it in `settings.suggestion_run`.",
    )
    def create(self, request: Request, study_pk: str) -> Response:
        serializer = EndpointWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        question = self._question(data.pop("question"))
        if ModelEndpoint.objects.filter(question=question).exists():
            raise ValidationError(
                {"question": f"{question.key} already has a model endpoint: change it (PATCH)."}
            )
        endpoint = model_endpoint_save(question=question, created_by=request.user, **data)
        return Response(EndpointSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=EndpointWriteSerializer(partial=True),
        responses={200: EndpointSerializer, 400: _ENDPOINT_400},
        description="Change the configuration (fields left out keep their value; `api_key` "
        'left out keeps the key, `""` removes it). A new `model` or `version` starts a new run; '
        "the calls are asked for again in the background.",
    )
    def partial_update(self, request: Request, study_pk: str, pk: str) -> Response:
        endpoint = self.get_object()
        serializer = EndpointWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if data.pop("question", endpoint.question.key) != endpoint.question.key:
            raise ValidationError({"question": "An endpoint stays with its question."})
        config = {field: getattr(endpoint, field) for field in ENDPOINT_CONFIG_FIELDS}
        endpoint = model_endpoint_save(
            question=endpoint.question, created_by=request.user, **{**config, **data}
        )
        return Response(EndpointSerializer(endpoint).data)

    @extend_schema(
        description="Remove the configuration (204); its run keeps the labels already fetched."
    )
    def destroy(self, request: Request, study_pk: str, pk: str) -> Response:
        model_endpoint_delete(endpoint=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses={202: EndpointSerializer, 400: _ENDPOINT_400},
        description="Call the endpoint again, in the background, for the items its run has no "
        "label for (new items first, then those whose calls failed). Refused (400, on "
        "`max_calls`) when the call budget is spent.",
    )
    @action(detail=True, methods=["post"])
    def predict(self, request: Request, study_pk: str, pk: str) -> Response:
        endpoint = model_endpoint_request(endpoint=self.get_object())
        endpoint.refresh_from_db()
        return Response(EndpointSerializer(endpoint).data, status=status.HTTP_202_ACCEPTED)
