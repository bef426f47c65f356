"""The Hugging Face export: loaded with ``datasets`` itself, features, card and provenance."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
import zipfile
from pathlib import Path

import datasets
import pytest
import yaml
from rest_framework.test import APIClient

from analytics.intervals import quality_record
from analytics.publishing import quality_publish
from analytics.services import annotator_exclude
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.categorical.quality import quality_process_pending
from apps.exchange.huggingface import dataset_zip
from apps.exchange.identity import annotator_names
from apps.studies.kinds import question_kind
from tests.apps.continuous.conftest import make_trace_study
from tests.apps.continuous.test_api import record_through_api

pytestmark = pytest.mark.django_db

# (annotator index, label) per item: annotators 0 and 1 agree, annotator 2 answers at random
ANSWERS = [
    ("positive", "positive", "negative"),
    ("neutral", "neutral", "positive"),
    ("negative", "negative", "neutral"),
    ("positive", "positive", "positive"),
    ("neutral", "neutral", "negative"),
    ("negative", "negative", "positive"),
]


@pytest.fixture
def answered(study_setup):
    study, annotators = study_setup
    question = study.questions.get()
    for labels in ANSWERS:
        for annotator, label in zip(annotators, labels, strict=True):
            annotations_submit(
                annotator=annotator,
                assignment=assignment_next(annotator=annotator, study=study),
                answers={question: label},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=500,
            )
    return study, annotators


def unzip(data: bytes, folder: Path) -> Path:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(folder)
    return folder


def export(study, tmp_path: Path, **options) -> tuple[Path, dict]:
    stream = io.BytesIO()
    record = dataset_zip(study=study, stream=stream, **options)
    return unzip(stream.getvalue(), tmp_path / "dataset"), record


def test_datasets_loads_labels_as_a_class_label_with_the_label_names(answered, tmp_path):
    study, annotators = answered
    folder, _ = export(study, tmp_path)
    question = study.questions.get()
    keys = [label.key for label in question.labels.all()]
    ds = datasets.Dataset.from_parquet(str(folder / "data" / "sentiment.parquet"))
    assert ds.features["label"] == datasets.ClassLabel(names=keys)
    assert ds.features["round"] == datasets.Value("int32")
    assert len(ds) == 18
    by_item = {}
    for row in ds:
        by_item.setdefault(row["item"], []).append(ds.features["label"].int2str(row["label"]))
    items = [item.external_id for item in study.items.order_by("position")]
    # every item's labels came back, as written
    assert sorted(sorted(v) for v in by_item.values()) == sorted(sorted(a) for a in ANSWERS)
    assert set(by_item) == set(items)
    assert set(ds["annotator"]) == {a.username for a in annotators}
    items_ds = datasets.Dataset.from_parquet(str(folder / "data" / "items.parquet"))
    assert sorted(items_ds["external_id"]) == sorted(items)


def test_load_dataset_reads_the_card_configs(answered, tmp_path):
    study, _ = answered
    folder, _ = export(study, tmp_path)
    ds = datasets.load_dataset(
        str(folder), "sentiment", split="train", cache_dir=str(tmp_path / "cache")
    )
    assert isinstance(ds.features["label"], datasets.ClassLabel)
    assert len(ds) == 18


def test_card_records_the_provenance_licence_exclusions_and_agreement(answered, tmp_path):
    study, annotators = answered
    annotator_exclude(
        study=study, annotator=annotators[2], by=study.created_by, reason="answers at random"
    )
    quality_process_pending(question_id=study.questions.get().pk)
    quality_publish(question_id=study.questions.get().pk)
    folder, record = export(study, tmp_path, identity="pseudonyms", license="cc-by-4.0")
    card = (folder / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["license"] == "cc-by-4.0"
    assert [c["config_name"] for c in header["configs"]] == ["items", "sentiment"]
    name = annotator_names(study_id=study.pk, identity="pseudonyms")
    assert f"- {name(annotators[2].username)}: answers at random" in card
    for annotator in annotators:
        assert annotator.username not in card
    # the card states the dashboard's figures (all three annotators), saying one is left out
    assert "all 3 annotators of the question, 1 of them left out of these files" in card
    ds = datasets.Dataset.from_parquet(str(folder / "data" / "sentiment.parquet"))
    assert set(ds["annotator"]) == {name(a.username) for a in annotators[:2]}
    for path, info in record["files"].items():
        assert hashlib.sha256((folder / path).read_bytes()).hexdigest() == info["sha256"]
    assert json.loads((folder / "provenance.json").read_text())["options"] == {
        "curated": True,
        "annotators": "pseudonyms",
        "license": "cc-by-4.0",
    }


def test_card_computes_its_figures_on_the_rows_it_ships(answered, tmp_path):
    """Issue 23: after excluding a random annotator the card gave only the dashboard's alpha
    of all annotators beside files without them; it now computes alpha once on the curated
    round-1 rows, names them, and says why the dashboard's figure differs."""
    study, annotators = answered
    annotator_exclude(
        study=study, annotator=annotators[2], by=study.created_by, reason="answers at random"
    )
    question = study.questions.get()
    quality_process_pending(question_id=question.pk)
    quality_publish(question_id=question.pk)
    folder, record = export(study, tmp_path)
    card = (folder / "README.md").read_text()
    own = record["questions"][0]["curated_figures"]
    assert (own["annotators"], own["answers"], own["items"]) == (2, 12, 6)
    assert own["alpha"][0] == pytest.approx(1.0)  # annotators 0 and 1 agree on every item
    assert own["level"] == "ordinal"
    assert (
        "On the curated rows (round 1): 2 annotators, 12 answers, 6 items with two or "
        "more: Krippendorff alpha (ordinal) 1.000" in card
    )
    assert "they count the annotators left out too" in card
    # the export's provenance computes the same figure on the same rows, and names them
    rows = record["export"]["figures_on_rows"]
    assert rows["rows"] == "curated"
    same = rows["questions"][question.key]
    assert (same["annotators"], same["answers"], same["items"]) == (2, 12, 6)
    assert same["alpha"][0] == pytest.approx(own["alpha"][0], abs=1e-9)
    _, everything = export(study, tmp_path / "all", curated=False)
    every = everything["export"]["figures_on_rows"]
    assert every["rows"] == "all"
    assert every["questions"][question.key]["annotators"] == 3
    assert every["questions"][question.key]["alpha"][0] < 0.9  # the random annotator counts


