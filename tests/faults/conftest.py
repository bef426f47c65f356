"""Fault tests: the production stack as real processes on loopback, with faults injected.

Each test gets its own database, cloned from a migrated template on a private PostgreSQL
(port 5491), and a flushed private Redis (port 6391): stopping them harms nobody else. Web
processes (``python -m annotate_site.webserver``, uvicorn, as ``serve`` and ``prod`` run them,
each here on its own port in 8100-8199 so a test can aim at one) and quality workers
(``manage.py quality_worker``) run with ``QUALITY_UPDATES=worker``; ``prod`` itself, under its
supervisor, for the tests of the supervisor. Clients speak plain HTTP (``http.client``) and
websockets (``websockets``). Every process a test starts is killed by its PID when the test
ends, passed or failed.

The suite runs only in the PostgreSQL + Redis pass (``DATABASE_URL`` and ``REDIS_URL`` set) and
needs PostgreSQL's server binaries, ``psql`` and ``redis-server`` on the machine.
"""

from __future__ import annotations

import contextlib
import glob
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_PORT, REDIS_PORT = 5491, 6391
WEB_PORTS = itertools.cycle(range(8100, 8200))
TEMPLATE_DB = "faults_template"
PG_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), default="")
SECRET_KEY = "fault-suite-" + "x" * 40
PSQL = ["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1"]


