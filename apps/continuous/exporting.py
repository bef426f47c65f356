"""Finished traces at the analysis rate as CSV or JSON files."""

from __future__ import annotations

import csv
import io

from django.http import HttpResponse

from apps.continuous.models import TraceRecording


def traces_csv(recordings: list[TraceRecording], *, filename: str) -> HttpResponse:
    """One row per sample: item, annotator, round, recording, time (s), value."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["item", "annotator", "round", "recording", "time", "value"])
    for recording in recordings:
        rate = recording.analysis_rate_hz
        for k, value in enumerate(recording.trace()):
            writer.writerow(
                [
                    recording.item.external_id,
                    recording.annotator.get_username(),
                    recording.round,
                    recording.uuid,
                    f"{k / rate:.6g}",
                    f"{value:.6g}",
                ]
            )
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
