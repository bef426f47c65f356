"""A study as a Hugging Face dataset: one Parquet file per question, a dataset card, a zip.

The zip holds ``data/items.parquet`` (the stimuli), one ``data/<question>.parquet`` per
question, ``README.md`` (the dataset card) and ``provenance.json``. Each Parquet file carries
its Hugging Face features in the schema metadata under the key ``huggingface``
(``{"info": {"features": ...}}``, as ``datasets`` itself writes them), so
``datasets.Dataset.from_parquet`` gives a categorical question's ``label`` column as a
``ClassLabel`` with the label keys as names (index = the label's position on the scale) and a
trace's ``values`` as a sequence of floats; ``pandas.read_parquet`` reads the same files. The
card's YAML header names one config per file (``load_dataset("path/to/unzipped", "emotion")``).

The card records the provenance: the study and its questions with their label schemes, the
annotators kept and those excluded (by whom, when, why), the question's agreement figures with
their 95 % intervals exactly as the quality dashboard, the API and the export provenance state
them (the kind's :class:`~analytics.indicators.StudyFigure` specs read from the latest
snapshot by :func:`analytics.intervals.quality_record`: no second computation, so an ordered
scale's figures are the dashboard's), the software version and commit, the licence given, and
the SHA-256 of every file.

The export is curated by default (excluded annotators left out) and names annotators by
username or by per-study pseudonyms (:mod:`apps.exchange.identity`). Every file is written to
the zip as it is produced, row group by row group, so memory stays bounded; the caller gives a
binary file to write into (a temporary file for a download).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
from django.http import FileResponse
from django.utils import timezone

from analytics.metrics.intervals import item_bootstrap_seed, rows_agreement
from analytics.selectors import excluded_annotator_ids
from apps.annotations.exporting import annotation_export_rows, provenance
from apps.arena.exporting import arena_preference_rows
from apps.arena.selectors import arena_results
from apps.continuous.exporting import TRACE_SCHEMA, trace_rows
from apps.continuous.quality import trace_study_figures
from apps.continuous.selectors import current_traces
from apps.exchange.formats import Column, parquet_bytes
from apps.exchange.identity import USERNAMES, annotator_names
from apps.preferences.exporting import (
    JUDGEMENT_SCHEMA,
    PREFERENCE_SCHEMA,
    judgement_rows,
    preference_rows,
)
from apps.preferences.selectors import curated_scores
from apps.studies.models import Question, Study

SCHEMA = "annotation-studio/hf-dataset/1"
LICENSES = ("other", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc0-1.0", "mit", "unknown")

ITEM_SCHEMA = (
    Column("external_id", "str"),
    Column("kind", "str"),
    Column("text", "str"),
    Column("url", "str"),
    Column("metadata", "json"),
)
CATEGORICAL_SCHEMA = (
    Column("item", "str"),
    Column("annotator", "str"),
    Column("round", "int32"),
    Column("label", "int"),  # a ClassLabel: the label's index in the question's scale
    Column("time_spent_ms", "int"),
    Column("created_at", "timestamp"),
)

#: Column type -> Hugging Face feature (``Features.to_dict()`` form). ``Sequence`` rather than
#: the newer ``List`` so that ``datasets`` 2.x and 3.x read it too (4.x maps it to ``List``).
_FEATURES: dict[str, dict[str, Any]] = {
    "int": {"dtype": "int64", "_type": "Value"},
    "int32": {"dtype": "int32", "_type": "Value"},
    "float": {"dtype": "float64", "_type": "Value"},
    "str": {"dtype": "string", "_type": "Value"},
    "bool": {"dtype": "bool", "_type": "Value"},
    "timestamp": {"dtype": "timestamp[us, tz=UTC]", "_type": "Value"},
    "json": {"dtype": "string", "_type": "Value"},
    "floats": {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "Sequence"},
}


def hf_features(
    columns: Sequence[Column], *, class_labels: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The Hugging Face features of ``columns``; the columns named in ``class_labels`` (integer
    indexes) become ``ClassLabel`` features with those names."""
    class_labels = class_labels or {}
    return {
        column.name: (
            {"names": list(class_labels[column.name]), "_type": "ClassLabel"}
            if column.name in class_labels
            else _FEATURES[column.type]
        )
        for column in columns
    }


