"""API of annotations, the annotator's queue and the raw export."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpResponse, HttpResponseBase
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from annotate_site.api_downloads import FileDownloadNegotiation
from annotate_site.api_exceptions import service_fields_as
from apps.annotations.api.serializers import (
    AnnotationFilterSerializer,
    AnnotationSerializer,
    AnnotationSubmitSerializer,
    ExportQuerySerializer,
    HuggingFaceQuerySerializer,
    ProvenanceSerializer,
    QueueEntrySerializer,
    RevisionSerializer,
    SkipSerializer,
    SubmissionSerializer,
    UndoSerializer,
    queue_entry_data,
    submission_data,
)
from apps.annotations.exporting import export_response, provenance
from apps.annotations.models import Annotation, Revision
from apps.annotations.selectors import queue_entry, queue_next
from apps.annotations.services import annotation_undo_last, annotations_submit, assignment_skip
from apps.exchange.api import TABULAR_RESPONSES, LabelStudioExportQuerySerializer
from apps.exchange.huggingface import dataset_response
from apps.exchange.label_studio import label_studio_config, label_studio_tasks
from apps.studies.api.permissions import (
    STUDY_PK,
    InStudyMixin,
    IsStudyAnnotator,
    IsStudyManager,
)
from apps.studies.selectors import studies_for_user, studies_managed_by

ANNOTATION_FILTERS = {
    "study": "question__study_id",
    "question": "question_id",
    "annotator": "annotator_id",
}


@extend_schema_view(list=extend_schema(parameters=[AnnotationFilterSerializer]))
class AnnotationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Managers see every annotation of their studies; annotators only their own."""

    serializer_class = AnnotationSerializer
    permission_classes = [IsAuthenticated]

    def get_queryset(self) -> QuerySet[Annotation]:
        if getattr(self, "swagger_fake_view", False):
            return Annotation.objects.none()
        user = self.request.user
        visible = Q(question__study__in=studies_managed_by(user=user)) | Q(
            annotator=user, question__study__in=studies_for_user(user=user)
        )
        return (
            Annotation.objects.filter(visible)
            .select_related("question", "item", "annotator", "current_revision__label")
            .order_by("id")
        )

    def filter_queryset(self, queryset: QuerySet[Annotation]) -> QuerySet[Annotation]:
        filters = AnnotationFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return queryset.filter(
            **{ANNOTATION_FILTERS[name]: value for name, value in filters.validated_data.items()}
        )

    @extend_schema(
        request=AnnotationSubmitSerializer,
        responses={
            201: OpenApiResponse(
                SubmissionSerializer, "Recorded: one new revision per answered question."
            ),
            200: OpenApiResponse(
                SubmissionSerializer,
                "Replay: this idempotency key was recorded before, with the same answers; "
                "nothing new is stored and the same revisions come back. (Of two first sends "
                "racing each other, one sees 201 and the other this.)",
            ),
            400: OpenApiResponse(
                description="Invalid input, stored nothing. A bad answer is reported under "
                "`answers`; a reused key with a different answer under `idempotency_key`."
            ),
        },
        description="Answer an assigned item. An edit is a new submission with a new key: it "
        "appends revisions, and the latest one counts.",
    )
    def create(self, request: Request) -> Response:
        serializer = AnnotationSubmitSerializer(
            data=request.data, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with service_fields_as({"value": "answers", "question": "answers"}):
            revisions, created = annotations_submit(
                annotator=request.user,
                assignment=data["assignment"],
                answers=data["answers"],
                idempotency_key=data["idempotency_key"],
                time_spent_ms=data.get("time_spent_ms"),
                source=Revision.Source.API,
            )
        submission: dict[str, Any] = {"revisions": revisions}
        if data["include_next"]:
            submission["next"] = queue_next(annotator=request.user, study=data["assignment"].study)
        return Response(
            submission_data(submission, request=request),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(responses=RevisionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def revisions(self, request: Request, pk: str) -> Response:
        """The annotation's full history, oldest first (a null value is an undo)."""
        annotation = self.get_object()
        revisions = annotation.revisions.select_related("annotation__question", "label")
        return Response(RevisionSerializer(revisions, many=True).data)


NO_MORE = OpenApiResponse(description="Nothing (more) to do.")


@extend_schema(parameters=[STUDY_PK])
class StudyAnnotationViewSet(InStudyMixin, GenericViewSet):
    """Per study: an annotator's queue (next, skip, undo) and the managers' raw export."""

    permission_classes = [IsAuthenticated, IsStudyAnnotator]

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "study": self.study}

    def _queue_entry(self, entry: dict[str, Any] | None) -> Response:
        if entry is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(queue_entry_data(entry, request=self.request))  # QueueEntrySerializer's

    @extend_schema(responses={200: QueueEntrySerializer, 204: NO_MORE})
    @action(detail=False, methods=["get"])
    def next(self, request: Request, study_pk: str) -> Response:
        """Your next unfinished assignment (skipped ones come last); 204 when you are done.
        `POST /api/annotations/` with `include_next` answers and returns it in one request."""
        return self._queue_entry(queue_next(annotator=request.user, study=self.study))

    @extend_schema(responses={200: QueueEntrySerializer, 204: NO_MORE})
    @action(detail=False, methods=["post"], serializer_class=SkipSerializer)
    def skip(self, request: Request, study_pk: str) -> Response:
        """Put an unfinished assignment behind the others; answers with the next one."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        assignment_skip(annotator=request.user, assignment=serializer.validated_data["assignment"])
        return self._queue_entry(queue_next(annotator=request.user, study=self.study))

    @extend_schema(responses={200: QueueEntrySerializer, 204: NO_MORE})
    @action(detail=False, methods=["post"], serializer_class=UndoSerializer)
    def undo(self, request: Request, study_pk: str) -> Response:
        """Retract your latest answered item and reopen it; 204 if there is nothing to undo."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        reopened = annotation_undo_last(
            annotator=request.user,
            study=self.study,
            idempotency_key=serializer.validated_data["idempotency_key"],
        )
        return self._queue_entry(
            queue_entry(annotator=request.user, study=self.study, assignment=reopened)
        )

    @extend_schema(
        parameters=[ExportQuerySerializer],
        responses=TABULAR_RESPONSES,
        description="Download the study's annotations, streamed. `format` picks the file "
        "format (this endpoint ignores `Accept`, so `?format=` is free for it); Parquet has "
        "typed columns. `curated=1` leaves out the annotators excluded on the quality "
        "dashboard; `annotators=pseudonyms` names annotators by stable per-study pseudonyms; "
        "`export/provenance/` with the same query describes the file.",
    )
    @action(
        detail=False,
        methods=["get"],
        permission_classes=[IsAuthenticated, IsStudyManager],
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export(self, request: Request, study_pk: str) -> HttpResponseBase:
        """The raw export. Managers only."""
        query = ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return export_response(
            request=request,
            study=self.study,
            fmt=query.validated_data["format"],
            include_history=query.validated_data["history"],
            curated=query.validated_data["curated"],
            identity=query.validated_data["annotators"],
        )

    @extend_schema(
        parameters=[LabelStudioExportQuerySerializer],
        responses={
            (200, "application/json"): build_array_type(build_basic_type(OpenApiTypes.OBJECT)),
            (200, "application/xml"): OpenApiTypes.STR,
        },
        description="The study's categorical answers as Label Studio tasks (`part=tasks`: one "
        "task per item, one annotation per annotator with `choices` results named by question "
        "key) or the labelling configuration (XML) of a Label Studio project that imports them "
        "(`part=config`).",
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="export/label-studio",
        permission_classes=[IsAuthenticated, IsStudyManager],
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export_label_studio(self, request: Request, study_pk: str) -> HttpResponseBase:
        """Label Studio tasks or labelling configuration. Managers only."""
        query = LabelStudioExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        if query.validated_data["part"] == "config":
            return HttpResponse(
                label_studio_config(study=self.study),
                content_type="application/xml; charset=utf-8",
                headers={"Content-Disposition": 'attachment; filename="label-config.xml"'},
            )
        tasks = label_studio_tasks(study=self.study, identity=query.validated_data["annotators"])
        filename = f"study-{self.study.pk}-label-studio.json"
        return HttpResponse(
            json.dumps(tasks, ensure_ascii=False),
            content_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @extend_schema(
        parameters=[HuggingFaceQuerySerializer],
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        description="The study as a Hugging Face dataset, zipped: `data/items.parquet`, one "
        "`data/<question>.parquet` per question (features in the Parquet metadata: "
        "categorical labels as a ClassLabel, traces as a float sequence), `README.md` (the "
        "dataset card: questions, label schemes, annotators kept and excluded, agreement with "
        "95 % intervals, licence, file checksums) and `provenance.json`. Curated by default.",
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="export/huggingface",
        permission_classes=[IsAuthenticated, IsStudyManager],
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export_huggingface(self, request: Request, study_pk: str) -> HttpResponseBase:
        """The Hugging Face dataset zip. Managers only."""
        query = HuggingFaceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return dataset_response(
            study=self.study,
            curated=query.validated_data["curated"],
            identity=query.validated_data["annotators"],
            license=query.validated_data["license"],
        )

    @extend_schema(
        parameters=[ExportQuerySerializer],
        responses=ProvenanceSerializer,
        description="The provenance record of the export with the same query: study, software "
        "version and commit, options, row and annotator counts, each excluded annotator (by "
        "whom, when, why, the flags behind it), the open flags of the annotators kept, and "
        "the SHA-256 of the file `export/` sends for that query (equal while no one answers).",
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="export/provenance",
        permission_classes=[IsAuthenticated, IsStudyManager],
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export_provenance(self, request: Request, study_pk: str) -> Response:
        """Provenance of an export. Managers only."""
        query = ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        record = provenance(
            study=self.study,
            curated=query.validated_data["curated"],
            include_history=query.validated_data["history"],
            fmt=query.validated_data["format"],
            identity=query.validated_data["annotators"],
        )
        return Response(ProvenanceSerializer(record).data)
