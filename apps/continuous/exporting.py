"""Finished traces at the analysis rate as export rows (:mod:`apps.exchange.formats` writes them).

Two shapes of the same data: :func:`trace_rows` gives one row per trace with its samples as a
list (:data:`TRACE_SCHEMA`: the Parquet file's ``values`` list column, a Hugging Face
``Sequence``); :func:`trace_sample_rows` spreads them into one row per sample
(:data:`TRACE_SAMPLE_SCHEMA`: the CSV file, where a list has no column type).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from apps.continuous.models import TraceRecording
from apps.exchange.formats import Column
from apps.exchange.identity import same_name

TRACE_SCHEMA = (
    Column("item", "str"),
    Column("annotator", "str"),
    Column("round", "int32"),
    Column("recording", "str"),
    Column("rate_hz", "float"),
    Column("n", "int"),
    Column("values", "floats"),
)
TRACE_SAMPLE_SCHEMA = (
    Column("item", "str"),
    Column("annotator", "str"),
    Column("round", "int32"),
    Column("recording", "str"),
    Column("time", "float"),
    Column("value", "float"),
)


def trace_rows(
    recordings: Iterable[TraceRecording], *, name: Callable[[str], str] = same_name
) -> Iterator[dict[str, Any]]:
    """One row per finished trace (keys :data:`TRACE_SCHEMA`): item external id, annotator
    (named by ``name``), round, recording id, analysis rate (Hz), number of samples and the
    samples."""
    for recording in recordings:
        values = recording.trace()
        yield {
            "item": recording.item.external_id,
            "annotator": name(recording.annotator.get_username()),
            "round": recording.round,
            "recording": str(recording.uuid),
            "rate_hz": recording.analysis_rate_hz,
            "n": len(values),
            "values": values,
        }


def trace_sample_rows(traces: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each trace row of :func:`trace_rows` as one row per sample (keys
    :data:`TRACE_SAMPLE_SCHEMA`), ``time`` in seconds from the start (sample / rate)."""
    for trace in traces:
        head = {key: trace[key] for key in ("item", "annotator", "round", "recording")}
        rate = trace["rate_hz"]
        for k, value in enumerate(trace["values"]):
            yield {**head, "time": k / rate, "value": float(value)}
