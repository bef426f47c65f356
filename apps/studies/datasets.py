"""Where the real annotation data sets live (demo studies and reproductions read them)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings


def datasets_dir() -> Path:
    """``$STUDIO_DATASETS_DIR``, or ``<repo>/../shared/datasets`` beside the checkout."""
    default = Path(settings.BASE_DIR).parent / "shared" / "datasets"
    return Path(os.environ.get("STUDIO_DATASETS_DIR", default))
