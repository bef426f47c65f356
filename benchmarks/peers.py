"""Peers for the side-by-side serving benchmark: Potato and Label Studio on the same task.

Each peer is installed from the package index into a throwaway virtualenv under a temporary
directory (never into the studio's environment: they are benchmark-only, not dependencies),
started on its own loopback port with its own server, given the task of
:mod:`benchmarks.submit_throughput` (``items`` text items, one 4-label single-choice
question) and driven by the same asyncio client, each simulated annotator looping without
think time over one keep-alive connection, one answer at a time, as the peer's page does:

``potato``        Potato (``potato-annotation``, one Flask process writing JSON files): a
                  participant signs in by URL (``/?PROLIFIC_PID=...``) and each answer is
                  ``POST /updateinstance`` (the label) then ``POST /annotate``
                  (``next_instance``), which answers with the next item's page.
``label-studio``  Label Studio (its Django server on SQLite, one shared API token):
                  ``GET /api/projects/{id}/next`` then ``POST /api/tasks/{id}/annotations/``.

Each answer a peer acknowledged is looked for in its storage afterwards (Potato: the users'
``user_state.json``; Label Studio: the project's annotation count).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.submit_throughput import Connection

PEER_LABELS = ["negative", "neutral", "positive", "mixed"]
POTATO = "potato-annotation==2.12.1"
LABEL_STUDIO = "label-studio==1.23.2"
INSTALL_SECONDS = 900
START_SECONDS = 420  # Label Studio's first start migrates its database: minutes here


class PeerUnavailableError(Exception):
    """A peer that could not be installed or started here; the message says why."""


@dataclass
class PeerTally:
    """What one run of a peer saw: acknowledged answers, errors, whole-answer latencies."""

    acknowledged: int = 0
    errors: int = 0
    answer_ms: list[float] = field(default_factory=list)
    ran_out: int = 0  # clients left with nothing to answer before the end


# --- one keep-alive HTTP/1.1 connection with cookies ---------------------------------------


class CookieConnection(Connection):
    """A keep-alive connection that keeps the cookies the server sets, as a browser does."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.cookies: dict[str, str] = {}

    async def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{key}={value}" for key, value in self.cookies.items())
        status, received, data = await super().request(method, path, sent, body)
        for cookie in filter(None, received["set-cookie"].split("\n")):
            key, _, value = cookie.partition(";")[0].partition("=")
            self.cookies[key.strip()] = value.strip()
        return status, received, data


# --- installing and serving ------------------------------------------------------------------


def install(requirement: str, root: Path) -> Path:
    """A virtualenv under ``root`` with ``requirement`` installed; returns its ``bin``. One
    left there by an earlier run (``--peers-dir``) is used as it is."""
    venv = root / requirement.replace("==", "-")
    if (venv / "installed").exists():
        return venv / "bin"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    try:
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", requirement],
            capture_output=True,
            text=True,
            timeout=INSTALL_SECONDS,
        )
    except subprocess.TimeoutExpired:
        took = f"pip install {requirement} took over {INSTALL_SECONDS} s"
        raise PeerUnavailableError(took) from None
    if done.returncode != 0:
        failed = f"pip install {requirement} failed: {done.stderr.strip()[-300:]}"
        raise PeerUnavailableError(failed)
    (venv / "installed").touch()
    return venv / "bin"


def _wait_for_http(port: int, path: str, seconds: float, server: subprocess.Popen) -> None:
    """Wait until ``GET path`` answers (any status), or the server dies, or time is up."""

    async def probe() -> bool:
        try:
            conn = CookieConnection(port)
            await asyncio.wait_for(conn.request("GET", path), 10)
            conn.close()
            return True
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            return False

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise PeerUnavailableError(f"the server exited with {server.returncode} while starting")
        if asyncio.run(probe()):
            return
        time.sleep(0.5)
    raise PeerUnavailableError(f"not answering on port {port} after {seconds:.0f} s")