def test_card_figure_on_all_rows_is_the_dashboards_computation(answered, tmp_path, settings):
    """Issue 23: the card, the dashboard and the model page computed alpha and Fleiss' kappa
    separately. The card now calls the dashboard's function (``rows_agreement``, same
    replicates and seed): on the same rows (nothing excluded) it gives the dashboard's
    figure."""
    settings.QUALITY_INTERVAL_SECONDS = 120
    study, _ = answered
    question = study.questions.get()
    quality_process_pending(question_id=question.pk)
    snapshot = quality_publish(question_id=question.pk)
    dashboard = quality_record(snapshot, question_kind(question.kind))["study"]["alpha"]
    _, record = export(study, tmp_path, curated=False)
    own = record["questions"][0]["curated_figures"]
    assert own["alpha"][0] == pytest.approx(dashboard["value"], abs=1e-3)
    assert (own["annotators"], own["answers"], own["items"]) == (3, 18, 6)


def test_trace_card_computes_its_figure_on_the_traces_it_ships(tmp_path):
    """Issue 23: a curated trace section read "4 rows from 1 annotators" beside a pooled
    kappa_SDA that counted the excluded annotator; it now states the figure of the traces
    it ships (none from one annotator), and names them."""
    ts = make_trace_study()
    for annotator in ts.annotators:
        record_through_api(ts, annotator)
    from apps.continuous.quality import quality_traces_process

    quality_traces_process(question_id=ts.question.pk)
    folder, record = export(ts.study, tmp_path / "all", curated=False)
    both = record["questions"][0]["curated_traces"]
    assert (both["annotators"], both["traces"]) == (2, 2)
    assert set(both["figures"]) == {"icc", "pooled_kappa_sda"}
    card = (folder / "README.md").read_text()
    # both traces are constant (0.25): no step changes sign, kappa_SDA is undefined
    assert "On the rows in these files (round 1): 2 annotators, 2 traces: ICC" in card
    assert "pooled kappa_SDA undefined." in card
    annotator_exclude(
        study=ts.study, annotator=ts.annotators[1], by=ts.study.created_by, reason="flat"
    )
    folder, record = export(ts.study, tmp_path / "curated")
    card = (folder / "README.md").read_text()
    assert "1 row from 1 annotator." in card
    assert (
        "On the curated rows (round 1): 1 annotator, 1 trace: no agreement figure (it needs "
        "two annotators' traces of one item)." in card
    )


