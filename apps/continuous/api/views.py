"""API of continuous traces: upload chunks, finish, resume, list, export and calibration."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from annotate_site.api_downloads import FileDownloadNegotiation
from apps.annotations.models import Revision
from apps.continuous.api.serializers import (
    AnnotatorCalibrationSerializer,
    ChunkReceiptSerializer,
    ChunkUploadSerializer,
    FinishedSerializer,
    FinishSerializer,
    ResumeQuerySerializer,
    ResumeStateSerializer,
    TraceExportQuerySerializer,
    TraceQuerySerializer,
    TraceSerializer,
)
from apps.continuous.exporting import (
    TRACE_SAMPLE_SCHEMA,
    TRACE_SCHEMA,
    trace_rows,
    trace_sample_rows,
)
from apps.continuous.models import TraceRecording
from apps.continuous.selectors import calibration_report, current_traces, trace_resume_state
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.exchange import formats
from apps.exchange.identity import annotator_names
from apps.studies.api.permissions import (
    STUDY_PK,
    InStudyMixin,
    IsStudyAnnotator,
    IsStudyManager,
    IsStudyManagerOrReadOnly,
)
from apps.studies.models import Membership, Question

ANNOTATOR_ONLY = [IsAuthenticated, IsStudyAnnotator]
MANAGER_ONLY = [IsAuthenticated, IsStudyManager]


@extend_schema(parameters=[STUDY_PK])
class TraceViewSet(InStudyMixin, GenericViewSet):
    """Continuous slider traces of a study.

    Annotators upload chunks while the stimulus plays, ask where to resume, and finish;
    members list finished traces (annotators only their own); managers export them and read
    the calibration figures against gold signals.
    """

    permission_classes = [IsAuthenticated, IsStudyManagerOrReadOnly]
    serializer_class = TraceSerializer

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "study": self.study}

    def _question(self, key: str) -> Question:
        question = self.study.questions.filter(key=key, kind=Question.Kind.CONTINUOUS).first()
        if question is None:
            raise NotFound("No continuous question of this study has this key.")
        return question

    def _traces(self, query: TraceQuerySerializer) -> QuerySet[TraceRecording]:
        question = self._question(query.validated_data["question"])
        item = None
        if "item" in query.validated_data:
            item = self.study.items.filter(pk=query.validated_data["item"]).first()
            if item is None:
                raise NotFound("No item of this study has this id.")
        traces = current_traces(question=question, item=item)
        if self.study.role != Membership.Role.MANAGER:
            traces = traces.filter(annotator=self.request.user)
        return traces

    @extend_schema(parameters=[TraceQuerySerializer], responses=TraceSerializer(many=True))
    def list(self, request: Request, study_pk: str) -> Response:
        """Current finished traces of a question at its analysis rate (yours, or all: managers)."""
        query = TraceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = self.paginate_queryset(self._traces(query))
        return self.get_paginated_response(TraceSerializer(page, many=True).data)

    @extend_schema(
        request=ChunkUploadSerializer,
        responses={
            201: OpenApiResponse(
                ChunkReceiptSerializer,
                "Stored; leading samples at or before the stored last time were dropped "
                "(`n_samples` counts the stored ones).",
            ),
            200: OpenApiResponse(
                ChunkReceiptSerializer,
                "Nothing new stored: a replay of this (recording, sequence) with the same "
                "samples (the same receipt comes back), or a chunk whose samples all lie at or "
                "before the stored last time (`n_samples` 0).",
            ),
            400: OpenApiResponse(
                description="Refused, nothing stored: the message under `chunk`, `sequence`, "
                "`recording` or `duration` says why (times not increasing within the chunk, "
                "outside the media, "
                "values off the scale, a rate above twice the recording rate, an unexplained "
                "gap, a sequence below one already stored or reused with other samples)."
            ),
        },
    )
    @action(detail=False, methods=["post"], permission_classes=ANNOTATOR_ONLY)
    def chunks(self, request: Request, study_pk: str) -> Response:
        """Upload one chunk of slider samples taken against the media clock. Annotators."""
        serializer = ChunkUploadSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        receipt, created = trace_chunk_store(
            annotator=request.user,
            assignment=data["assignment"],
            question=data["question"],
            recording_uuid=data["recording"],
            sequence=data["sequence"],
            times=data["times"],
            values=data["values"],
            events=data["events"],
            duration=data.get("duration"),
        )
        return Response(
            ChunkReceiptSerializer(receipt).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        request=FinishSerializer,
        responses={
            201: OpenApiResponse(FinishedSerializer, "Resampled and stored as a revision."),
            200: OpenApiResponse(FinishedSerializer, "Finished before: the same revision."),
        },
    )
    @action(detail=False, methods=["post"], permission_classes=ANNOTATOR_ONLY)
    def finish(self, request: Request, study_pk: str) -> Response:
        """Finish a recording: resample it to the analysis rate and record the answer."""
        serializer = FinishSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        uuid = serializer.validated_data["recording"]
        revision, created = trace_finish(
            annotator=request.user,
            recording_uuid=uuid,
            time_spent_ms=serializer.validated_data.get("time_spent_ms"),
            source=Revision.Source.API,
        )
        return Response(
            FinishedSerializer(revision).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(parameters=[ResumeQuerySerializer], responses=ResumeStateSerializer)
    @action(detail=False, methods=["get"], permission_classes=ANNOTATOR_ONLY)
    def resume(self, request: Request, study_pk: str) -> Response:
        """Where an interrupted recording stopped: seek there, redraw the trace so far, and
        continue with its id."""
        query = ResumeQuerySerializer(
            data=request.query_params, context=self.get_serializer_context()
        )
        query.is_valid(raise_exception=True)
        state = trace_resume_state(
            question=query.validated_data["question"],
            assignment=query.validated_data["assignment"],
        )
        return Response(ResumeStateSerializer(state).data)

    @extend_schema(
        parameters=[TraceExportQuerySerializer],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/json"): TraceSerializer(many=True),
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
        },
        description="Download a question's current traces at the analysis rate: CSV (one row "
        "per sample), JSON (one object per trace) or Parquet (one row per trace, the samples "
        "in a float list column `values`). This endpoint ignores `Accept`, so `?format=` is "
        "free for it. Managers only.",
    )
    @action(
        detail=False,
        methods=["get"],
        permission_classes=MANAGER_ONLY,
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export(self, request: Request, study_pk: str) -> HttpResponseBase:
        """Download the traces as CSV, JSON or Parquet. Managers."""
        query = TraceExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        traces = list(self._traces(query))
        filename = f"study-{self.study.pk}-{query.validated_data['question']}-traces"
        fmt = query.validated_data["format"]
        if fmt in formats.FORMATS:
            name = annotator_names(
                study_id=self.study.pk, identity=query.validated_data["annotators"]
            )
            rows, schema = trace_rows(traces, name=name), TRACE_SCHEMA
            if fmt == "csv":
                rows, schema = trace_sample_rows(rows), TRACE_SAMPLE_SCHEMA
            return formats.download(
                formats.encode(rows, columns=schema, fmt=fmt),
                request=request,
                fmt=fmt,
                filename=f"{filename}.{fmt}",
            )
        response = Response(TraceSerializer(traces, many=True).data)
        response["Content-Disposition"] = f'attachment; filename="{filename}.json"'
        return response

    @extend_schema(
        parameters=[TraceQuerySerializer], responses=AnnotatorCalibrationSerializer(many=True)
    )
    @action(detail=False, methods=["get"], permission_classes=MANAGER_ONLY)
    def calibration(self, request: Request, study_pk: str) -> Response:
        """Per annotator: lag, cubic fit, trend F1/MCC, SDA and kappa_SDA on gold items."""
        query = TraceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        report = calibration_report(question=self._question(query.validated_data["question"]))
        return Response(AnnotatorCalibrationSerializer(report, many=True).data)
