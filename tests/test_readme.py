"""The Python snippets marked ``# runs in CI`` in the README and in docs/python.md run as written.

A snippet that talks to ``http://127.0.0.1:8000`` runs against a live server holding the demo
(``load_demo --skip-real-data``), as it would after ``./studio serve``; each runs in its own
Python process from the checkout, like a user's script or notebook.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

REPO = Path(__file__).resolve().parents[1]
MARK = "# runs in CI"
SERVED_AT = "http://127.0.0.1:8000"


def readme_snippets(*, served: bool, document: str = "README.md") -> list[pytest.param]:
    """Each marked ```python block of ``document`` that talks to the server (or does not),
    named after the section it stands in."""
    text = (REPO / document).read_text()
    snippets = []
    for block in re.finditer(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        code = block.group(1)
        if code.startswith(MARK) and (SERVED_AT in code) == served:
            section = re.findall(r"^##? (.+)$", text[: block.start()], flags=re.MULTILINE)[-1]
            snippets.append(pytest.param(code, id=section))
    return snippets


def run_snippet(code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_marks_its_runnable_snippets():
    assert [param.id for param in readme_snippets(served=True)] == ["REST API"]
    assert "Metrics library: `analytics.metrics`" in [
        param.id for param in readme_snippets(served=False)
    ]


@pytest.mark.parametrize("code", readme_snippets(served=False))
def test_readme_snippet_runs(code: str):
    run_snippet(code)


@pytest.mark.slow
@pytest.mark.parametrize(
    "code", readme_snippets(served=True) + readme_snippets(served=True, document="docs/python.md")
)
def test_readme_snippet_runs_against_the_demo(code: str, live_server, transactional_db):
    call_command("load_demo", "--skip-real-data", verbosity=0)
    run_snippet(code.replace(SERVED_AT, live_server.url))