def test_traces_are_a_sequence_of_floats(tmp_path):
    ts = make_trace_study()
    for annotator in ts.annotators:
        record_through_api(ts, annotator)
    folder, _ = export(ts.study, tmp_path)
    ds = datasets.Dataset.from_parquet(str(folder / "data" / "arousal.parquet"))
    assert ds.features["values"] == datasets.Sequence(datasets.Value("float32"))
    assert ds[0]["values"] == [0.25] * 21
    assert ds[0]["rate_hz"] == 1.0


def test_the_api_sends_the_zip_to_managers_only(answered):
    study, annotators = answered
    client = APIClient()
    client.force_authenticate(annotators[0])
    url = f"/api/studies/{study.pk}/export/huggingface/"
    assert client.get(url).status_code == 403
    client.force_authenticate(study.created_by)
    response = client.get(url, {"license": "cc0-1.0", "curated": "0"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == (
        f'attachment; filename="study-{study.pk}-huggingface.zip"'
    )
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        names = set(archive.namelist())
        card = archive.read("README.md").decode()
    assert names == {"README.md", "provenance.json", "data/items.parquet", "data/sentiment.parquet"}
    assert "license: cc0-1.0" in card
    assert client.get(url, {"license": "proprietary"}).status_code == 400


def test_the_overview_links_the_web_download(answered, client):
    study, _ = answered
    client.force_login(study.created_by)
    url = f"/studies/{study.pk}/export/huggingface.zip"
    assert url in client.get(f"/studies/{study.pk}/").content.decode()
    response = client.get(url, {"annotators": "pseudonyms", "license": "cc-by-4.0"})
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        card = archive.read("README.md").decode()
    assert "license: cc-by-4.0" in card
    assert "annotators named by pseudonyms" in card
    assert client.get(url, {"license": "mine"}).status_code == 400


def test_card_states_the_dashboards_figures_not_a_second_computation(answered, tmp_path, settings):
    """The ordered test scale: the card's agreement is the dashboard's (the kind's StudyFigure
    specs read from the question's snapshot by ``quality_record``), intervals included."""
    settings.QUALITY_INTERVAL_SECONDS = 120
    study, _ = answered
    question = study.questions.get()
    quality_process_pending(question_id=question.pk)
    snapshot = quality_publish(question_id=question.pk)
    dashboard = quality_record(snapshot, question_kind(question.kind))["study"]
    folder, record = export(study, tmp_path)
    card = (folder / "README.md").read_text()
    figures = record["questions"][0]["quality"]["study"]
    assert figures == dashboard
    alpha = dashboard["alpha"]
    assert alpha["low"] < alpha["value"] < alpha["high"]
    line = f"- {alpha['label']}: {alpha['value']:.3f} [{alpha['low']:.3f}, {alpha['high']:.3f}]"
    assert line in card
    html = APIClient()
    html.force_authenticate(study.created_by)
    url = f"/api/studies/{study.pk}/questions/{question.pk}/quality/"
    assert html.get(url).json()["study"]["alpha"]["value"] == alpha["value"]


def test_card_says_what_a_figure_without_an_interval_counts(answered, tmp_path):
    """Before the first interval set (the tests' default) a study figure is printed with the
    answers it counts, not as a bare value and not as a count of items it does not have."""
    study, _ = answered
    question = study.questions.get()
    quality_process_pending(question_id=question.pk)
    snapshot = quality_publish(question_id=question.pk)
    alpha = quality_record(snapshot, question_kind(question.kind))["study"]["alpha"]
    assert alpha["low"] is None
    assert (alpha["evidence"], alpha["unit"]) == (18, "answers")
    folder, _ = export(study, tmp_path)
    card = (folder / "README.md").read_text()
    assert f"- {alpha['label']}: {alpha['value']:.3f} (interval not computed; 18 answers)." in card
