"""Preference pairs for model alignment (issue 28): one row per judged pair with prompt, chosen
and rejected, the annotator's weight and the Bradley-Terry margin, curated, in JSON Lines,
Parquet and the Hugging Face dataset, loaded with ``datasets``."""

from __future__ import annotations

import io
import json
import math
import uuid
import zipfile

import pyarrow.parquet as pq
import pytest
from django.urls import reverse

from analytics.services import annotator_exclude
from apps.exchange.huggingface import dataset_zip
from apps.items.models import Item
from apps.preferences.exporting import preference_rows
from apps.preferences.models import Judgement
from apps.preferences.selectors import curated_scores, question_scores
from apps.preferences.services import judgement_record, pair_next
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged():
    """Four responses to one prompt, two truthful annotators and one who ties every pair."""
    setup = make_pairwise_study(
        n_items=4, n_annotators=3, settings={"calibration_triplets": 0, "audit_rate": 0.0}
    )
    for k, item in enumerate(setup.items):
        item.text = f"Response {k}"
        item.metadata = {"prompt": "Explain rain to a child.", "model": f"m{k}"}
    Item.objects.bulk_update(setup.items, ["text", "metadata"])
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    first, second, tier = setup.annotators
    answer_all(setup.question, first, by_level(levels))
    answer_all(setup.question, second, by_level(levels))
    state = pair_next(question=setup.question, annotator=tier)
    a, b = state.pending
    judgement_record(
        question=setup.question,
        annotator=tier,
        item_a=a,
        item_b=b,
        outcome=0,
        idempotency_key=uuid.uuid4(),
    )
    return setup


def test_each_judged_pair_is_a_row_with_the_preferred_response_chosen(judged):
    scores = question_scores(question=judged.question)
    rows = list(preference_rows(question=judged.question, scores=scores))
    kept = Judgement.objects.filter(question=judged.question).data().kept()
    assert len(rows) == kept.exclude(outcome=0).count() > 0  # the tie is left out
    level = {item.text: k for k, item in enumerate(judged.items)}
    strength = {row.item.external_id: row.log_strength for row in scores.rows}
    weights = dict(scores.annotator_weights)
    for row in rows:
        assert row["prompt"] == "Explain rain to a child."  # the responses' shared prompt
        assert level[row["chosen"]] > level[row["rejected"]]  # the truthful answers
        assert row["tie"] is False
        assert row["bt_margin"] == pytest.approx(
            strength[row["chosen_id"]] - strength[row["rejected_id"]]
        )
        assert row["bt_margin"] > 0
        assert row["annotator_weight"] == weights[row["annotator"]]
    with_ties = list(preference_rows(question=judged.question, scores=scores, ties=True))
    (tie,) = [row for row in with_ties if row["tie"]]
    assert tie["annotator"] == judged.annotators[2].username


def test_curated_pairs_leave_out_the_excluded_annotator_and_their_fit(judged):
    first = judged.annotators[0]
    annotator_exclude(study=judged.study, annotator=first, by=judged.manager, reason="test")
    left_out, scores = curated_scores(question=judged.question, curated=True)
    assert left_out == {first.pk}
    rows = list(preference_rows(question=judged.question, scores=scores, left_out=left_out))
    assert rows
    assert first.username not in {row["annotator"] for row in rows}
    everyone = question_scores(question=judged.question)
    assert scores.n_judgements < everyone.n_judgements  # fitted without them


def test_the_results_page_downloads_them_as_json_lines_and_parquet(client, judged):
    client.force_login(judged.manager)
    args = [judged.study.pk, judged.question.key]
    page = client.get(reverse("preferences:results", args=args)).content.decode()
    url = reverse("preferences:preferences_file", args=[*args, "jsonl"])
    assert url in page
    lines = b"".join(client.get(url).streaming_content).decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {"prompt", "chosen", "rejected", "annotator_weight", "bt_margin"} <= set(rows[0])
    parquet = client.get(reverse("preferences:preferences_file", args=[*args, "parquet"]))
    table = pq.read_table(io.BytesIO(b"".join(parquet.streaming_content)))
    assert table.num_rows == len(rows)
    assert table.column("chosen").to_pylist() == [row["chosen"] for row in rows]
    with_ties = client.get(url, {"ties": "keep"})
    assert len(b"".join(with_ties.streaming_content).decode().splitlines()) == len(rows) + 1
    annotator = judged.annotators[1]
    client.force_login(annotator)
    assert client.get(url).status_code in (403, 404)  # managers only


def test_the_hugging_face_dataset_has_a_preferences_config_datasets_loads(judged, tmp_path):
    datasets = pytest.importorskip("datasets")
    stream = io.BytesIO()
    record = dataset_zip(study=judged.study, stream=stream)
    config = f"{judged.question.key}-preferences"
    assert f"data/{config}.parquet" in record["files"]
    folder = tmp_path / "dataset"
    with zipfile.ZipFile(io.BytesIO(stream.getvalue())) as archive:
        archive.extractall(folder)
        card = archive.read("README.md").decode()
    assert f"- config_name: {config}" in card
    # a cache of its own: datasets keys its cache on the folder, which another run may reuse
    loaded = datasets.load_dataset(
        str(folder), config, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert {"prompt", "chosen", "rejected"} <= set(loaded.column_names)
    assert loaded.num_rows == record["files"][f"data/{config}.parquet"]["rows"] > 0
    assert all(not math.isnan(m) and m > 0 for m in loaded["bt_margin"])
