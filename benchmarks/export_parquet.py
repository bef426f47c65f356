"""Export time and peak memory of a large study: 500,000 answers as Parquet, CSV and JSON Lines.

Seeds a study of ``--items`` items answered by ``--annotators`` annotators each (one categorical
question; 5,000 x 100 = 500,000 answers by default, bulk-imported) in a SQLite file under
``--dir`` (kept, so a second run skips the seeding), then exports it once per format, each in a
fresh Python process that writes the file to disk through the same chunks the download streams
(:func:`apps.annotations.exporting.export_bytes`). For each it prints the wall time, the file
size, the peak resident memory of the process (``ru_maxrss``) and that peak minus the process's
resident memory just before the export started (Django, pyarrow and the ORM loaded). The
``parquet-whole`` line builds the same file the naive way (every row in one Arrow table, then
``pyarrow.parquet.write_table``) to show what streaming row groups saves.

Run from the repository root::

    .venv/bin/python -m benchmarks.export_parquet [--items 5000] [--annotators 100]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.django_setup import ROOT, setup_django

LABELS = ["negative", "neutral", "positive"]
MODES = ("parquet", "csv", "jsonl", "parquet-whole")


def _seed(*, n_items: int, n_annotators: int) -> int:
    """A running study of ``n_items`` x ``n_annotators`` imported answers; its id."""
    from apps.annotations import importing
    from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
    from apps.items.models import Item
    from apps.studies.models import Membership, Study
    from apps.studies.services import membership_add
    from tests.factories import StudyFactory, UserFactory, categorical_question

    existing = Study.objects.filter(name="export benchmark").first()
    if existing is not None:
        return existing.pk
    study = StudyFactory(name="export benchmark")
    question = categorical_question(study)
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"item-{i}", text=f"Sentence {i}.", position=i)
            for i in range(n_items)
        ],
        batch_size=5000,
    )
    users = [UserFactory() for _ in range(n_annotators)]
    for user in users:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING)
    records = (
        FinishedAnnotation(
            f"item-{i}", user.username, question.key, LABELS[(i * (k + 1)) % 3], 1, 900 + i % 700
        )
        for k, user in enumerate(users)
        for i in range(n_items)
    )
    importing._rebuild_quality = lambda question_ids: None  # not what is measured here
    annotations_import_finished(study=study, records=records)
    return study.pk


def _rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _export(*, study_id: int, mode: str, output: Path) -> None:
    """Write one export to ``output`` and print its figures (run in a fresh process)."""
    from apps.annotations.exporting import export_bytes
    from apps.annotations.models import Annotation
    from apps.studies.models import Study

    study = Study.objects.get(pk=study_id)
    n_rows = Annotation.objects.filter(question__study=study).count()
    before = _rss_mb()
    started = time.perf_counter()
    if mode == "parquet-whole":
        _write_whole(study, output)
    else:
        with output.open("wb") as stream:
            for chunk in export_bytes(study=study, fmt=mode):
                stream.write(chunk)
    took = time.perf_counter() - started
    peak = _rss_mb()
    print(
        f"{mode:<14} {n_rows:>9,} rows {took:>7.2f} s {output.stat().st_size / 1e6:>8.2f} MB  "
        f"peak RSS {peak:>7.1f} MB (+{peak - before:.1f} MB for the export)",
        flush=True,
    )


def _write_whole(study: Any, output: Path) -> None:
    """The naive way: every row in memory, one Arrow table, one write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from apps.annotations.exporting import EXPORT_SCHEMA, annotation_export_rows
    from apps.exchange.formats import arrow_schema

    rows = list(annotation_export_rows(study=study))
    for row in rows:
        row["value"] = json.dumps(row["value"])
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(EXPORT_SCHEMA)), output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--annotators", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "export-bench")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--export", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--study", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    setup_django(args.dir, fast_passwords=True)
    if args.export:
        _export(study_id=args.study, mode=args.export, output=args.dir / f"export.{args.export}")
        return
    started = time.perf_counter()
    study_id = _seed(n_items=args.items, n_annotators=args.annotators)
    print(f"study {study_id} ready in {time.perf_counter() - started:.1f} s ({args.dir})")
    for mode in args.modes.split(","):
        command = ["-m", "benchmarks.export_parquet", "--dir", str(args.dir), "--export", mode]
        subprocess.run(
            [sys.executable, *command, "--study", str(study_id)],
            cwd=ROOT,
            check=True,
        )


if __name__ == "__main__":
    main()
