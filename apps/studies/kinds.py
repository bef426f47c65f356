"""Kind-specific question settings: each question kind's app registers how they are validated.

``SETTINGS_CLEANERS[kind](raw settings) -> complete settings`` raises ``ValidationError`` on bad
input. The continuous and pairwise apps register theirs in ``AppConfig.ready()``, so this app
imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError

SettingsCleaner = Callable[[Any], dict[str, Any]]
SETTINGS_CLEANERS: dict[str, SettingsCleaner] = {}


def clean_question_settings(kind: str, raw: Any) -> dict[str, Any]:
    """Validate a question's settings for its kind; kinds without settings take none."""
    cleaner = SETTINGS_CLEANERS.get(kind)
    if cleaner is not None:
        return cleaner(raw)
    if raw:
        raise ValidationError({"settings": f"{kind} questions take no settings."})
    return {}
