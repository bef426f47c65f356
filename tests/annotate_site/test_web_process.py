"""What a web process loads before it serves (not the quality worker's heavy libraries), and that
it freezes what it loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.annotate_site.helpers import child_env, python_code

pytestmark = pytest.mark.own_processes  # the same on every test database

READY = """
import gc, json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
from annotate_site.webserver import preload
preload()  # what a web process does before it serves
print(json.dumps({report}))
"""


def _web_process(tmp_path: Path, report: str) -> Any:
    """``report`` (a Python expression) in a web process of the worker mode, read once it
    can serve: after :func:`annotate_site.webserver.preload`."""
    code = READY.format(report=report)
    result = python_code(code, env=child_env(tmp_path, QUALITY_UPDATES="worker"))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def _loaded(tmp_path: Path, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a web process has imported once it can serve."""
    return _web_process(tmp_path, f"sorted(m for m in {modules!r} if m in sys.modules)")


def test_a_web_process_never_imports_scikit_learn(tmp_path: Path):
    """scikit-learn (with pandas, which it imports) cost each web process about 90 MB and
    0.45 s of start-up (RSS 273 -> 219 MB without it), and only the quality worker uses it:
    the MDS map and the disagreement forecast import it where they run."""
    assert _loaded(tmp_path, ("sklearn", "pandas")) == []


def test_a_web_process_loads_no_second_web_server(tmp_path: Path):
    """The studio serves with uvicorn (``annotate_site.webserver``); daphne, kept as an app for
    ``runserver``, brought Twisted into every process: 0.34-0.44 s of each start-up (``check``
    2.8 -> 2.45 s), and 15 packages (65 MB, cryptography among them) into every
    ``pip install .``."""
    assert _loaded(tmp_path, ("daphne", "twisted", "autobahn")) == []


def test_a_web_process_freezes_what_it_loaded_before_it_serves(tmp_path: Path):
    """A loaded web process tracks about 174,000 objects that live as long as it does; each
    full collection scanned them all (94 ms, the GIL held, every request waiting). Frozen,
    the collector leaves them alone (``annotate_site.webserver.preload``)."""
    frozen, tracked = _web_process(tmp_path, "[gc.get_freeze_count(), len(gc.get_objects())]")
    assert frozen > 100_000
    assert tracked < frozen / 20
