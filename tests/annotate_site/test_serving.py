"""``annotation-studio serve`` as real processes: request bodies that stall nobody, a supervisor
that restarts a crashed process alone and stops everything on SIGTERM."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.annotate_site.helpers import REPO, child_env, manage

pytestmark = pytest.mark.own_processes  # the same on every test database

MB = 1024 * 1024
LOGIN = "/accounts/login/"


@dataclass
class Served:
    process: subprocess.Popen
    port: int
    log: Path

    def children(self) -> list[int]:
        """The supervisor's child processes (web processes and quality workers)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()]

    def web_pids(self) -> list[int]:
        return [pid for pid in self.children() if b"webserver" in _cmdline(pid)]

    def worker_pids(self) -> list[int]:
        return [pid for pid in self.children() if b"quality_worker" in _cmdline(pid)]


def _state(pid: int) -> str:
    """The process's state letter (``Z``: exited, not yet reaped; ``""``: gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
    return next(line.split()[1] for line in status.splitlines() if line.startswith("State:"))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(port: int, path: str = LOGIN, timeout: float = 10) -> tuple[int, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


@pytest.fixture(scope="session")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local directory (SQLite database, secret key, static files) set up once: each server
    starts from a copy, and its own ``migrate`` and ``collectstatic`` find nothing to do (a
    fresh set-up cost 15-50 s a server under load)."""
    local = tmp_path_factory.mktemp("migrated")
    for command in (["migrate", "--noinput"], ["collectstatic", "--noinput", "--verbosity", "0"]):
        result = manage(*command, env=child_env(local), cwd=local, timeout=300)
        assert result.returncode == 0, result.stderr
    return local


def _serve(tmp_path: Path, migrated: Path, *, web: int) -> Iterator[Served]:
    if not Path("/proc/self/task").is_dir():
        pytest.skip("reads processes from Linux /proc")
    shutil.copytree(migrated, tmp_path, dirs_exist_ok=True)
    port = _free_port()
    log = tmp_path / "serve.log"
    env = child_env(tmp_path, PORT=str(port), WEB_CONCURRENCY=str(web), ALLOWED_HOSTS="127.0.0.1")
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "serve"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Served(process, port, log)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                if _get(port, timeout=5)[0] == 200 and len(served.web_pids()) == web:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError(f"serve did not answer:\n{log.read_text()[-3000:]}")
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def one_web(tmp_path_factory: pytest.TempPathFactory, migrated: Path) -> Iterator[Served]:
    """serve with one web process: a stall of it would stall every request."""
    yield from _serve(tmp_path_factory.mktemp("one-web"), migrated, web=1)


@pytest.fixture
def two_webs(tmp_path: Path, migrated: Path) -> Iterator[Served]:
    yield from _serve(tmp_path, migrated, web=2)


