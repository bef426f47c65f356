"""``annotation-studio serve`` / ``prod`` (also ``manage.py`` and ``./studio``): what they run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from knox.models import AuthToken

from annotate_site import cli
from apps.annotations.models import Annotation
from tests.annotate_site.helpers import PRODUCTION_ENV, REPO, child_env, free_ports
from tests.factories import running_study


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Record the management steps and the final exec instead of running them."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(cli, "_manage", lambda *args: calls.append(args))

    def fake_exec(*command: str) -> None:
        calls.append(("exec", *command[1:]))
        raise SystemExit(0)

    monkeypatch.setattr(cli, "_exec", fake_exec)
    for name in (*cli.PRODUCTION_NEEDS, "PORT", "STUDIO_PRODUCTION", "QUALITY_UPDATES"):
        monkeypatch.delenv(name, raising=False)
    return calls


def run(*args: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["annotation-studio", *args])
    assert stopped.value.code == 0, stopped.value.code


def test_serve_demo_loads_the_demo_into_the_local_database(steps, capsys):
    run("serve", "--demo")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "load_demo", "exec"]
    assert steps[-1][-3:] == ("-p", "8000", cli.ASGI_APPLICATION)
    assert "http://127.0.0.1:8000/" in capsys.readouterr().out


def test_serve_never_loads_the_demo_into_a_database_given_by_database_url(
    steps, capsys, monkeypatch
):
    monkeypatch.setenv("DATABASE_URL", "postgres://studio@db.example.org/studio")
    run("serve", "--demo")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "exec"]
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


def test_prod_runs_the_procfile_with_the_chosen_concurrency(steps, capsys, monkeypatch):
    production = {**PRODUCTION_ENV, "DATABASE_URL": "postgres://x/y", "REDIS_URL": "redis://r"}
    for name, value in {**production, "WEB_CONCURRENCY": "3", "PORT": "8310"}.items():
        monkeypatch.setenv(name, value)
    run("prod")
    assert [step[0] for step in steps] == ["migrate", "collectstatic", "exec"]
    assert steps[-1][-5:] == (str(cli.PROCFILE), "-p", "8310", "-c", "web=3,worker=2")
    assert (os.environ["STUDIO_PRODUCTION"], os.environ["QUALITY_UPDATES"]) == ("1", "worker")
    out = capsys.readouterr().out
    assert all(f"http://127.0.0.1:{port}/" in out for port in (8310, 8311, 8312))
    procfile = cli.PROCFILE.read_text()
    assert "--proxy-headers -b 127.0.0.1 -p $PORT" in procfile
    assert "runworker quality-updates" in procfile


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
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@pytest.mark.postgres
def test_the_production_stack_serves_and_its_workers_analyse(transactional_db, tmp_path: Path):
    """``manage.py prod`` against the test database and REDIS_URL: both daphne processes answer
    behind a would-be TLS proxy, plain HTTP is redirected to HTTPS, and an annotation submitted
    through one of them is analysed by a quality worker (``QUALITY_UPDATES=worker``)."""
    from django.conf import settings

    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL (the production stack's workers talk over Redis)")
    study, annotators = running_study()
    _, token = AuthToken.objects.create(user=annotators[0])
    db = settings.DATABASES["default"]  # the test database, migrated
    port = free_ports(2)  # WEB_CONCURRENCY=2: daphne on port and port + 1
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
        logins = [f"http://127.0.0.1:{port + n}/accounts/login/" for n in range(2)]
        statuses: list[int] = []
        deadline = time.monotonic() + 120
        while statuses != [200, 200] and time.monotonic() < deadline and stack.poll() is None:
            try:
                statuses = [_request(url, **proxied)[0] for url in logins]
            except OSError:
                time.sleep(0.5)
        output = log.read_text()
        assert statuses == [200, 200], output
        assert f"http://127.0.0.1:{port + 1}/" in output
        status, headers, _ = _request(logins[0], **proxied)
        assert "max-age=31536000" in headers["Strict-Transport-Security"]
        status, headers, _ = _request(logins[0])
        assert (status, headers["Location"]) == (301, logins[0].replace("http:", "https:"))

        api = f"http://127.0.0.1:{port + 1}/api"
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
