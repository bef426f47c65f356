"""The Python snippets marked ``# runs in CI`` in the README and the docs/ pages run as written.

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


DOCUMENTS = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


def snippets(*, served: bool) -> list[pytest.param]:
    """The marked snippets of the README and every docs/ page, named ``page: section``."""
    return [
        pytest.param(param.values[0], id=f"{document}: {param.id}")
        for document in DOCUMENTS
        for param in readme_snippets(served=served, document=document)
    ]


def test_the_docs_mark_their_runnable_snippets():
    assert [param.id for param in snippets(served=True)] == [
        "docs/api.md: REST API",
        "docs/model_registry.md: Model registry: DIC and BAE of annotator-specific models",
        "docs/python.md: Python: the round trip from the studio to your training code",
    ]
    assert "docs/metrics.md: A first example" in [param.id for param in snippets(served=False)]


@pytest.mark.parametrize("code", snippets(served=False))
def test_readme_snippet_runs(code: str):
    run_snippet(code)


@pytest.mark.slow
@pytest.mark.parametrize("code", snippets(served=True))
def test_readme_snippet_runs_against_the_demo(code: str, live_server, transactional_db):
    call_command("load_demo", "--skip-real-data", verbosity=0)
    run_snippet(code.replace(SERVED_AT, live_server.url))
