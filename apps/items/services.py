"""Every write to items: import from CSV / JSON Lines files and bulk creation for the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import IO, Any, NamedTuple

from django.core.files import File
from django.db import transaction
from django.db.models import Max

from apps.annotations.services import assignments_fill
from apps.items.importing import (
    MAX_ERRORS,
    ItemImportError,
    RawRow,
    RowError,
    clean_rows,
    parse_items,
)
from apps.items.models import Item
from apps.recruitment.gold import GoldImportError, GoldSpec
from apps.recruitment.services import gold_answers_store
from apps.studies.models import Study

UPDATED_FIELDS = ["kind", "text", "url", "media", "metadata", "updated_at"]


class ImportSummary(NamedTuple):
    """How many items an import created, and how many existing ones it named (and updated)."""

    created: int
    updated: int


@transaction.atomic
def items_import(
    *,
    study: Study,
    stream: IO[bytes] | IO[str],
    fmt: str,
    files: Mapping[str, File] | None = None,
) -> ImportSummary:
    """Import items from a CSV or JSON Lines stream; all or nothing.

    Rows whose ``external_id`` the study already has update that item (kind, text, URL,
    metadata, and the media file if one is named); new rows are queued after the existing items.
    ``files`` maps the names used in the ``media`` column to uploaded files. Any invalid row
    raises :class:`~apps.items.importing.ItemImportError` listing every problem, and nothing is
    stored. New items of a running study reach the annotators' queues at once.
    """
    return _items_write(study=study, rows=parse_items(stream, fmt=fmt), files=files or {})


@transaction.atomic
def items_bulk_create(*, study: Study, rows: list[dict[str, Any]]) -> ImportSummary:
    """Create or update items from dicts (the API's JSON body), exactly as :func:`items_import`.

    Errors name the row by its 1-based position in ``rows`` as its "line".
    """
    raw = (RawRow(line, data) for line, data in enumerate(rows, start=1))
    return _items_write(study=study, rows=raw, files={})


def _items_write(
    *, study: Study, rows: Iterable[RawRow], files: Mapping[str, File]
) -> ImportSummary:
    """Validate and store rows batch by batch; the caller's transaction makes it all or nothing."""
    Study.objects.select_for_update().filter(pk=study.pk).first()  # one import at a time
    last = study.items.aggregate(last=Max("position"))["last"]
    position = 0 if last is None else last + 1
    created = updated = 0
    gold: dict[str, list[GoldSpec]] = {}
    for batch in clean_rows(rows, study=study, files=files):
        for item in batch.new:
            item.position = position
            position += 1
        Item.objects.bulk_create(batch.new)
        for item in batch.changed:
            # One UPDATE each: several times faster than bulk_update's CASE expressions for
            # thousands of rows, and save() stores newly attached uploads.
            item.save(update_fields=UPDATED_FIELDS)
        gold |= batch.gold
        created += len(batch.new)
        updated += len(batch.changed) + batch.unchanged
    if gold:  # once every item is stored: a pair may name the item of a later line
        try:
            gold_answers_store(study=study, gold=gold)
        except GoldImportError as exc:
            errors = [RowError(line, "gold", message) for line, message in exc.rows]
            raise ItemImportError(errors[:MAX_ERRORS], truncated=len(errors) > MAX_ERRORS) from None
    if created and study.is_running:
        assignments_fill(study=study)
    return ImportSummary(created=created, updated=updated)
