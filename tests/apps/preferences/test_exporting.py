"""The score table's CSV: the fast writer gives the generic writer's text, and agrees with the
Parquet file."""

from __future__ import annotations

import csv
import io
import math

import pandas as pd
import pytest
from django.urls import reverse

from apps.exchange.formats import csv_text
from apps.preferences.exporting import score_csv_text, score_rows, score_schema
from apps.preferences.selectors import question_scores
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


@pytest.fixture
def judged(db):
    """Six items; one annotator ranks them all, one answers two pairs (empty cells), one named
    with a comma and quotes (the header is quoted), one never starts."""
    setup = make_pairwise_study(n_items=6, n_annotators=4)
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    first, partial, formula, _ = setup.annotators
    formula.username = '=cmd,"x"'
    formula.save()
    for annotator in (first, formula):
        answer_all(setup.question, annotator, by_level(levels))
    with pytest.raises(AssertionError, match="not done"):
        answer_all(setup.question, partial, by_level(levels), limit=2)
    return setup


def _text(chunks) -> str:
    return "".join(chunks)


def test_the_score_csv_is_the_generic_writers_text(judged):
    scores = question_scores(question=judged.question)
    names = [column.name for column in score_schema(scores)]
    fast = _text(score_csv_text(scores))
    assert fast == _text(csv_text(score_rows(scores), columns=names))
    rows = list(csv.reader(io.StringIO(fast)))
    assert len(rows) == 1 + 6
    assert 'count_=cmd,"x"' in rows[0]  # quoted: the name holds a comma and quotes
    assert any(cell == "" for row in rows[1:] for cell in row[6:])  # the partial annotator
    assert {len(row) for row in rows} == {6 + 3 * 3}


def test_the_score_csv_download_agrees_with_the_parquet_file(judged, client):
    client.force_login(judged.manager)
    args = [judged.study.pk, judged.question.key]
    text = b"".join(client.get(reverse("preferences:scores_csv", args=args)).streaming_content)
    rows = list(csv.DictReader(io.StringIO(text.decode())))
    parquet = b"".join(
        client.get(reverse("preferences:scores_file", args=[*args, "parquet"])).streaming_content
    )
    frame = pd.read_parquet(io.BytesIO(parquet))
    assert list(rows[0]) == list(frame.columns)
    assert [int(row["item_id"]) for row in rows] == frame["item_id"].tolist()
    for row, (_, expected) in zip(rows, frame.iterrows(), strict=True):
        for column in frame.columns[3:]:
            value = expected[column]
            if isinstance(value, float) and math.isnan(value):
                assert row[column] == ""
            else:
                assert float(row[column]) == pytest.approx(value, rel=1e-5)
