"""``pip install .`` gives a studio that runs from anywhere: packages, templates, static files
and the ``annotation-studio`` command, with its state in the user's data directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.annotate_site.helpers import REPO, child_env, free_ports

NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", ".local", "build", "dist", "*.egg-info", "__pycache__", "test-artifacts",
    ".hypothesis", ".ruff_cache", ".pytest_cache",
)  # fmt: skip
CHECK_INSTALLED = """
import sys
from pathlib import Path

import django
from django.contrib.staticfiles import finders
from django.template.loader import get_template

django.setup()
site = Path(sys.argv[1])
assert Path(get_template("base.html").origin.name).is_relative_to(site)
assert Path(finders.find(sys.argv[2])).is_relative_to(site)
print("templates and static files from", site)
"""


def run(*command: str | Path, env: dict[str, str], cwd: Path) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_the_installed_studio_runs_from_outside_the_checkout(tmp_path: Path):
    source, site, elsewhere = tmp_path / "source", tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(REPO, source, symlinks=True, ignore=NOT_SOURCE)
    elsewhere.mkdir()
    env = child_env(tmp_path, PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "data"))
    del env["STUDIO_LOCAL_DIR"]  # the installed default: $XDG_DATA_HOME/annotation-studio
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", site]
    run(*pip, source, env=env, cwd=elsewhere)

    studio = site / "bin" / "annotation-studio"
    run(studio, "migrate", "--noinput", env=env, cwd=elsewhere)
    assert "no issues" in run(studio, "check", env=env, cwd=elsewhere)
    assert (tmp_path / "data" / "annotation-studio" / "studio.sqlite3").stat().st_size > 0
    a_static_file = next(path for path in (REPO / "static").rglob("*") if path.is_file())
    static_name = a_static_file.relative_to(REPO / "static").as_posix()
    django_env = {**env, "DJANGO_SETTINGS_MODULE": "annotate_site.settings"}
    run(sys.executable, "-c", CHECK_INSTALLED, site, static_name, env=django_env, cwd=elsewhere)

    metrics = "import analytics.metrics as m; print(m.__file__, m.cohen_kappa([0, 1], [0, 1]))"
    out = run(sys.executable, "-c", metrics, env=env, cwd=elsewhere)
    assert out.startswith(str(site / "analytics" / "metrics"))

    port = free_ports()
    serving = subprocess.Popen(
        [studio, "serve"],
        env={**env, "PORT": str(port)},
        cwd=elsewhere,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_for(f"{base}/accounts/login/") == 200
        assert wait_for(f"{base}/static/{static_name}") == 200
    finally:
        os.killpg(serving.pid, signal.SIGTERM)
        serving.wait(timeout=30)


def wait_for(url: str, *, timeout: float = 120) -> int:
    """The status of ``url`` once something answers there."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
