"""Aggregated labels per item (CSV, JSON Lines, Parquet through :mod:`apps.exchange.formats`).

One row per item and categorical question with a counted answer: the majority label (ties
marked: ``majority`` empty, ``majority_tie`` true, the tied keys in ``tied_labels``), the
Dawid-Skene posterior and its label, the adjudicated label where one exists (or "ambiguous"),
the number of answers and the disagreement (AAD-RMSE). *Curated* rows leave the excluded
annotators' answers out of every figure. :func:`aggregated_provenance` describes a file with
the provenance record of the answers it was computed from
(:func:`apps.annotations.exporting.provenance`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, StreamingHttpResponse

from analytics.selectors import excluded_annotator_ids
from apps.adjudication.selectors import (
    categorical_questions,
    latest_adjudications,
    question_aggregates,
)
from apps.annotations.exporting import provenance
from apps.exchange import formats
from apps.exchange.formats import Column
from apps.studies.models import Study

AGGREGATED_SCHEMA = (
    Column("study", "int"),
    Column("question", "str"),
    Column("item", "str"),
    Column("n_answers", "int"),
    Column("majority", "str"),
    Column("majority_tie", "bool"),
    Column("majority_votes", "int"),
    Column("tied_labels", "json"),
    Column("ds_label", "str"),
    Column("ds_probability", "float"),
    Column("ds_posterior", "json"),
    Column("disagreement", "float"),
    Column("adjudicated_label", "str"),
    Column("adjudicated_ambiguous", "bool"),
    Column("adjudicated_by", "str"),
    Column("adjudicated_at", "timestamp"),
    Column("adjudication_note", "str"),
)
AGGREGATED_COLUMNS = tuple(column.name for column in AGGREGATED_SCHEMA)
AGGREGATED_PROVENANCE_SCHEMA = "annotation-studio/aggregated-provenance/1"


def aggregated_rows(*, study: Study, curated: bool = False) -> Iterator[dict[str, Any]]:
    """One dict per (categorical question, answered item), keys :data:`AGGREGATED_COLUMNS`,
    questions in order and items by position; ``curated`` leaves excluded annotators out."""
    left_out = excluded_annotator_ids(study=study) if curated else set()
    external = dict(study.items.values_list("id", "external_id"))
    positions = dict(study.items.values_list("id", "position"))
    for question in categorical_questions(study=study):
        found = question_aggregates(question=question, left_out=left_out)
        agg = found.aggregates
        settled = latest_adjudications(question=question)
        order = sorted(
            range(found.item_ids.size),
            key=lambda i: (positions[found.item_ids[i]], found.item_ids[i]),
        )
        for i in order:
            item_id = int(found.item_ids[i])
            top = int(agg.votes[i].max())
            ds = int(agg.ds_label[i])
            adjudication = settled.get(item_id)
            yield {
                "study": study.pk,
                "question": question.key,
                "item": external[item_id],
                "n_answers": int(agg.n_answers[i]),
                "majority": found.key(int(agg.majority[i])),
                "majority_tie": bool(agg.tied[i]),
                "majority_votes": top,
                "tied_labels": [
                    key for key, n in zip(found.value_keys, agg.votes[i], strict=True) if n == top
                ]
                if agg.tied[i]
                else [],
                "ds_label": found.key(ds),
                "ds_probability": float(agg.posteriors[i, ds]),
                "ds_posterior": {
                    key: round(float(p), 6)
                    for key, p in zip(found.value_keys, agg.posteriors[i], strict=True)
                },
                "disagreement": float(agg.disagreement[i]),
                "adjudicated_label": adjudication.label.key
                if adjudication and adjudication.label
                else None,
                "adjudicated_ambiguous": adjudication.ambiguous if adjudication else None,
                "adjudicated_by": adjudication.adjudicator.get_username() if adjudication else None,
                "adjudicated_at": adjudication.created_at if adjudication else None,
                "adjudication_note": adjudication.note if adjudication else None,
            }


def aggregated_bytes(*, study: Study, fmt: str, curated: bool = False) -> Iterator[bytes]:
    """The aggregated-labels file as byte chunks, exactly as the download sends it."""
    formats.check_format(fmt)
    return formats.encode(
        aggregated_rows(study=study, curated=curated), columns=AGGREGATED_SCHEMA, fmt=fmt
    )


def aggregated_filename(*, study: Study, fmt: str, curated: bool) -> str:
    """``study-<id>-aggregated[-curated].<fmt>``."""
    return f"study-{study.pk}-aggregated{'-curated' if curated else ''}.{fmt}"


def aggregated_response(
    *, request: HttpRequest, study: Study, fmt: str, curated: bool = False
) -> StreamingHttpResponse:
    """A streamed download of the study's aggregated labels as ``fmt``."""
    return formats.download(
        aggregated_bytes(study=study, fmt=fmt, curated=curated),
        request=request,
        fmt=fmt,
        filename=aggregated_filename(study=study, fmt=fmt, curated=curated),
    )


def aggregated_provenance(*, study: Study, fmt: str, curated: bool) -> dict[str, Any]:
    """The provenance record of an aggregated-labels file.

    The record of the answers export with the same options (exclusions applied and why, open
    flags, software, checksum: :func:`apps.annotations.exporting.provenance`), whose ``file``
    becomes ``answers_file``; ``file`` describes the aggregated file (name, columns, rows, bytes,
    sha256) and ``aggregation`` how its figures were computed.
    """
    record = provenance(study=study, curated=curated, include_history=False, fmt=fmt)
    digest, size, rows = hashlib.sha256(), 0, 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal rows
        for row in aggregated_rows(study=study, curated=curated):
            rows += 1
            yield row

    for chunk in formats.encode(counted(), columns=AGGREGATED_SCHEMA, fmt=fmt):
        digest.update(chunk)
        size += len(chunk)
    record["schema"] = AGGREGATED_PROVENANCE_SCHEMA
    record["answers_file"] = record["file"]
    record["file"] = {
        "name": aggregated_filename(study=study, fmt=fmt, curated=curated),
        "columns": list(AGGREGATED_COLUMNS),
        "rows": rows,
        "bytes": size,
        "sha256": digest.hexdigest(),
    }
    record["aggregation"] = {
        "answers": "round-1 live answers of categorical questions"
        + (", excluded annotators left out" if curated else ""),
        "majority": "most votes; ties marked (majority empty, tied_labels listed)",
        "dawid_skene": "EM fit per question over every item (Dawid & Skene 1979), "
        "started from the soft majority vote; smoothing 0.01",
        "disagreement": "AAD-RMSE (Du & Hoste 2025, Eq. 4) in the question's label space",
        "adjudication": "the latest adjudication of the item (append-only history kept)",
    }
    return record
