"""Curated exports: excluded annotators left out, the provenance record, downloads and command."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from analytics.models import Flag
from analytics.services import annotator_exclude, annotator_include
from apps.annotations.exporting import (
    EXPORT_COLUMNS,
    _git_commit,
    annotation_export_rows,
    export_bytes,
    provenance,
)
from apps.annotations.management.commands import export_annotations
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = pytest.mark.django_db

REASON = "Answers at random: agreement with gold far below the others."


def answer_items(study, user, labels: list[str]) -> None:
    """``user`` answers their next items with ``labels``, one each."""
    question = study.questions.get()
    for label in labels:
        annotations_submit(
            annotator=user,
            assignment=assignment_next(annotator=user, study=study),
            answers={question: label},
            idempotency_key=uuid.uuid4(),
            time_spent_ms=800,
        )


def flag(study, annotator, indicator: str, **fields: object) -> Flag:
    return Flag.objects.create(
        study=study,
        question=study.questions.get(),
        annotator=annotator,
        indicator=indicator,
        reason=f"{indicator} far from the others",
        figures={"value": 0.1, "median": 0.8, "z": -4.2, "evidence": 30},
        **fields,
    )


@pytest.fixture
def curated(study_setup):
    """ann0 (excluded, with an open and a dismissed flag) answers 2 items, ann1 (open flag,
    kept) 3, ann2 2; the question has an open study-wide flag."""
    study, (ann0, ann1, ann2) = study_setup
    answer_items(study, ann0, ["positive", "negative"])
    answer_items(study, ann1, ["positive", "neutral", "neutral"])
    answer_items(study, ann2, ["negative", "negative"])
    flag(study, ann0, "gold_accuracy")
    flag(study, ann0, "kappa_mean", status=Flag.Status.DISMISSED)
    flag(study, ann1, "self_agreement")
    flag(study, None, "alpha")
    annotator_exclude(study=study, annotator=ann0, by=study.created_by, reason=REASON)
    return study, ann0, ann1, ann2


def annotators_in(rows) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["annotator"]] = counts.get(row["annotator"], 0) + 1
    return counts


def body(response) -> bytes:
    return b"".join(response.streaming_content)


# ---------- Rows ----------


@pytest.mark.parametrize("include_history", [False, True])
def test_curated_rows_leave_out_excluded_annotators_only(curated, include_history):
    study, ann0, ann1, ann2 = curated
    everyone = annotators_in(annotation_export_rows(study=study, include_history=include_history))
    assert everyone == {ann0.username: 2, ann1.username: 3, ann2.username: 2}
    kept = annotators_in(
        annotation_export_rows(study=study, include_history=include_history, curated=True)
    )
    assert kept == {ann1.username: 3, ann2.username: 2}


def test_a_revoked_exclusion_brings_the_rows_back(curated):
    study, ann0, *_ = curated
    annotator_include(study=study, annotator=ann0, by=study.created_by)
    rows = annotators_in(annotation_export_rows(study=study, curated=True))
    assert rows[ann0.username] == 2
    assert (
        provenance(study=study, curated=True, include_history=False, fmt="csv")["exclusions"] == []
    )


# ---------- Provenance ----------


def test_provenance_counts_reasons_and_flags(curated):
    study, ann0, ann1, _ = curated
    record = provenance(study=study, curated=True, include_history=False, fmt="jsonl")
    assert record["study"] == {"id": study.pk, "name": study.name, "status": "running"}
    assert record["options"] == {
        "format": "jsonl",
        "curated": True,
        "include_history": False,
        "annotators": "usernames",
    }
    assert record["generated_at"].endswith("+00:00")
    assert record["software"]["name"] == "annotation-studio"
    assert record["software"]["version"]
    assert record["counts"] == {
        "rows_total": 7,
        "rows_exported": 5,
        "annotators_total": 3,
        "annotators_kept": 2,
    }
    assert record["file"]["name"] == f"study-{study.pk}-annotations-curated.jsonl"
    assert record["file"]["columns"] == list(EXPORT_COLUMNS)
    assert record["file"]["rows"] == 5
    (exclusion,) = record["exclusions"]
    assert exclusion["annotator"] == ann0.username
    assert exclusion["excluded_by"] == study.created_by.username
    assert exclusion["reason"] == REASON
    assert (exclusion["applied"], exclusion["rows_left_out"]) == (True, 2)
    # the open flag was confirmed by the exclusion; the dismissed one stays dismissed
    assert {(f["indicator"], f["status"]) for f in exclusion["flags"]} == {
        ("gold_accuracy", "confirmed"),
        ("kappa_mean", "dismissed"),
    }
    gold = next(f for f in exclusion["flags"] if f["indicator"] == "gold_accuracy")
    assert gold["reason"] == "gold_accuracy far from the others"
    assert gold["figures"]["z"] == -4.2
    assert gold["question"] == "sentiment"
    # known but not acted on: the kept annotator's open flag and the study-wide one
    assert {(f["annotator"], f["indicator"]) for f in record["open_flags"]} == {
        (ann1.username, "self_agreement"),
        (None, "alpha"),
    }
    json.dumps(record)  # plain JSON throughout


def test_uncurated_provenance_lists_exclusions_as_not_applied(curated):
    study, ann0, *_ = curated
    record = provenance(study=study, curated=False, include_history=True, fmt="csv")
    assert record["counts"]["rows_exported"] == record["counts"]["rows_total"] == 7
    assert record["counts"]["annotators_kept"] == 3
    (exclusion,) = record["exclusions"]
    assert (exclusion["annotator"], exclusion["applied"], exclusion["rows_left_out"]) == (
        ann0.username,
        False,
        0,
    )
    assert record["file"]["name"] == f"study-{study.pk}-annotations-history.csv"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_provenance_hash_matches_the_file_bytes(curated, fmt):
    study, *_ = curated
    record = provenance(study=study, curated=True, include_history=False, fmt=fmt)
    data = b"".join(export_bytes(study=study, fmt=fmt, curated=True))
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["file"]["bytes"] == len(data)


# ---------- Pages ----------


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_downloaded_curated_file_matches_its_provenance(client, curated, fmt):
    study, ann0, ann1, _ = curated
    client.force_login(study.created_by)
    response = client.get(reverse("annotations:export_curated", args=[study.pk, fmt]))
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="study-{study.pk}-annotations-curated.{fmt}"'
    )
    data = body(response)
    text = data.decode()
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
    else:
        rows = [json.loads(line) for line in text.splitlines()]
    assert ann0.username not in annotators_in(rows)
    assert ann1.username in annotators_in(rows)

    meta = client.get(reverse("annotations:export_provenance", args=[study.pk]), {"format": fmt})
    assert meta.status_code == 200
    assert meta["Content-Type"] == "application/json"
    assert meta["Content-Disposition"] == (
        f'attachment; filename="study-{study.pk}-annotations-curated.{fmt}.provenance.json"'
    )
    record = json.loads(meta.content)
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["file"]["rows"] == len(rows)


def test_curated_history_download_and_its_provenance(client, curated):
    study, ann0, *_ = curated
    client.force_login(study.created_by)
    url = reverse("annotations:export_curated", args=[study.pk, "jsonl"])
    data = body(client.get(url, {"history": "1"}))
    record = client.get(
        reverse("annotations:export_provenance", args=[study.pk]),
        {"format": "jsonl", "history": "1"},
    ).json()
    assert record["options"]["include_history"] is True
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert ann0.username.encode() not in data


def test_provenance_page_refuses_an_unknown_format(client, curated):
    study, *_ = curated
    client.force_login(study.created_by)
    url = reverse("annotations:export_provenance", args=[study.pk])
    assert client.get(url, {"format": "xlsx"}).status_code == 400


def curated_urls(study) -> list[str]:
    return [
        reverse("annotations:export_curated", args=[study.pk, "csv"]),
        reverse("annotations:export_curated", args=[study.pk, "jsonl"]),
        reverse("annotations:export_provenance", args=[study.pk]),
    ]


def test_anonymous_users_are_sent_to_log_in(client, curated):
    study, *_ = curated
    for url in curated_urls(study):
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))


def test_outsiders_get_404_and_annotators_403(client, curated, outsider):
    study, _, ann1, _ = curated
    for user, status in ((outsider, 404), (ann1, 403)):
        client.force_login(user)
        for url in curated_urls(study):
            assert client.get(url).status_code == status


def test_overview_offers_the_curated_downloads(client, curated):
    study, *_ = curated
    client.force_login(study.created_by)
    html = client.get(reverse("studies:overview", args=[study.pk])).content.decode()
    assert "Curated (without excluded annotators)" in html
    for url in curated_urls(study):
        assert f'href="{url}' in html
    assert "Provenance (JSON)" in html


# ---------- API ----------


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_api_curated_export_matches_its_provenance(api_client, curated, fmt):
    study, ann0, ann1, _ = curated
    api_client.force_authenticate(study.created_by)
    base = f"/api/studies/{study.pk}/export/"
    response = api_client.get(base, {"format": fmt, "curated": "1"})
    assert response.status_code == 200
    data = body(response)
    assert ann0.username.encode() not in data
    assert ann1.username.encode() in data
    meta = api_client.get(f"{base}provenance/", {"format": fmt, "curated": "1"})
    assert meta.status_code == 200
    record = meta.json()
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["exclusions"][0]["reason"] == REASON
    raw = api_client.get(f"{base}provenance/", {"format": fmt})
    assert raw.json()["counts"]["rows_exported"] == 7


def test_api_provenance_is_for_managers_only(api_client, curated, outsider):
    study, _, ann1, _ = curated
    url = f"/api/studies/{study.pk}/export/provenance/"
    assert api_client.get(url).status_code == 401
    api_client.force_authenticate(ann1)
    assert api_client.get(url).status_code == 403
    api_client.force_authenticate(outsider)
    assert api_client.get(url).status_code == 404


# ---------- Command ----------


def test_command_writes_the_file_and_its_provenance(curated, tmp_path: Path):
    study, ann0, *_ = curated
    output = tmp_path / "curated.csv"
    out = io.StringIO()
    call_command(
        "export_annotations",
        study.pk,
        "--format",
        "csv",
        "--curated",
        "--output",
        output,
        stdout=out,
    )
    data = output.read_bytes()
    record = json.loads((tmp_path / "curated.csv.provenance.json").read_text())
    assert record["file"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["options"] == {
        "format": "csv",
        "curated": True,
        "include_history": False,
        "annotators": "usernames",
    }
    assert ann0.username.encode() not in data
    assert data == b"".join(export_bytes(study=study, fmt="csv", curated=True))
    assert "5 of 7 rows" in out.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "curated.csv",
        "curated.csv.provenance.json",
    ]


def test_command_refuses_an_unknown_study(tmp_path: Path):
    with pytest.raises(CommandError, match="No study"):
        call_command("export_annotations", 999, "--format", "jsonl", "--output", tmp_path / "x")


def test_command_keeps_nothing_if_the_data_changed_meanwhile(curated, tmp_path: Path, monkeypatch):
    study, *_ = curated
    real = export_annotations.provenance

    def stale(**options: object) -> dict:
        record = real(**options)
        record["file"]["sha256"] = "0" * 64
        return record

    monkeypatch.setattr(export_annotations, "provenance", stale)
    with pytest.raises(CommandError, match="changed while exporting") as failure:
        call_command("export_annotations", study.pk, "--format", "csv", "--output", tmp_path / "a")
    assert failure.value.returncode == 2
    assert list(tmp_path.iterdir()) == []


# ---------- Software version and commit ----------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_git_commit_follows_loose_and_packed_refs_and_worktrees(settings, tmp_path: Path):
    settings.BASE_DIR = tmp_path
    assert _git_commit() is None  # no .git
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text(f"# pack-refs\n{COMMIT} refs/heads/main\n")
    assert _git_commit() == COMMIT
    (git / "refs" / "heads" / "main").write_text(COMMIT.replace("0", "f") + "\n")
    assert _git_commit() == COMMIT.replace("0", "f")
    (git / "HEAD").write_text("not a commit\n")
    assert _git_commit() is None

    worktree = tmp_path / "wt"
    (worktree / "meta").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: meta\n")
    (worktree / "meta" / "HEAD").write_text("ref: refs/heads/main\n")
    (worktree / "meta" / "commondir").write_text("../../.git\n")
    settings.BASE_DIR = worktree
    assert _git_commit() == COMMIT.replace("0", "f")


def test_the_provenance_of_a_question_without_answers_says_it_rests_on_no_rows(db):
    """A study whose categorical question has no answer yet (a mixed study's label question
    before anyone reached it): the figures on the rows were a ValueError ("ratings is
    empty"), so no export of the study could be provenanced."""
    study, _ = running_study(n_items=3, n_annotators=2)
    record = provenance(study=study, curated=True, include_history=False, fmt="csv")
    (entry,) = record["figures_on_rows"]["questions"].values()
    assert (entry["annotators"], entry["answers"], entry["items"]) == (0, 0, 0)
    assert entry["alpha"] == [None, None, None]