def _missing() -> str | None:
    """Why the fault suite cannot run here, or ``None``."""
    database, redis = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not database.startswith("postgres") or not redis:
        return "fault suite: runs only in the PostgreSQL + Redis pass (DATABASE_URL, REDIS_URL)"
    if not PG_BIN or not shutil.which("redis-server") or not shutil.which("psql"):
        return "fault suite: needs PostgreSQL's server binaries, psql and redis-server"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _missing()
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, step: float = 0.1):
    """Poll ``predicate`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _as_postgres(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


class PrivatePostgres:
    """A throw-away PostgreSQL cluster on :data:`PG_PORT` that a test may stop and start."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        if os.geteuid() == 0:
            shutil.chown(base, "postgres")
        subprocess.run(
            _as_postgres(
                [f"{PG_BIN}/initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres"]
            ),
            check=True,
            capture_output=True,
        )
        self.start()

    def _ctl(self, *args: str) -> None:
        command = [f"{PG_BIN}/pg_ctl", "-D", str(self.data), *args]
        subprocess.run(_as_postgres(command), check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        options = f"-p {PG_PORT} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-l", str(self.base / "log"), "-w", "-o", options, "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")

    def sql(self, query: str, *, db: str) -> str:
        """Run one statement through psql; its unaligned, tuples-only output."""
        done = subprocess.run(
            [*PSQL, "-p", str(PG_PORT), "-U", "postgres", "-d", db, "-c", query],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout.strip()

    def url(self, db: str) -> str:
        return f"postgres://postgres@127.0.0.1:{PG_PORT}/{db}"


class PrivateRedis:
    """A redis-server on :data:`REDIS_PORT` without persistence, stoppable by its PID."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.base)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: _port_open(REDIS_PORT), timeout=10, what="redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def flush(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(REDIS_PORT), "flushall"], check=True, capture_output=True
        )

    url = f"redis://127.0.0.1:{REDIS_PORT}/0"


@pytest.fixture(scope="session")
def private_postgres() -> Iterator[PrivatePostgres]:
    """The private cluster, with a migrated template database the tests clone."""
    base = Path(tempfile.mkdtemp(prefix="studio-faults-pg-"))
    server = PrivatePostgres(base)
    try:
        server.sql(f"CREATE DATABASE {TEMPLATE_DB}", db="postgres")
        env = {**os.environ, "DATABASE_URL": server.url(TEMPLATE_DB), "REDIS_URL": ""}
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped by a failed test
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def private_redis() -> Iterator[PrivateRedis]:
    base = Path(tempfile.mkdtemp(prefix="studio-faults-redis-"))
    server = PrivateRedis(base)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Stack:
    """The processes of one test (web processes, workers) against its own database."""

    postgres: PrivatePostgres
    redis: PrivateRedis
    db: str
    logs: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": self.postgres.url(self.db),
            "REDIS_URL": self.redis.url,
            "QUALITY_UPDATES": "worker",
            "QUALITY_PLOT_INTERVAL": "0",
            "SECRET_KEY": SECRET_KEY,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "STUDIO_LOCAL_DIR": str(self.logs),
            "STUDIO_PRODUCTION": "",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }

    def _spawn(
        self, name: str, args: list[str], *, pass_fds: tuple[int, ...] = (), **env: str
    ) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115  (closed with the process)
        process = subprocess.Popen(
            args,
            cwd=ROOT,
            env={**self.env, **env},
            stdout=log,
            stderr=log,
            pass_fds=pass_fds,
        )
        log.close()
        process.name = name  # type: ignore[attr-defined]
        self.processes.append(process)
        return process

    def web(self, port: int | None = None) -> tuple[subprocess.Popen, int]:
        """Start a web process; return it and its port once it answers."""
        process, port = self._spawn_web(port)
        self._wait_web(process, port)
        return process, port

    def worker(self) -> subprocess.Popen:
        """Start ``manage.py quality_worker``; return it once it runs its passes."""
        process = self._spawn_worker()
        self._wait_worker(process)
        return process

    def up(self, *, webs: int, workers: int) -> tuple[list[int], list[subprocess.Popen]]:
        """Start web processes and workers side by side; their ports and the workers, once
        ready."""
        started = [self._spawn_web(None) for _ in range(webs)]
        crew = [self._spawn_worker() for _ in range(workers)]
        for process, port in started:
            self._wait_web(process, port)
        for process in crew:
            self._wait_worker(process)
        return [port for _, port in started], crew

    def _spawn_web(self, port: int | None) -> tuple[subprocess.Popen, int]:
        """A web process on its own listening socket (bound here, handed over as serve does)."""
        port = port or next(WEB_PORTS)
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(128)
            fd = listener.fileno()
            command = [sys.executable, "-m", "annotate_site.webserver", "--fd", str(fd)]
            return self._spawn(f"web-{port}", command, pass_fds=(fd,)), port

    def _wait_web(self, process: subprocess.Popen, port: int) -> None:
        wait_for(
            lambda: self._alive(process) and "Started server process" in self.log(process.name),  # type: ignore[attr-defined]
            timeout=90,
            what=f":{port}",
        )

    def _spawn_worker(self) -> subprocess.Popen:
        index = sum(p.name.startswith("worker") for p in self.processes)  # type: ignore[attr-defined]
        command = [sys.executable, "manage.py", "quality_worker"]
        return self._spawn(f"worker-{index}", command)

    def _wait_worker(self, process: subprocess.Popen) -> None:
        name = process.name  # type: ignore[attr-defined]
        wait_for(
            lambda: self._alive(process) and "Quality worker: a pass every" in self.log(name),
            timeout=90,
            what=name,
        )

    def prod(self, port: int, **env: str) -> subprocess.Popen:
        """``manage.py prod`` (the supervisor, its web processes and workers) on ``port``;
        returned once the port answers."""
        process = self._spawn("prod", [sys.executable, "manage.py", "prod"], PORT=str(port), **env)
        wait_for(
            lambda: (
                self._alive(process)
                and self.log("prod").count("Started server process")
                >= int(env.get("WEB_CONCURRENCY", "2"))
            ),
            timeout=120,
            what="prod",
        )
        return process

    def next_port(self) -> int:
        return next(WEB_PORTS)

    def children(self, process: subprocess.Popen, marker: str) -> list[int]:
        """The pids of ``process``'s children whose command line contains ``marker``."""
        path = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        found = []
        for pid in path.read_text().split():
            with contextlib.suppress(OSError):  # ended meanwhile
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
        return found

    def _alive(self, process: subprocess.Popen) -> bool:
        if process.poll() is not None:
            raise AssertionError(f"{process.name} exited:\n{self.log(process.name)[-3000:]}")  # type: ignore[attr-defined]
        return True

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        if process.poll() is None:
            os.kill(process.pid, sig)
            process.wait(timeout=30)

    def sql(self, query: str) -> str:
        return self.postgres.sql(query, db=self.db)

    def count(self, query: str) -> int:
        return int(self.sql(query) or 0)

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM annotations_annotation WHERE analysis_pending")

    def manage(self, *args: str, timeout: float = 120) -> str:
        """A ``manage.py`` or ``python -m`` run against this test's database; its stdout."""
        done = subprocess.run(
            [sys.executable, *args],
            cwd=ROOT,
            env={**self.env, "QUALITY_SWEEP_INTERVAL": "0"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def data(self, *args: str) -> dict[str, Any]:
        """``tests.faults.fixture_data`` run against this database, its JSON answer."""
        return json.loads(self.manage("-m", "tests.faults.fixture_data", *args))

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                children = self.children(process, "")  # a supervisor's web processes, workers
                process.kill()
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)


@pytest.fixture
def stack(private_postgres, private_redis, tmp_path) -> Iterator[Stack]:
    """A fresh database and Redis for this test; its processes are killed when it ends."""
    if private_redis.process is None or private_redis.process.poll() is not None:
        private_redis.start()  # a previous test failed while it was stopped
    private_redis.flush()
    try:
        private_postgres.sql("SELECT 1", db="postgres")
    except subprocess.CalledProcessError:
        private_postgres.start()
    db = f"faults_{uuid.uuid4().hex[:10]}"
    private_postgres.sql(f"CREATE DATABASE {db} TEMPLATE {TEMPLATE_DB}", db="postgres")
    result = Stack(postgres=private_postgres, redis=private_redis, db=db, logs=tmp_path)
    try:
        yield result
    finally:
        result.close()
        for log in sorted(tmp_path.glob("*.log")):  # shown by pytest when the test failed
            print(f"---- {log.name} (last lines)\n{log.read_text(errors='replace')[-4000:]}")
        with contextlib.suppress(subprocess.CalledProcessError):
            private_postgres.sql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", db="postgres")


# ------------------------------------------------------------------------------ clients


class UnseenError(Exception):
    """No response came back (connection refused, reset or cut): the client cannot know
    whether the server stored the request."""


def request(
    port: int,
    method: str,
    path: str,
    *,
    body: dict | None = None,
    token: str | None = None,
    cookie: str | None = None,
    timeout: float = 15,
) -> tuple[int, str, str]:
    """One HTTP request on a fresh connection; ``(status, content type, body)``."""
    headers = {"Accept": "application/json"} if body is not None else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Token {token}"
    if cookie:
        headers["Cookie"] = f"sessionid={cookie}"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    except (OSError, http.client.HTTPException) as exc:
        raise UnseenError(repr(exc)) from exc
    finally:
        connection.close()


@dataclass
class Intended:
    """One answer a client means to give: its idempotency key is fixed once, before sending."""

    token: str
    assignment: int
    label: str
    key: str = field(default_factory=lambda: str(uuid.uuid4()))
    statuses: list[int | str] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return {
            "assignment": self.assignment,
            "answers": {"sentiment": self.label},
            "idempotency_key": self.key,
            "time_spent_ms": 1000,
        }


def submit_until_seen(answer: Intended, ports: list[int], *, deadline: float) -> None:
    """Send the answer until a response is seen with 200/201, retrying with the same key after
    an unseen response or a 503; record every outcome in ``answer.statuses``."""
    for attempt in itertools.count():
        if time.monotonic() > deadline:
            return
        port = ports[attempt % len(ports)]
        try:
            status, content_type, text = request(
                port, "POST", "/api/annotations/", body=answer.body(), token=answer.token
            )
        except UnseenError:
            answer.statuses.append("unseen")
            time.sleep(0.2)
            continue
        answer.statuses.append(status)
        if status in (200, 201):
            return
        if status == 503:
            assert content_type.startswith("application/json"), (content_type, text[:300])
            assert json.loads(text)["detail"].startswith("The database is unavailable")
            time.sleep(0.3)
            continue
        raise AssertionError(f"unexpected {status}: {text[:500]}")
