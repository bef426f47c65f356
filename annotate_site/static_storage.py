"""The static files' storage: whitenoise's compressed copies, made again only for what changed.

``collectstatic`` copies only the files whose source is newer, but hands every file it found
to the storage's ``post_process``, and whitenoise's :class:`CompressedStaticFilesStorage`
compresses each one again (gzip at level 9, and brotli where installed): about 18 MB of files
on every ``serve`` and ``prod`` start, with nothing changed (whitenoise issues #250 and #279).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from whitenoise.compress import Compressor
from whitenoise.storage import CompressedStaticFilesStorage

# whitenoise gives a compressed copy its source's modification time (``Compressor.write_data``);
# a float's round trip through ``os.utime`` may move it by a few hundred nanoseconds.
_SAME_TIME_S = 1e-3


class ChangedOnlyCompressedStorage(CompressedStaticFilesStorage):
    """Compress a collected file only if its compressed copies are missing or older than it.

    A copy is current when every encoding the compressor writes (``.br`` with brotli
    installed, ``.gz``) exists with its source's modification time. A file that changed was
    copied again by ``collectstatic``, with a new time, so its copies are made again; a file
    whose compression did not pay (whitenoise then writes no copy) is tried on every run.
    """

    def post_process(
        self, paths: dict[str, Any], dry_run: bool = False, **options: Any
    ) -> Iterator[tuple[str, str | None, bool | Exception]]:
        compressor = self.create_compressor(
            extensions=getattr(settings, "WHITENOISE_SKIP_COMPRESS_EXTENSIONS", None), quiet=True
        )
        changed = {
            path: found for path, found in paths.items() if not self._current(path, compressor)
        }
        yield from super().post_process(changed, dry_run=dry_run, **options)

    def _current(self, path: str, compressor: Compressor) -> bool:
        source = Path(self.path(path))
        suffixes = [".br"] * compressor.use_brotli + [".gz"] * compressor.use_gzip
        copies = [source.with_name(source.name + suffix) for suffix in suffixes]
        if not copies or not all(copy.is_file() for copy in copies):
            return False
        modified = source.stat().st_mtime
        return all(abs(copy.stat().st_mtime - modified) < _SAME_TIME_S for copy in copies)