def _children(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[1])
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def stop(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group (then SIGKILL after 15 s)."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(5)


@dataclass
class Peer:
    """A started peer: its server, the port, and how to drive and check it."""

    name: str
    server: subprocess.Popen
    port: int
    answer_loop: Callable[[CookieConnection, int, PeerTally, float], Coroutine[Any, Any, None]]
    prepare: Callable[[CookieConnection, int], Coroutine[Any, Any, bool]]
    stored: Callable[[], int]

    def pids(self) -> list[int]:
        return _children(self.server.pid)


# --- Potato -----------------------------------------------------------------------------------

POTATO_INSTANCE = re.compile(rb'name="instance_id" type="hidden" value="([^"]+)"')


def potato_start(bin_dir: Path, work: Path, *, port: int, items: int) -> Peer:
    """Potato serving ``items`` sentences with one 4-label radio question; participants sign
    in by URL (``url_direct``), every item open to everyone, in random order per user."""
    (work / "items.jsonl").write_text(
        "".join(json.dumps({"id": f"t-{i}", "text": f"Sentence {i}."}) + "\n" for i in range(items))
    )
    (work / "config.yaml").write_text(
        "annotation_task_name: Throughput\n"
        "task_dir: .\n"
        "output_annotation_dir: annotation_output\n"
        "output_annotation_format: json\n"
        "data_files: [items.jsonl]\n"
        "item_properties: {id_key: id, text_key: text}\n"
        "user_config: {allow_all_users: true, users: []}\n"
        "login: {type: url_direct, url_argument: PROLIFIC_PID}\n"
        "alert_time_each_instance: 10000000\n"
        "assignment_strategy: fixed_order\n"
        f"max_annotations_per_user: {items}\n"
        "max_annotations_per_item: -1\n"
        "annotation_schemes:\n"
        "  - annotation_type: radio\n"
        "    name: sentiment\n"
        "    description: What is the sentiment?\n"
        f"    labels: [{', '.join(PEER_LABELS)}]\n"
    )
    log = (work / "server.log").open("w")
    server = subprocess.Popen(
        [str(bin_dir / "potato"), "start", "config.yaml", "-p", str(port), "--host", "127.0.0.1"],
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _wait_for_http(port, "/", START_SECONDS, server)
    current: dict[int, str] = {}  # connection id -> the instance its page shows

    async def prepare(conn: CookieConnection, n: int) -> bool:
        status, _, _ = await conn.request("GET", f"/?PROLIFIC_PID=bench-{n}")
        status, _, body = await conn.request("GET", "/annotate")
        found = POTATO_INSTANCE.search(body)
        if status != 200 or found is None:
            return False
        current[id(conn)] = found.group(1).decode()
        return True

    async def answer_loop(conn: CookieConnection, n: int, tally: PeerTally, until: float) -> None:
        json_headers = {"Content-Type": "application/json"}
        while time.perf_counter() < until:
            instance = current[id(conn)]
            label = PEER_LABELS[(n + len(tally.answer_ms)) % len(PEER_LABELS)]
            save = {
                "instance_id": instance,
                "annotations": {f"sentiment:{label}": label},
                "span_annotations": [],
            }
            try:
                sent = time.perf_counter()
                status, _, body = await conn.request(
                    "POST", "/updateinstance", json_headers, json.dumps(save).encode()
                )
                if status != 200 or json.loads(body).get("status") != "success":
                    tally.errors += 1
                    continue
                tally.acknowledged += 1
                step = {"action": "next_instance", "instance_id": instance}
                status, _, body = await conn.request(
                    "POST", "/annotate", json_headers, json.dumps(step).encode()
                )
                tally.answer_ms.append(1000 * (time.perf_counter() - sent))
            except (OSError, asyncio.IncompleteReadError, ValueError):
                tally.errors += 1
                await asyncio.sleep(0.05)
                continue
            found = POTATO_INSTANCE.search(body)
            if status == 200 and found is None:  # the participant's items are done
                tally.ran_out += 1
                return
            if status != 200 or found is None:
                tally.errors += 1
                return
            current[id(conn)] = found.group(1).decode()

    def stored() -> int:
        """Labelled instances in every participant's saved state (read after the stop)."""
        total = 0
        for state in (work / "annotation_output").glob("bench-*/user_state.json"):
            labels = json.loads(state.read_text()).get("instance_id_to_label_to_value", {})
            total += sum(1 for values in labels.values() if values)
        return total

    return Peer("potato", server, port, answer_loop, prepare, stored)


# --- Label Studio -----------------------------------------------------------------------------

LABEL_CONFIG = (
    '<View><Text name="text" value="$text"/>'
    '<Choices name="sentiment" toName="text" choice="single">'
    + "".join(f'<Choice value="{label}"/>' for label in PEER_LABELS)
    + "</Choices></View>"
)


def label_studio_start(bin_dir: Path, work: Path, *, port: int, items: int) -> Peer:
    """Label Studio (its own ``label-studio start`` server, SQLite) with a project of ``items``
    tasks and one single-choice question of 4 labels; every client uses one user's token."""
    # Its database (migrated on the first start: minutes here) and its user's token are kept
    # beside the virtualenvs, so later runs start in seconds; each run has a project of its own.
    data = work.parent / "label-studio-data"
    data.mkdir(exist_ok=True)
    token_file = data / "bench-token"
    if not token_file.exists():
        token_file.write_text(secrets.token_hex(20))
    token = token_file.read_text()
    env = {
        **os.environ,
        "LABEL_STUDIO_USERNAME": "bench@example.org",
        "LABEL_STUDIO_PASSWORD": secrets.token_urlsafe(12),
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_BASE_DATA_DIR": str(data),
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        # the API token above (new organisations accept only short-lived JWTs otherwise)
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the studio's, set in this process
    log = (work / "server.log").open("w")
    server = subprocess.Popen(
        [
            str(bin_dir / "label-studio"),
            "start",
            "--no-browser",
            "--internal-host",
            "127.0.0.1",
            "-p",
            str(port),
            "--data-dir",
            str(data),
        ],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _wait_for_http(port, "/health", START_SECONDS, server)
    auth = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    async def api(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = CookieConnection(port)
        payload = b"" if body is None else json.dumps(body).encode()
        status, _, data = await conn.request(method, path, auth, payload)
        conn.close()
        return status, json.loads(data) if data.strip() else None

    async def make_project() -> int:
        status, project = await api(
            "POST", "/api/projects", {"title": "Throughput", "label_config": LABEL_CONFIG}
        )
        if status != 201:
            raise PeerUnavailableError(f"project creation answered {status}: {project}")
        tasks = [{"text": f"Sentence {i}."} for i in range(items)]
        status, answer = await api("POST", f"/api/projects/{project['id']}/import", tasks)
        if status != 201:
            raise PeerUnavailableError(f"task import answered {status}: {answer}")
        return int(project["id"])

    project_id = asyncio.run(make_project())

    async def prepare(conn: CookieConnection, n: int) -> bool:
        return True

    async def answer_loop(conn: CookieConnection, n: int, tally: PeerTally, until: float) -> None:
        while time.perf_counter() < until:
            label = PEER_LABELS[(n + len(tally.answer_ms)) % len(PEER_LABELS)]
            try:
                sent = time.perf_counter()
                status, _, body = await conn.request(
                    "GET", f"/api/projects/{project_id}/next", auth
                )
                if status == 404:  # no task left
                    tally.ran_out += 1
                    return
                if status != 200:
                    tally.errors += 1
                    continue
                task = json.loads(body)["id"]
                result = [
                    {
                        "from_name": "sentiment",
                        "to_name": "text",
                        "type": "choices",
                        "value": {"choices": [label]},
                    }
                ]
                status, _, body = await conn.request(
                    "POST",
                    f"/api/tasks/{task}/annotations/?project={project_id}",
                    auth,
                    json.dumps({"result": result, "lead_time": 1.0}).encode(),
                )
                tally.answer_ms.append(1000 * (time.perf_counter() - sent))
            except (OSError, asyncio.IncompleteReadError, ValueError):
                tally.errors += 1
                await asyncio.sleep(0.05)
                continue
            if status == 201:
                tally.acknowledged += 1
            else:
                tally.errors += 1

    def stored() -> int:
        """The project's annotations, counted through the API (before the stop)."""
        status, project = asyncio.run(api("GET", f"/api/projects/{project_id}"))
        return int(project["total_annotations_number"]) if status == 200 else -1

    return Peer("label-studio", server, port, answer_loop, prepare, stored)


STARTERS = {"potato": (POTATO, potato_start), "label-studio": (LABEL_STUDIO, label_studio_start)}


def peer_start(name: str, root: Path, *, port: int, items: int) -> Peer:
    """Install (into a virtualenv under ``root``) and start the peer ``name`` with a new
    project in a new directory."""
    requirement, start = STARTERS[name]
    bin_dir = install(requirement, root)
    return start(
        bin_dir, Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root)), port=port, items=items
    )


async def peer_run(peer: Peer, *, clients: int, seconds: float) -> tuple[PeerTally, float]:
    """``clients`` simulated annotators (``bench-0`` ...) on their own connections."""
    tally = PeerTally()
    conns = [CookieConnection(peer.port) for _ in range(clients)]
    ready = await asyncio.gather(*(peer.prepare(conn, n) for n, conn in enumerate(conns)))
    tally.errors += ready.count(False)
    until = time.perf_counter() + seconds
    started = time.perf_counter()
    await asyncio.gather(
        *(
            peer.answer_loop(conn, n, tally, until)
            for n, (conn, ok) in enumerate(zip(conns, ready, strict=True))
            if ok
        )
    )
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    return tally, elapsed
