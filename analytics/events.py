"""Dashboard events on the channel layer: group names and the ``dashboard.update`` message."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def study_group(study_id: int) -> str:
    """Channel-layer group of a study's open dashboards."""
    return f"study_{study_id}"


def dashboard_notify(*, study_id: int, question_id: int) -> None:
    """Tell every open dashboard of the study that a question's figures changed.

    Call it after the commit: the consumers re-read the database when the message arrives.
    """
    async_to_sync(get_channel_layer().group_send)(
        study_group(study_id), {"type": "dashboard.update", "question_id": question_id}
    )
