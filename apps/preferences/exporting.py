"""Export rows of a pairwise question: every raw judgement, and the pooled score table.

Rows are dicts of typed values, written as CSV, JSON Lines or Parquet by
:mod:`apps.exchange.formats` with the columns :data:`JUDGEMENT_SCHEMA` and
:func:`score_schema`. Annotators are named by ``name`` (usernames, or per-study pseudonyms from
:func:`apps.exchange.identity.annotator_names`).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from typing import Any

from apps.exchange.formats import ROWS_PER_CHUNK, Column, csv_cell, csv_text
from apps.exchange.identity import same_name
from apps.preferences.models import Judgement
from apps.preferences.selectors import QuestionScores
from apps.studies.models import Question
from core.csv_files import _Line, neutralise

JUDGEMENT_SCHEMA = (
    Column("annotator", "str"),
    Column("sequence", "int"),
    Column("item_a", "str"),
    Column("item_b", "str"),
    Column("outcome", "int32"),  # 1 prefers A, -1 prefers B, 0 a tie
    Column("phase", "str"),
    Column("contradicts", "bool"),
    Column("time_spent_ms", "int"),
    Column("side_a", "str"),  # the side item_a was shown on: A (left), B, or "" (not recorded)
    Column("retracted", "bool"),  # undone by the annotator
    Column("idempotency_key", "str"),
    Column("created_at", "timestamp"),
)
CHUNK_SIZE = 2000


def judgement_rows(
    *,
    question: Question,
    name: Callable[[str], str] = same_name,
    left_out: Collection[int] = (),
) -> Iterator[dict[str, Any]]:
    """Every raw judgement of ``question`` (keys :data:`JUDGEMENT_SCHEMA`), by annotator and
    sequence, read from the database in chunks; none of the annotators ``left_out`` (ids).

    The answers to hidden attention checks are no data and are left out (their outcome is in
    the participants' gold accuracy: the payment file, the dashboard's *Attention checks*).
    """
    judgements = (
        Judgement.objects.filter(question=question)
        .data()
        .exclude(annotator_id__in=left_out)
        .select_related("annotator", "item_a", "item_b", "retraction")
        .order_by("annotator__username", "sequence")
    )
    for j in judgements.iterator(chunk_size=CHUNK_SIZE):
        yield {
            "annotator": name(j.annotator.get_username()),
            "sequence": j.sequence,
            "item_a": j.item_a.external_id,
            "item_b": j.item_b.external_id,
            "outcome": j.outcome,
            "phase": j.phase,
            "contradicts": j.contradicts,
            "time_spent_ms": j.time_spent_ms,
            "side_a": j.side_a,
            "retracted": hasattr(j, "retraction"),
            "idempotency_key": str(j.idempotency_key),
            "created_at": j.created_at,
        }


def score_schema(scores: QuestionScores, *, name: Callable[[str], str] = same_name) -> list[Column]:
    """The score table's columns: item, rank, Bradley-Terry log strength, its standard error and
    prior ``alpha``, then each annotator's count score and scale score, and the weight of their
    judgements in the pooled fit (the same on every row, like ``bt_alpha``)."""
    annotators = [name(username) for username in scores.annotators]
    return [
        Column("item_id", "int"),
        Column("external_id", "str"),
        Column("rank", "int"),
        Column("bt_log_strength", "float"),
        Column("bt_se", "float"),
        Column("bt_alpha", "float"),
        *(Column(f"count_{annotator}", "float") for annotator in annotators),
        *(Column(f"scale_{annotator}", "float") for annotator in annotators),
        *(Column(f"weight_{annotator}", "float") for annotator in annotators),
    ]


def score_rows(
    scores: QuestionScores, *, name: Callable[[str], str] = same_name
) -> Iterator[dict[str, Any]]:
    """One row per item, best first (keys :func:`score_schema`); NaN where undefined."""
    annotators = [name(username) for username in scores.annotators]
    for row in scores.rows:
        yield {
            "item_id": row.item.pk,
            "external_id": row.item.external_id,
            "rank": row.rank,
            "bt_log_strength": row.log_strength,
            "bt_se": row.se,
            "bt_alpha": scores.alpha,
            **{f"count_{a}": v for a, v in zip(annotators, row.counts, strict=True)},
            **{f"scale_{a}": v for a, v in zip(annotators, row.scales, strict=True)},
            **{f"weight_{a}": w for a, w in zip(annotators, scores.weights, strict=True)},
        }


#: The pooled columns of :func:`score_schema`, before the per-annotator ones.
POOLED_SCORE_COLUMNS = 6


def score_csv_text(
    scores: QuestionScores, *, name: Callable[[str], str] = same_name
) -> Iterator[str]:
    """The score table as CSV text in chunks: the same text as
    :func:`~apps.exchange.formats.csv_text` of :func:`score_rows`, written in O(items x
    annotators) string joins instead of as many Python calls per cell.

    At 100,000 items x 200 annotators the table has 606 columns and 60 million cells, almost
    all empty (an annotator judges a batch of the items): every cell through
    :func:`~apps.exchange.formats.csv_cell` and :func:`~core.csv_files.neutralise` took 35-47 s.
    Here the per-annotator cells of a row start as a list of empty cells and only the judged
    ones are formatted (through the same two functions); the weights, the same on every row,
    are formatted once. Pooled cells and the header go through the one CSV writer as before.
    """
    schema = [column.name for column in score_schema(scores, name=name)]
    yield from csv_text([], columns=schema)  # the header, quoted and neutralised as usual
    n = len(scores.annotators)
    judged: defaultdict[int, list[tuple[int, float, float]]] = defaultdict(list)
    for k, cells in enumerate(scores.annotator_scores_of()):
        for item, (count, scale) in cells.items():
            judged[item].append((k, count, scale))
    writer = csv.writer(_Line())
    weights = writer.writerow([neutralise(csv_cell(w)) for w in scores.weights])
    empty = [""] * n
    lines: list[str] = []
    for row in scores.rows:
        pooled = [row.item.pk, row.item.external_id, row.rank, row.log_strength, row.se]
        line = writer.writerow([neutralise(csv_cell(v)) for v in (*pooled, scores.alpha)])
        counts, scales = empty.copy(), empty.copy()
        for k, count, scale in judged.get(row.item.pk, ()):
            counts[k] = str(neutralise(csv_cell(count)))
            scales[k] = str(neutralise(csv_cell(scale)))
        if n:
            line = f"{line[:-2]},{','.join(counts)},{','.join(scales)},{weights}"
        lines.append(line)
        if len(lines) == ROWS_PER_CHUNK:
            yield "".join(lines)
            lines.clear()
    yield "".join(lines)


#: Preference pairs for training a model on human preferences: ``prompt``, ``chosen`` and
#: ``rejected`` are the columns DPO-style trainers read (TRL's ``DPOTrainer``, for one); the
#: rest says where each pair comes from and how much it can be trusted.
PREFERENCE_SCHEMA = (
    Column("prompt", "str"),
    Column("chosen", "str"),
    Column("rejected", "str"),
    Column("tie", "bool"),  # only with ties kept: neither is preferred (chosen is item A)
    Column("chosen_id", "str"),
    Column("rejected_id", "str"),
    Column("annotator", "str"),
    Column("annotator_weight", "float"),  # the annotator's weight in the pooled fit
    Column("bt_margin", "float"),  # pooled Bradley-Terry log strength, chosen minus rejected
    Column("question", "str"),
    Column("created_at", "timestamp"),
)


def _shown(item: Any) -> str:
    """What an annotator judged of an item: its text, else the address of its media."""
    return item.text or item.url or (item.media.name if item.media else "")


def preference_rows(
    *,
    question: Question,
    scores: QuestionScores,
    name: Callable[[str], str] = same_name,
    left_out: Collection[int] = (),
    ties: bool = False,
) -> Iterator[dict[str, Any]]:
    """One row per kept judgement of ``question`` (keys :data:`PREFERENCE_SCHEMA`): the
    preferred item ``chosen``, the other ``rejected``; ties left out unless ``ties`` (then
    flagged ``tie``); undone judgements, hidden attention checks and the annotators
    ``left_out`` (ids) never.

    ``prompt`` is the items' shared ``prompt`` metadata (responses to one prompt), else the
    question's prompt. ``annotator_weight`` and ``bt_margin`` come from ``scores``
    (:func:`~apps.preferences.selectors.question_scores`, fitted on the same annotators'
    judgements); NaN where the fit gives none.
    """
    weights = dict(zip(scores.annotators, scores.weights, strict=True))
    strength = {row.item.pk: row.log_strength for row in scores.rows}
    judgements = (
        Judgement.objects.filter(question=question)
        .data()
        .kept()
        .exclude(annotator_id__in=left_out)
        .select_related("annotator", "item_a", "item_b")
        .order_by("annotator__username", "sequence")
    )
    if not ties:
        judgements = judgements.exclude(outcome=0)
    for j in judgements.iterator(chunk_size=CHUNK_SIZE):
        chosen, rejected = (j.item_b, j.item_a) if j.outcome == -1 else (j.item_a, j.item_b)
        shared = chosen.metadata.get("prompt")
        username = j.annotator.get_username()
        yield {
            "prompt": shared
            if isinstance(shared, str) and shared == rejected.metadata.get("prompt")
            else question.prompt,
            "chosen": _shown(chosen),
            "rejected": _shown(rejected),
            "tie": j.outcome == 0,
            "chosen_id": chosen.external_id,
            "rejected_id": rejected.external_id,
            "annotator": name(username),
            "annotator_weight": weights.get(username, math.nan),
            "bt_margin": strength.get(chosen.pk, math.nan) - strength.get(rejected.pk, math.nan),
            "question": question.key,
            "created_at": j.created_at,
        }