def hf_metadata(features: Mapping[str, Any]) -> dict[str, str]:
    """Parquet schema metadata that ``datasets`` reads its features from."""
    return {"huggingface": json.dumps({"info": {"features": features}})}


@dataclass
class _Table:
    """One Parquet file of the dataset: its config name, columns, features and rows."""

    config: str
    columns: Sequence[Column]
    features: dict[str, Any]
    rows: Iterable[Mapping[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    #: Round-1 (annotator, item, scale index) of the rows written (categorical questions),
    #: filled as the rows stream out: the card's figures are computed on exactly these.
    round_one: list[tuple[str, str, int]] = field(default_factory=list)
    #: The question's id (its figures' bootstrap seed is the dashboard's).
    question_id: int | None = None

    @property
    def path(self) -> str:
        return f"data/{self.config}.parquet"


def dataset_zip(
    *,
    study: Study,
    stream: IO[bytes],
    curated: bool = True,
    identity: str = USERNAMES,
    license: str = "other",
) -> dict[str, Any]:
    """Write the study's Hugging Face dataset as a zip into ``stream``; return its record.

    Parameters
    ----------
    study : Study
    stream : binary file
        Written from its current position (a seekable file: the zip's directory comes last).
    curated : bool
        Leave out the annotators excluded on the quality dashboard.
    identity : {"usernames", "pseudonyms"}
        How annotators are named in the files and the card.
    license : str
        The licence identifier written in the card (one of :data:`LICENSES`).

    Returns
    -------
    dict
        The record also written as ``provenance.json``: ``schema``, ``generated_at``,
        ``options``, ``files`` (path -> rows, bytes, sha256), ``questions`` (config, kind,
        label names, rows, annotators, agreement) and ``export`` (the provenance record of the
        annotation export with the same options: exclusions, open flags, software).
    """
    if license not in LICENSES:
        raise ValueError(f"Unknown licence {license!r}; use one of {', '.join(LICENSES)}.")
    name = annotator_names(study_id=study.pk, identity=identity)
    left_out = excluded_annotator_ids(study=study) if curated else set()
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "generated_at": timezone.now().isoformat(),
        "options": {"curated": curated, "annotators": identity, "license": license},
        "files": {},
        "questions": [],
        "export": provenance(
            study=study, curated=curated, include_history=False, fmt="parquet", identity=identity
        ),
    }
    tables = [_items_table(study)] + [
        _question_table(question, curated=curated, identity=identity, name=name, left_out=left_out)
        for question in study.questions.order_by("position", "id").prefetch_related("labels")
    ]
    tables += [
        _preference_table(question, curated=curated, name=name)
        for question in study.questions.filter(kind=Question.Kind.PAIRWISE).order_by(
            "position", "id"
        )
    ]
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED) as archive:
        for table in tables:
            record["files"][table.path] = _write(archive, table)
            if table.summary:
                if table.round_one:
                    table.summary["curated_figures"] = _figures_of_rows(
                        table.round_one, ordered=table.summary["ordered"], seed=table.question_id
                    )
                record["questions"].append(table.summary)
        for summary in record["questions"]:
            summary["quality"] = _dashboard_figures(summary, record["export"]["quality"])
        archive.writestr("README.md", dataset_card(study=study, record=record))
        archive.writestr("provenance.json", json.dumps(record, indent=2, ensure_ascii=False))
    return record