def _send_multipart(port: int, size: int, *, chunked: bool, headers: dict[str, str]) -> int:
    """POST ``size`` bytes of multipart/form-data to ``/x/``; the status (or 0 if the server
    closed the connection before answering)."""
    boundary = "studioboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="f"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    piece = b"\0" * MB
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest("POST", "/x/")
        connection.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        for name, value in headers.items():
            connection.putheader(name, value)
        total = len(head) + size + len(tail)
        if chunked:
            connection.putheader("Transfer-Encoding", "chunked")
        else:
            connection.putheader("Content-Length", str(total))
        connection.endheaders()
        for block in [head, *(piece for _ in range(size // MB)), tail]:
            connection.send(f"{len(block):x}\r\n".encode() + block + b"\r\n" if chunked else block)
        if chunked:
            connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        response.read()
        return response.status
    except OSError:  # the server answered 413 and closed while the body was still going out
        try:
            return connection.getresponse().status
        except (OSError, http.client.HTTPException):
            return 0
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("chunked", "headers", "refused"),
    [
        (False, {}, True),  # anonymous, announced length: 413 before reading
        (True, {}, True),  # anonymous, chunked: 413 once 256 KiB have been counted
        (False, {"Cookie": "sessionid=forged"}, False),  # under the upload limit: streamed
    ],
    ids=["anonymous-length", "anonymous-chunked", "session-cookie"],
)
def test_a_50_mb_multipart_body_stalls_nobody_and_costs_little_memory(
    one_web: Served, chunked: bool, headers: dict[str, str], refused: bool
) -> None:
    """While a 50 MB multipart POST goes to the only web process, the sign-in page answers
    within 1 s each time, and the process grows by less than 200 MB."""
    web = one_web.web_pids()
    before = _rss_mb(web)
    peak = [before]
    outcome: list[int] = []
    sender = threading.Thread(
        target=lambda: outcome.append(
            _send_multipart(one_web.port, 50 * MB, chunked=chunked, headers=headers)
        )
    )
    sender.start()
    slowest = 0.0
    while sender.is_alive():
        status, seconds = _get(one_web.port)
        assert status == 200
        slowest = max(slowest, seconds)
        peak.append(_rss_mb(web))
        time.sleep(0.05)
    sender.join()
    status, seconds = _get(one_web.port)
    assert status == 200
    assert max(slowest, seconds) < 1.0, (slowest, seconds)
    assert max(peak) - before < 200, (before, peak)
    if refused:
        assert outcome in ([413], [0]), outcome
    else:  # read to the end (into a temporary file), then routed: no such page
        assert outcome == [404], outcome


def _sockets(pid: int) -> set[str]:
    """The inodes of the process's sockets."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            found.add(link[8:-1])
    return found


def _server_side(port: int, client_port: int) -> str | None:
    """The inode of the established server-side socket on 127.0.0.1:``port`` whose peer is the
    client's ``client_port``, from /proc/net/tcp (None once the server has closed it)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
        if fields[3] == "01" and local == port and remote == client_port:
            return fields[9]
    return None


def _connections_by_process(served: Served, count: int) -> list[int]:
    """Open ``count`` connections at once (a crowd's burst), see which web process accepted
    each, then make a request on each; how many each process accepted. Attributed at accept,
    before any request: once answered, a connection may be closed by its process, which sheds
    keep-alive connections beyond its share (annotate_site.connection_balance)."""
    connections = [
        http.client.HTTPConnection("127.0.0.1", served.port, timeout=30) for _ in range(count)
    ]
    webs = served.web_pids()
    try:
        for connection in connections:
            connection.connect()  # every connection waits in the queue before one is served
        deadline = time.monotonic() + 60
        while True:
            held = [_sockets(pid) for pid in webs]
            ends = [_server_side(served.port, c.sock.getsockname()[1]) for c in connections]
            holders = [[n for n, sockets in enumerate(held) if end in sockets] for end in ends]
            if all(len(found) == 1 for found in holders) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert all(len(found) == 1 for found in holders), holders
        for connection in connections:
            connection.request("GET", LOGIN)
            response = connection.getresponse()
            response.read()
            assert response.status == 200
        return [sum(found == [n] for found in holders) for n in range(len(webs))]
    finally:
        for connection in connections:
            connection.close()


def test_a_killed_process_is_restarted_alone_and_sigterm_stops_everything(
    two_webs: Served,
) -> None:
    webs, workers = two_webs.web_pids(), two_webs.worker_pids()
    assert len(webs) == 2
    assert len(workers) == 1
    # a burst of connections is spread over both processes (one shared socket gave one
    # process nearly all of them: P(either gets fewer than 6 of 32 by chance) < 1e-4)
    held = _connections_by_process(two_webs, 32)
    assert sum(held) == 32, held
    assert min(held) >= 6, held
    os.kill(webs[0], signal.SIGKILL)
    # The port keeps serving: a connection the kernel gives the other process's socket is
    # answered at once, one given the killed process's socket waits in its queue (the
    # supervisor holds it) for the restart. That restart is timed in benchmarks on an idle
    # machine (within 5 s); here, beside a second test worker and a browser, it took longer,
    # so each request may wait for it: what must hold is that none is refused or reset.
    deadline = time.monotonic() + 5
    statuses = []
    while time.monotonic() < deadline:
        statuses.append(_get(two_webs.port, timeout=60)[0])
        restarted = set(two_webs.web_pids()) - {webs[1]}
        if restarted - {webs[0]}:
            break
        time.sleep(0.05)
    assert set(statuses) == {200}, statuses
    assert webs[1] in two_webs.web_pids()  # the other web process was not touched
    assert len(set(two_webs.web_pids()) - set(webs)) == 1, two_webs.log.read_text()[-2000:]
    assert two_webs.worker_pids() == workers
    # the restarted process serves its socket again: connections that reached it meanwhile
    # waited in its queue (held by the supervisor), none was reset
    held = _connections_by_process(two_webs, 32)
    assert sum(held) == 32, held
    assert min(held) >= 6, held

    os.kill(workers[0], signal.SIGKILL)  # the quality worker, too, comes back alone
    # Its death is the kernel's part, timed apart from the restart: twice in CI (SQLite pass,
    # two test workers and a browser beside it) no restart was logged within 15 s of the
    # signal, as if the process had not yet exited (a process in uninterruptible sleep, on a
    # loaded disk, dies only when its I/O returns).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _state(workers[0]) not in ("", "Z"):
        time.sleep(0.05)
    assert _state(workers[0]) in ("", "Z"), f"still {_state(workers[0])} after SIGKILL"
    deadline = time.monotonic() + 15  # a loaded CI machine (two test workers beside it)
    while time.monotonic() < deadline:
        if two_webs.worker_pids() and two_webs.worker_pids() != workers:
            break
        time.sleep(0.05)
    assert two_webs.worker_pids(), two_webs.log.read_text()[-2000:]
    assert two_webs.worker_pids() != workers
    assert "web.1 (pid" in two_webs.log.read_text()

    children = two_webs.children()
    two_webs.process.send_signal(signal.SIGTERM)
    assert two_webs.process.wait(30) == 0
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or _cmdline(pid) == b"", pid


def _split_after_rounds(served: Served, count: int, rounds: int) -> list[int]:
    """Open ``count`` keep-alive connections and make a request on each, round after round,
    as a crowd of clients does (a connection the server closed is opened again for its next
    request, as browsers and HTTP libraries do), until a round in which the server closed none
    or after ``rounds``; then how many of them each web process holds."""
    connections = [
        http.client.HTTPConnection("127.0.0.1", served.port, timeout=30) for _ in range(count)
    ]
    try:
        for _ in range(rounds):
            closed = 0
            for connection in connections:
                connection.request("GET", LOGIN)
                response = connection.getresponse()
                response.read()
                assert response.status == 200
                closed += connection.sock is None
            if not closed:
                break
        for connection in connections:
            if connection.sock is None:  # closed by the last round's response
                connection.connect()
        held = [_sockets(pid) for pid in served.web_pids()]
        ends = [_server_side(served.port, c.sock.getsockname()[1]) for c in connections]
        return [sum(end in sockets for end in ends) for sockets in held]
    finally:
        for connection in connections:
            connection.close()


def test_keep_alive_connections_even_out_over_the_web_processes(two_webs: Served) -> None:
    """The kernel gives each new connection to one process's socket by a hash of its
    addresses, and a keep-alive connection stays where it landed: 64 benchmark connections
    split 26/38 and 36/28, 128 split 55/73, each for a whole run (where a process is the
    bottleneck, the larger share's clients wait longer). A process holding more than its
    share answers with ``Connection: close``; the client reconnects and the kernel hashes it
    afresh, until the shares differ by at most 1. Three fresh sets of 64: without the
    balance all three split 32/32 by chance about once in 1,000."""
    splits = [_split_after_rounds(two_webs, 64, rounds=12) for _ in range(3)]
    for held in splits:
        assert sum(held) == 64, splits
    assert max(abs(a - b) for a, b in splits) <= 1, splits
