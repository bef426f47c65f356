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
from apps.continuous.exporting import traces_csv
from apps.continuous.models import TraceRecording
from apps.continuous.selectors import (
    calibration_report,
    current_traces,
    recording_open,
    stimulus_duration,
)
from apps.continuous.services import trace_chunk_store, trace_finish
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
            201: OpenApiResponse(ChunkReceiptSerializer, "Stored."),
            200: OpenApiResponse(
                ChunkReceiptSerializer,
                "Replay: this (recording, sequence) was stored before with the same samples; "
                "nothing new is stored and the same receipt comes back.",
            ),
            400: OpenApiResponse(
                description="Refused, nothing stored: the message under `chunk`, `sequence`, "
                "`recording` or `duration` says why (times not increasing, outside the media, "
                "values off the scale, a rate above twice the recording rate, an unexplained "
                "gap, a sequence out of order or reused with other samples)."
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
        replay = Revision.objects.filter(
            idempotency_key=uuid, annotation__annotator=request.user
        ).exists()
        revision = trace_finish(
            annotator=request.user,
            recording_uuid=uuid,
            time_spent_ms=serializer.validated_data.get("time_spent_ms"),
            source=Revision.Source.API,
        )
        return Response(
            FinishedSerializer(revision).data,
            status=status.HTTP_200_OK if replay else status.HTTP_201_CREATED,
        )

    @extend_schema(parameters=[ResumeQuerySerializer], responses=ResumeStateSerializer)
    @action(detail=False, methods=["get"], permission_classes=ANNOTATOR_ONLY)
    def resume(self, request: Request, study_pk: str) -> Response:
        """Where an interrupted recording stopped: seek there and continue with its id."""
        query = ResumeQuerySerializer(
            data=request.query_params, context=self.get_serializer_context()
        )
        query.is_valid(raise_exception=True)
        assignment, question = query.validated_data["assignment"], query.validated_data["question"]
        lookup = {"question": question, "item": assignment.item, "annotator": request.user}
        recording = recording_open(**lookup, round=assignment.round)
        finished = TraceRecording.objects.filter(
            **lookup, round=assignment.round, status=TraceRecording.Status.FINISHED
        ).count()
        state = {
            "recording": recording.uuid if recording else None,
            "next_sequence": recording.next_sequence if recording else 0,
            "last_time": recording.last_time if recording else None,
            "last_value": recording.last_value if recording else None,
            "duration": recording.duration if recording else stimulus_duration(assignment.item),
            "finished": finished,
        }
        return Response(ResumeStateSerializer(state).data)

    @extend_schema(
        parameters=[TraceExportQuerySerializer],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/json"): TraceSerializer(many=True),
        },
        description="Download a question's current traces at the analysis rate: CSV (one row "
        "per sample) or JSON (one object per trace). This endpoint ignores `Accept`, so "
        "`?format=` is free for it. Managers only.",
    )
    @action(
        detail=False,
        methods=["get"],
        permission_classes=MANAGER_ONLY,
        content_negotiation_class=FileDownloadNegotiation,
    )
    def export(self, request: Request, study_pk: str) -> HttpResponseBase:
        """Download the traces as CSV or JSON. Managers."""
        query = TraceExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        traces = list(self._traces(query))
        filename = f"study-{self.study.pk}-{query.validated_data['question']}-traces"
        if query.validated_data["format"] == "csv":
            return traces_csv(traces, filename=f"{filename}.csv")
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
