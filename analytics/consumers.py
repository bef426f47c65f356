"""Channel consumers of the analytics app.

:class:`QualityWorker` serves the ``quality-updates`` channel (``manage.py runworker
quality-updates``): each message names a question whose pending annotations it applies. Run as
many workers as you like; the state row lock keeps them from counting anything twice.
"""

from __future__ import annotations

from typing import Any

from channels.consumer import SyncConsumer
from django.db import close_old_connections

from analytics.pipeline import quality_process_pending


class QualityWorker(SyncConsumer):
    def quality_process(self, message: dict[str, Any]) -> None:
        close_old_connections()
        quality_process_pending(question_id=int(message["question_id"]))