def _write(archive: zipfile.ZipFile, table: _Table) -> dict[str, Any]:
    """Stream one table into the zip; its rows, bytes and SHA-256."""
    digest, size, counter = hashlib.sha256(), 0, _Counter()
    chunks = parquet_bytes(
        counter.count(table.rows), columns=table.columns, metadata=hf_metadata(table.features)
    )
    with archive.open(table.path, "w", force_zip64=True) as member:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            member.write(chunk)
    if table.summary:
        table.summary["rows"] = counter.n
    return {"rows": counter.n, "bytes": size, "sha256": digest.hexdigest()}


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def count(self, rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for row in rows:
            self.n += 1
            yield row


def _items_table(study: Study) -> _Table:
    items = (
        {"external_id": e, "kind": k, "text": t, "url": u, "metadata": m}
        for e, k, t, u, m in study.items.order_by("position", "id")
        .values_list("external_id", "kind", "text", "url", "metadata")
        .iterator(chunk_size=2000)
    )
    return _Table("items", ITEM_SCHEMA, hf_features(ITEM_SCHEMA), items)


def _question_table(
    question: Question,
    *,
    curated: bool,
    identity: str,
    name: Callable[[str], str],
    left_out: set[int],
) -> _Table:
    summary: dict[str, Any] = {
        "config": question.key,
        "kind": question.kind,
        "prompt": question.prompt,
        "ordered": question.ordered,
        "labels": [],
        "annotators": [],
    }
    if question.kind == Question.Kind.CATEGORICAL:
        labels = list(question.labels.all())
        summary["labels"] = [{"name": label.key, "display": label.name} for label in labels]
        round_one: list[tuple[str, str, int]] = []
        rows = _categorical_rows(
            question,
            labels,
            curated=curated,
            identity=identity,
            summary=summary,
            round_one=round_one,
        )
        features = hf_features(
            CATEGORICAL_SCHEMA, class_labels={"label": [label.key for label in labels]}
        )
        return _Table(
            question.key, CATEGORICAL_SCHEMA, features, rows, summary, round_one, question.pk
        )
    if question.kind == Question.Kind.CONTINUOUS:
        recordings = current_traces(question=question).exclude(annotator_id__in=left_out)
        rows = _noting_annotators(trace_rows(recordings, name=name), summary)
        summary["curated_traces"] = _trace_figures(question, left_out=left_out)
        return _Table(question.key, TRACE_SCHEMA, hf_features(TRACE_SCHEMA), rows, summary)
    if question.kind == Question.Kind.ARENA:  # its votes as preference pairs, ties kept
        found = arena_results(question=question, left_out=left_out, n_boot=0)
        rows = _noting_annotators(
            arena_preference_rows(
                question=question, results=found, name=name, left_out=left_out, ties=True
            ),
            summary,
        )
        return _Table(
            question.key, PREFERENCE_SCHEMA, hf_features(PREFERENCE_SCHEMA), rows, summary
        )
    rows = _noting_annotators(
        judgement_rows(question=question, name=name, left_out=left_out), summary
    )
    return _Table(question.key, JUDGEMENT_SCHEMA, hf_features(JUDGEMENT_SCHEMA), rows, summary)


#: The config of a pairwise question's preference pairs: ``<question key>-preferences``.
PREFERENCES_SUFFIX = "-preferences"


def _preference_table(question: Question, *, curated: bool, name: Callable[[str], str]) -> _Table:
    """A pairwise question's judgements as preference pairs for training (``prompt``,
    ``chosen``, ``rejected``: the columns DPO-style trainers read), ties left out, fitted and
    filtered like the curated answers (:func:`~apps.preferences.exporting.preference_rows`)."""
    left_out, scores = curated_scores(question=question, curated=curated)
    rows = preference_rows(question=question, scores=scores, name=name, left_out=left_out)
    config = f"{question.key}{PREFERENCES_SUFFIX}"
    return _Table(config, PREFERENCE_SCHEMA, hf_features(PREFERENCE_SCHEMA), rows)


#: Bootstrap replicates of the card's own alpha interval: the dashboard's
#: (:func:`~analytics.metrics.intervals.indicator_intervals_categorical`'s default).
CARD_BOOTSTRAP = 1000


def _figures_of_rows(
    triples: Sequence[tuple[str, str, int]], *, ordered: bool, seed: int | None
) -> dict[str, Any]:
    """The dashboard's study figures (:func:`~analytics.metrics.intervals.rows_agreement`,
    the function the dashboard calls, with its replicates and seed) computed once on the
    round-1 rows the file ships, and what they are: annotators, answers, items with two or
    more answers. Krippendorff's alpha (ordinal on an ordered scale); Fleiss' kappa on an
    unordered scale, as the dashboard."""
    annotators = sorted({t[0] for t in triples})
    items = sorted({t[1] for t in triples})
    row, col = {a: k for k, a in enumerate(annotators)}, {i: k for k, i in enumerate(items)}
    ratings = np.full((len(annotators), len(items)), np.nan)
    for annotator, item, code in triples:
        ratings[row[annotator], col[item]] = code
    found = rows_agreement(
        ratings,
        ordered=ordered,
        n_boot=CARD_BOOTSTRAP,
        seed=None if seed is None else item_bootstrap_seed(seed),
    )
    out = {
        "annotators": found.annotators,
        "answers": found.answers,
        "level": found.level,
        "alpha": [_rounded(x) for x in found.alpha[:3]],
        "items": found.items,
    }
    if not ordered:
        out["fleiss_kappa"] = [_rounded(x) for x in found.fleiss_kappa[:3]]
    return out


def _trace_figures(question: Question, *, left_out: set[int]) -> dict[str, Any]:
    """The dashboard's trace study figures (:func:`apps.continuous.quality.trace_study_figures`,
    the computation behind the dashboard's) on the round-1 traces of the annotators kept."""
    found = trace_study_figures(question, left_out=left_out)
    return {
        "annotators": found["annotators"],
        "traces": found["traces"],
        "figures": {
            key: [_rounded(x) for x in interval[:3]] for key, interval in found["figures"].items()
        },
    }


def _rounded(x: Any) -> float | None:
    value = float(x)
    return round(value, 6) if np.isfinite(value) else None


def _noting_annotators(
    rows: Iterable[dict[str, Any]], summary: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.setdefault(row["annotator"])
        yield row
    summary["annotators"] = list(seen)


def _categorical_rows(
    question: Question,
    labels: list[Any],
    *,
    curated: bool,
    identity: str,
    summary: dict[str, Any],
    round_one: list[tuple[str, str, int]],
) -> Iterator[dict[str, Any]]:
    """The question's current answers with the label as its scale index; notes the round-1
    annotators and answers (into ``round_one``) as it goes."""
    index = {label.key: k for k, label in enumerate(labels)}
    annotators: set[str] = set()
    rows = annotation_export_rows(
        study=question.study, curated=curated, identity=identity, question_id=question.pk
    )
    for row in rows:
        label = index[row["label"]]
        if row["round"] == 1:
            annotators.add(row["annotator"])
            round_one.append((row["annotator"], row["item"], label))
        yield {
            "item": row["item"],
            "annotator": row["annotator"],
            "round": row["round"],
            "label": label,
            "time_spent_ms": row["time_spent_ms"],
            "created_at": row["created_at"],
        }
    summary["annotators"] = sorted(annotators)


def _dashboard_figures(summary: Mapping[str, Any], quality: Mapping[str, Any]) -> dict[str, Any]:
    """The question's study figures as the dashboard shows them (from the export provenance's
    :func:`~analytics.intervals.study_quality`), when they were computed, and how many of the
    annotators they count are not in the files."""
    found = quality.get(summary["config"])
    if found is None:
        return {"study": {}}
    counted = {row["annotator"] for row in found["annotators"]}
    return {
        "study": found["study"],
        "intervals": found["intervals"],
        "annotators": len(counted),
        "left_out": len(counted - set(summary["annotators"])),
    }


def dataset_card(*, study: Study, record: Mapping[str, Any]) -> str:
    """The dataset card (README.md): YAML header with licence and configs, then provenance."""
    export = record["export"]
    options = record["options"]
    configs = ["items"] + [summary["config"] for summary in record["questions"]]
    configs += [
        path.removeprefix("data/").removesuffix(".parquet")
        for path in record["files"]
        if path.endswith(f"{PREFERENCES_SUFFIX}.parquet")
    ]
    header = [
        "---",
        f"license: {options['license']}",
        f"pretty_name: {json.dumps(study.name)}",
        "tags:",
        "- annotation-studio",
        "- human-annotation",
        "configs:",
    ]
    for config in configs:
        header += [
            f"- config_name: {config}",
            "  data_files:",
            "  - split: train",
            f"    path: data/{config}.parquet",
        ]
    header.append("---")
    software = export["software"]
    lines = [
        f"# {study.name}",
        "",
        f"Annotations exported from annotation-studio (study {study.pk}, status "
        f"{study.status}) on {record['generated_at']}.",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'answers = load_dataset("path/to/this/folder", "{configs[-1]}")',
        "```",
        "",
        "## Questions",
        "",
    ]
    for summary in record["questions"]:
        lines += _question_section(summary, curated=options["curated"])
    for config in configs:
        if config.endswith(PREFERENCES_SUFFIX):
            lines += [
                f"### `{config}`: preference pairs for training",
                "",
                f"One row per judged pair of `{config.removesuffix(PREFERENCES_SUFFIX)}` "
                "(ties and undone judgements left out): `prompt`, `chosen` and `rejected`, "
                "the columns DPO-style trainers read (TRL's `DPOTrainer`), with the "
                "annotator's weight in the pooled Bradley-Terry fit and the fit's margin "
                "(`bt_margin`, log strength of chosen minus rejected), fitted on these rows' "
                "annotators.",
                "",
            ]
    lines += _annotator_section(export, options)
    lines += [
        "## Files",
        "",
        "| file | rows | bytes | sha256 |",
        "|---|---|---|---|",
        *(
            f"| `{path}` | {info['rows']} | {info['bytes']} | `{info['sha256']}` |"
            for path, info in record["files"].items()
        ),
        "",
        "## Provenance",
        "",
        f"- Software: {software['name']} {software['version']}, commit "
        f"{software['git_commit'] or 'unknown'}.",
        f"- Curated: {'yes' if options['curated'] else 'no'}; annotators named by "
        f"{options['annotators']}.",
        "- `provenance.json` beside this card holds the full record (every exclusion with the "
        "flags behind it, the open flags of the annotators kept).",
        "",
        "## Licence",
        "",
        f"`{options['license']}` (set by the study's manager at export).",
        "",
    ]
    return "\n".join(header + lines)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


#: Readable names of the trace study figures on the card.
TRACE_FIGURE_NAMES = {"icc": "ICC", "pooled_kappa_sda": "pooled kappa_SDA"}


def _interval_words(
    figure: Sequence[float | None], method: str = "", *, missing: str = "too little overlap"
) -> str:
    estimate, low, high = figure
    if estimate is None:
        return missing
    how = f"95 %, {method}" if method else "95 %"
    bounds = "" if low is None or high is None else f" [{low:.3f}, {high:.3f}] ({how})"
    return f"{estimate:.3f}{bounds}"


def _question_section(summary: Mapping[str, Any], *, curated: bool) -> list[str]:
    lines = [
        f"### `{summary['config']}` ({summary['kind']})",
        "",
        f"Prompt: {summary['prompt']}",
        "",
        f"{_count(summary.get('rows', 0), 'row')} from "
        f"{_count(len(summary['annotators']), 'annotator')}.",
        "",
    ]
    if summary["labels"]:
        scale = "ordered (ordinal)" if summary["ordered"] else "unordered (nominal)"
        lines += [
            f"Labels, {scale}; `label` is a ClassLabel whose index is the position below:",
            "",
            *(
                f"{k}. `{label['name']}`: {label['display']}"
                for k, label in enumerate(summary["labels"])
            ),
            "",
        ]
    own = summary.get("curated_figures")
    if own:
        rows = "On the curated rows" if curated else "On the rows in these files"
        shown = f"Krippendorff alpha ({own['level']}) " + _interval_words(
            own["alpha"], "item bootstrap"
        )
        if "fleiss_kappa" in own:
            shown += "; Fleiss kappa " + _interval_words(own["fleiss_kappa"], "Gwet")
        lines += [
            f"{rows} (round 1): {_count(own['annotators'], 'annotator')}, "
            f"{_count(own['answers'], 'answer')}, {own['items']:,} items with two or more: "
            f"{shown}.",
            "",
        ]
    traced = summary.get("curated_traces")
    if traced is not None:
        rows = "On the curated rows" if curated else "On the rows in these files"
        figures = traced["figures"]
        shown = (
            "; ".join(
                f"{TRACE_FIGURE_NAMES.get(key, key)} {_interval_words(value, missing='undefined')}"
                for key, value in figures.items()
            )
            if figures
            else "no agreement figure (it needs two annotators' traces of one item)"
        )
        lines += [
            f"{rows} (round 1): {_count(traced['annotators'], 'annotator')}, "
            f"{_count(traced['traces'], 'trace')}: {shown}.",
            "",
        ]
    quality = summary.get("quality", {})
    for figure in quality.get("study", {}).values():
        if figure["value"] is None:
            lines.append(f"- {figure['label']}: too little overlap.")
        elif figure["low"] is None:
            # computed without bounds (too little evidence), or no interval set yet
            why = "no interval" if quality["intervals"] else "interval not computed"
            rests = (
                f"; {figure['evidence']:,} {figure['unit'].replace('_', ' ')}"
                if figure["evidence"] is not None
                else ""
            )
            lines.append(f"- {figure['label']}: {figure['value']:.3f} ({why}{rests}).")
        else:
            effective = (
                f"; about {figure['effective_samples']:,.0f} independent samples"
                if figure.get("effective_samples") is not None
                else ""
            )
            lines.append(
                f"- {figure['label']}: {figure['value']:.3f} "
                f"[{figure['low']:.3f}, {figure['high']:.3f}] (95 %, "
                f"{figure['evidence']:,} {figure['unit']}{effective})"
            )
    if quality.get("study"):
        left_out = quality["left_out"]
        note = f", {left_out} of them left out of these files" if left_out else ""
        when = quality["intervals"]["computed_at"][:19] if quality["intervals"] else None
        differs = (
            " These figures describe the dashboard's answers, not these files: they count the "
            "annotators left out too."
            if left_out
            else ""
        )
        lines += [
            "",
            f"As on the studio's quality dashboard: round 1, all {quality['annotators']} "
            f"annotators of the question{note}"
            + (f"; intervals computed {when} UTC." if when else "; no interval computed yet.")
            + differs,
            "",
        ]
    return lines


def _annotator_section(export: Mapping[str, Any], options: Mapping[str, Any]) -> list[str]:
    counts = export["counts"]
    lines = [
        "## Annotators",
        "",
        f"{counts['annotators_kept']} of the {counts['annotators_total']} annotators who "
        f"answered are in these files ({counts['rows_exported']} of {counts['rows_total']} "
        "current answers).",
        "",
    ]
    if export["exclusions"]:
        applied = "left out of these files" if options["curated"] else "kept (uncurated export)"
        lines += [f"Excluded on the quality dashboard ({applied}):", ""]
        lines += [
            f"- {e['annotator']}: {e['reason'] or 'no reason given'} "
            f"(by {e['excluded_by']}, {e['excluded_at']}; {len(e['flags'])} flags)"
            for e in export["exclusions"]
        ]
        lines.append("")
    else:
        lines += ["No annotator was excluded.", ""]
    return lines


def dataset_response(
    *, study: Study, curated: bool = True, identity: str = USERNAMES, license: str = "other"
) -> FileResponse:
    """The zip of :func:`dataset_zip` as a download, built in a temporary file (not memory)."""
    stream = tempfile.TemporaryFile()  # noqa: SIM115 (FileResponse closes it when sent)
    try:
        dataset_zip(study=study, stream=stream, curated=curated, identity=identity, license=license)
    except BaseException:
        stream.close()
        raise
    stream.seek(0)
    return FileResponse(
        stream,
        as_attachment=True,
        filename=f"study-{study.pk}-huggingface.zip",
        content_type="application/zip",
    )
