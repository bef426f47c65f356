"""Deployment defaults of ``annotate_site.settings``, each checked in a fresh process."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.annotate_site.helpers import (
    PRODUCTION_ENV,
    child_env,
    manage,
    python_code,
    settings_value,
)

pytestmark = pytest.mark.own_processes  # the same on every test database


def test_check_deploy_is_clean_with_the_documented_production_variables(tmp_path: Path):
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", env=child_env(tmp_path, **PRODUCTION_ENV)
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("missing", ["SECRET_KEY", "ALLOWED_HOSTS"])
def test_production_refuses_to_start_without(missing: str, tmp_path: Path):
    env = child_env(tmp_path, **PRODUCTION_ENV)
    del env[missing]
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"STUDIO_PRODUCTION=1 needs {missing}" in result.stderr
    assert not (tmp_path / "secret_key").exists()  # no generated key to fall back on


def test_production_refuses_debug_pages(tmp_path: Path):
    result = manage("check", env=child_env(tmp_path, **PRODUCTION_ENV, DJANGO_DEBUG="1"))
    assert result.returncode != 0
    assert "DJANGO_DEBUG" in result.stderr


def test_local_settings_stay_on_plain_http(tmp_path: Path):
    """``./studio serve`` serves http://127.0.0.1: no redirect, no HSTS, no secure cookies."""
    names = ["SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"]
    expression = f"[getattr(settings, n) for n in {names}] + [settings.SECURE_HSTS_SECONDS]"
    assert settings_value(expression, env=child_env(tmp_path)) == [False, False, False, 0]


def test_the_local_directory_and_its_files_are_private(tmp_path: Path):
    """The SQLite file and the generated key are the owner's alone (0600, directory 0700)."""
    local = tmp_path / "local"
    code = (
        "import django; django.setup(); from django.db import connection; "
        "connection.ensure_connection(); connection.close()"
    )
    result = python_code(
        code, env={**child_env(local), "DJANGO_SETTINGS_MODULE": "annotate_site.settings"}
    )
    assert result.returncode == 0, result.stderr
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in [local, local / "studio.sqlite3", local / "secret_key"]
    }
    assert modes == {"local": 0o700, "studio.sqlite3": 0o600, "secret_key": 0o600}
