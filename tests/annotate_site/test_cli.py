"""``annotation-studio serve`` / ``prod`` (also ``manage.py`` and ``./studio``): what they run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from knox.models import AuthToken

from annotate_site import cli
from apps.annotations.models import Annotation
from tests.annotate_site.helpers import PRODUCTION_ENV, REPO, child_env, free_ports
from tests.factories import running_study


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Record the management steps and the supervised stack instead of running them."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(cli, "_manage", lambda *args: calls.append(args))

    def fake_supervise(*, port: int, proxy_headers: bool) -> int:
        calls.append(("supervise", str(port), str(proxy_headers)))
        return 0

    monkeypatch.setattr(cli, "supervise", fake_supervise)
    for name in (*cli.PRODUCTION_NEEDS, "PORT", "STUDIO_PRODUCTION", "QUALITY_UPDATES"):
        monkeypatch.delenv(name, raising=False)
    return calls


def run(*args: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["annotation-studio", *args])
    assert stopped.value.code == 0, stopped.value.code


def test_serve_demo_loads_the_demo_into_the_local_database(steps, capsys):
    run("serve", "--demo")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "load_demo", "supervise"]
    assert steps[-1] == ("supervise", "8000", "False")
    assert "http://127.0.0.1:8000/" in capsys.readouterr().out


def test_serve_never_loads_the_demo_into_a_database_given_by_database_url(
    steps, capsys, monkeypatch
):
    monkeypatch.setenv("DATABASE_URL", "postgres://studio@db.example.org/studio")
    run("serve", "--demo")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "supervise"]
    assert "the demo is not loaded" in capsys.readouterr().out


@pytest.mark.parametrize("missing", cli.PRODUCTION_NEEDS)
def test_prod_refuses_to_start_without(missing, steps, monkeypatch):
    for name, value in {**PRODUCTION_ENV, "DATABASE_URL": "postgres://x/y"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/3")
    monkeypatch.delenv(missing)
    with pytest.raises(SystemExit, match=f"needs {missing}"):
        cli.main(["annotation-studio", "prod"])
    assert steps == []


def test_prod_supervises_the_stack_behind_the_proxy(steps, capsys, monkeypatch):
    production = {**PRODUCTION_ENV, "DATABASE_URL": "postgres://x/y", "REDIS_URL": "redis://r"}
    for name, value in {**production, "PORT": "8310"}.items():
        monkeypatch.setenv(name, value)
    run("prod")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "supervise"]
    assert steps[-1] == ("supervise", "8310", "True")  # X-Forwarded-* trusted from 127.0.0.1
    assert os.environ["STUDIO_PRODUCTION"] == "1"
    assert "http://127.0.0.1:8310/" in capsys.readouterr().out


def _request(
    url: str, data: dict | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request without following redirects: status, headers, body."""
    body = None if data is None else json.dumps(data).encode()
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers), error.read()


def _lower(headers: Any) -> dict[str, str]:
    """Response headers by lower-case name (HTTP names are case-insensitive; servers differ)."""
    return {name.lower(): value for name, value in headers.items()}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@pytest.mark.postgres
def test_the_production_stack_serves_and_its_workers_analyse(transactional_db, tmp_path: Path):
    """``manage.py prod`` against the test database and REDIS_URL: its web processes answer on
    the port behind a would-be TLS proxy, plain HTTP is redirected to HTTPS, and an annotation
    submitted through them is analysed by the quality worker (``QUALITY_UPDATES=worker``)."""
    from django.conf import settings

    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL (the production stack's workers talk over Redis)")
    study, annotators = running_study()
    _, token = AuthToken.objects.create(user=annotators[0])
    db = settings.DATABASES["default"]  # the test database, migrated
    port = free_ports(2)  # WEB_CONCURRENCY=2: web processes on port and port + 1
    stack_env = {
        **PRODUCTION_ENV,
        "DATABASE_URL": f"postgres://{quote(db['USER'])}:{quote(db['PASSWORD'] or '')}@"
        f"{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": os.environ["REDIS_URL"],
        "ALLOWED_HOSTS": "127.0.0.1",
        "WEB_CONCURRENCY": "2",
        "QUALITY_WORKERS": "1",
        "PORT": str(port),
    }
    log = tmp_path / "stack.log"
    with log.open("w") as out:
        stack = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "prod"],
            env=child_env(tmp_path, **stack_env),
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxied = {"X-Forwarded-Proto": "https"}
    try:
        logins = [f"http://127.0.0.1:{port}/accounts/login/"] * 2
        statuses: list[int] = []
        deadline = time.monotonic() + 120
        while statuses != [200, 200] and time.monotonic() < deadline and stack.poll() is None:
            try:
                statuses = [_request(url, **proxied)[0] for url in logins]
            except OSError:
                time.sleep(0.5)
        output = log.read_text()
        assert statuses == [200, 200], output
        assert f"http://127.0.0.1:{port}/" in output
        status, headers, _ = _request(logins[0], **proxied)
        assert "max-age=31536000" in headers["strict-transport-security"]
        status, headers, _ = _request(logins[0])
        assert (status, headers["location"]) == (301, logins[0].replace("http:", "https:"))

        api = f"http://127.0.0.1:{port}/api"
        auth = {**proxied, "Authorization": f"Token {token}"}
        status, _, body = _request(f"{api}/studies/{study.pk}/next/", **auth)
        assert status == 200, body
        answer = {
            "assignment": json.loads(body)["assignment"],
            "answers": {"sentiment": "positive"},
            "idempotency_key": str(uuid.uuid4()),
        }
        status, _, body = _request(f"{api}/annotations/", answer, **auth)
        assert status == 201, body
        annotation = Annotation.objects.get(annotator=annotators[0])
        while annotation.analysis_pending and time.monotonic() < deadline + 30:
            time.sleep(0.5)
            annotation.refresh_from_db()
        assert not annotation.analysis_pending, log.read_text()
        assert annotation.analysed_revision_id is not None
    finally:
        os.killpg(stack.pid, signal.SIGTERM)
        stack.wait(timeout=30)


@pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT spreads only on Linux")
def test_serve_refuses_a_port_another_studio_serves(monkeypatch):
    """The web processes listen with SO_REUSEPORT, which another studio's would share
    silently: the port is first tried without it."""
    monkeypatch.setattr(cli, "Supervisor", None)  # never reached
    with socket.socket() as other:  # as another studio's web process listens
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(SystemExit, match=f"cannot listen on 127.0.0.1:{port}"):
            cli.supervise(port=port, proxy_headers=False)


def test_help_lists_the_studios_own_commands(capsys):
    """``annotation-studio --help`` printed Django's command list, without serve or prod."""
    from annotate_site.cli import main

    main(["annotation-studio", "--help"])
    out = capsys.readouterr().out
    for command in ("serve", "prod", "load_demo", "import_items", "quality_worker"):
        assert f"\n  {command}" in out
    assert "Create an account that may create studies" in out  # each with its help line
    assert "help --commands" in out  # where Django's own commands are
