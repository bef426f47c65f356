"""Where the real annotation data sets live (demo studies and reproductions read them).

The studio ships two real data sets whose licences allow it, in ``apps/studies/data/`` (so an
installed studio has them too; each folder holds its licence and credits):

``rzhetsky2009/``
    Rzhetsky, Shatkay & Wilbur (2009), 15,521 text fragments x 8 annotators (BSD-2, from pyAnno).
``green_intensity_2016/``
    The shades-of-green study's original release (Booth, Mundnich et al.; MIT): ten annotators'
    10 Hz slider traces of two videos and the true green intensity.

``$STUDIO_DATASETS_DIR`` names another folder of the same layout instead (a copy with more files,
or an empty folder to load the demo without real data).
"""

from __future__ import annotations

import os
from pathlib import Path

SHIPPED_DATASETS = Path(__file__).resolve().parent / "data"


def datasets_dir() -> Path | None:
    """The folder holding the real data sets, or ``None`` when it does not exist.

    ``$STUDIO_DATASETS_DIR`` when set, else the data sets shipped with the studio.
    """
    chosen = os.environ.get("STUDIO_DATASETS_DIR", "").strip()
    path = Path(chosen) if chosen else SHIPPED_DATASETS
    return path if path.is_dir() else None
