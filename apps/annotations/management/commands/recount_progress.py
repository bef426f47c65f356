"""``manage.py recount_progress``: recount every annotator's progress counters.

The database keeps them on every write of an assignment (triggers, migration
``annotations 0006``); this mends them after assignments were loaded with the triggers off,
e.g. a data-only ``pg_restore --disable-triggers``. Safe to run on a live studio.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from apps.annotations.services import progress_recount


class Command(BaseCommand):
    help = "Recount every annotator's progress (done and total) from their assignments."

    def handle(self, *args: Any, **options: Any) -> None:
        wrong = progress_recount()
        self.stdout.write(f"Recounted: {wrong} annotators' counts were wrong.")
