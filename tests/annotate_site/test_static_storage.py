"""collectstatic compresses only the static files that changed (annotate_site.static_storage)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from whitenoise.compress import Compressor

STORAGE = "annotate_site.static_storage.ChangedOnlyCompressedStorage"


@pytest.fixture
def collect(tmp_path: Path, settings, monkeypatch):
    """Collect ``tmp_path/src`` into ``tmp_path/root`` with the site's storage: the source
    directory, the root, and ``run()``, which collects and names the files it compressed."""
    source = tmp_path / "src"
    source.mkdir()
    settings.STATICFILES_DIRS = [source]
    settings.STATIC_ROOT = tmp_path / "root"
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": STORAGE}}
    compressed: list[str] = []
    original = Compressor.compress

    def counting(self, path):
        compressed.append(Path(path).name)
        return original(self, path)

    monkeypatch.setattr(Compressor, "compress", counting)

    def run() -> list[str]:
        compressed.clear()
        call_command("collectstatic", interactive=False, verbosity=0)
        return sorted(compressed)

    return source, settings.STATIC_ROOT, run


def test_the_site_collects_with_this_storage(settings):
    assert settings.STORAGES["staticfiles"]["BACKEND"] == STORAGE


def test_a_second_collect_compresses_nothing_and_a_changed_file_again(collect):
    source, root, run = collect
    (source / "app.js").write_text("let answer = 42;\n" * 200)
    (source / "site.css").write_text("body { margin: 0; }\n" * 200)
    assert run() == ["app.js", "site.css"]
    assert run() == []  # whitenoise's own storage compressed both again

    changed = source / "app.js"
    changed.write_text("let answer = 43;\n" * 200)
    later = changed.stat().st_mtime + 5  # newer than the collected copy, as an edit would be
    os.utime(changed, (later, later))
    assert run() == ["app.js"]
    assert gzip.decompress((root / "app.js.gz").read_bytes()) == changed.read_bytes()


def test_a_missing_compressed_copy_is_made_again(collect):
    source, root, run = collect
    (source / "app.js").write_text("let answer = 42;\n" * 200)
    run()
    (root / "app.js.gz").unlink()
    assert run() == ["app.js"]
    assert (root / "app.js.gz").is_file()
