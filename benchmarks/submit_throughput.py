"""Submit throughput: answers per second and latency as concurrent annotators work, side by
side with Potato and Label Studio on the same task.

A running study with ``--items`` text items and one categorical question of 4 labels gives
each simulated annotator (``--annotators`` per path, each with an API token and a logged-in
session) a queue of every item. The benchmark serves the site on 127.0.0.1 as
``annotation-studio serve`` does (``--server studio``: the supervisor, ``--web`` uvicorn
processes on one port and ``--workers`` quality worker processes; with ``DATABASE_URL``/
``REDIS_URL`` set, the PostgreSQL + Redis stack), or with ``--web`` processes of another server
on consecutive ports (``daphne``, ``uvicorn``, ``granian``, ``hypercorn``; the quality updates
in a background thread of each, or none with ``--mode worker --workers 0``: the server alone)
and, for each client count of ``--clients``, lets that many simulated annotators loop for
``--seconds`` without think time over keep-alive connections:

``page``    the annotator page's own path: one htmx ``POST /studies/{id}/annotate/`` that
            answers and returns the next item (session cookie, CSRF token, signed ticket);
``answer``  one API request per answer: ``POST /api/annotations/`` with ``include_next``,
            whose response holds the next assignment (token auth);
``api``     the classic API loop: ``GET /api/studies/{id}/next/`` then ``POST``.

It prints answers/s, the answering POST's p50/p95/p99 latency, the errors (any status but
the success one, refused or reset connections), the server's CPU per answer and the machine's
load, and checks that every acknowledged answer was stored exactly once. ``--peers
potato,label-studio`` then installs each peer into a throwaway virtualenv
(:mod:`benchmarks.peers`), drives it the same way alone on the machine, and prints every
system side by side with our answers/s and p99 as ratios to the peers'. The load generator
(this process, asyncio streams) shares the machine's cores with the servers, as a real
single-host deployment's users do not: the figures are a floor.

``--flat HISTORY:ANSWERS,...`` measures instead, in process (Django's test client, no HTTP),
the CPU time of one submit (the request thread's: the quality update runs on its own thread)
and of one ``next`` for an annotator with HISTORY earlier answers in a study holding ANSWERS
answers (bulk-imported), e.g. ``--flat 1000:10000,20000:40000,1000:500000``.

Uses a temporary SQLite database (or ``DATABASE_URL`` when set: give a throw-away database, the
benchmark migrates it and adds a study to it). Run from the repository root::

    .venv/bin/python -m benchmarks.submit_throughput --items 500 --clients 1,32 \
        --path page,answer,api --peers potato,label-studio
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from benchmarks.django_setup import ROOT, setup_django

LABELS = ["negative", "neutral", "positive", "mixed"]  # the peers' task: 4 labels
HIDDEN = re.compile(r'name="(idempotency_key|ticket)"\s+value="([^"]*)"')
CSRF_HEADER = re.compile(r'"X-CSRFToken": "([^"]+)"')


def _annotators(n: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """``n`` users, each with an API token and a logged-in session; returns (users, clients)."""
    from django.test import Client
    from knox.models import AuthToken

    from tests.factories import UserFactory

    users = [UserFactory() for _ in range(n)]
    clients = []
    for user in users:
        web = Client()
        web.force_login(user)
        clients.append(
            {
                "token": AuthToken.objects.create(user=user)[1],
                "session": web.cookies["sessionid"].value,
            }
        )
    return users, clients


def _study(*, n_items: int, annotators: list[Any]) -> tuple[Any, Any]:
    """A running study whose every annotator has every item queued (each from its own offset,
    so items collect several answers early); returns (study, question)."""
    from apps.annotations.models import Assignment
    from apps.items.models import Item
    from apps.studies.models import Membership, Study
    from apps.studies.services import membership_add
    from tests.factories import StudyFactory, categorical_question

    study = StudyFactory()
    question = categorical_question(study)
    question.labels.create(key="mixed", name="Mixed", shortcut="4", position=3)
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"t-{i}", text=f"Sentence {i}.", position=i)
            for i in range(n_items)
        ],
        batch_size=5000,
    )
    item_ids = list(study.items.order_by("position").values_list("pk", flat=True))
    step = max(1, n_items // (2 * len(annotators)))
    Assignment.objects.bulk_create(
        [
            Assignment(
                study=study,
                item_id=item_id,
                annotator=user,
                position=(i - a * step) % n_items,
            )
            for a, user in enumerate(annotators)
            for i, item_id in enumerate(item_ids)
        ],
        batch_size=5000,
    )
    # opened directly: the queues above replace the ones opening would fill
    Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING)
    return study, question


@dataclass
class Row:
    """One measured row: a path, a client count, the study it runs on and its clients."""

    path: str
    clients: list[dict[str, Any]]
    study: Any
    question: Any


def _plan(
    *, paths: list[str], counts: list[int], n_items: int, n_annotators: int, fresh: bool
) -> tuple[list[Row], list[Row]]:
    """The warm-up rows (one per path) and the measured rows, with their studies seeded.

    One study for the run (``fresh`` false): each path has its own annotators, and each row
    goes on where the one before it left off, so later rows meet items with more answers.
    A study per row (``fresh``): every row starts from the same state, with the same
    annotators, so rows differ by their client count and path alone."""
    if not fresh:
        users, clients = _annotators(n_annotators * len(paths))
        study, question = _study(n_items=n_items, annotators=users)
        # each path its own annotators: a queue of --items runs out otherwise
        mine = {path: clients[p :: len(paths)] for p, path in enumerate(paths)}
        warm = [Row(path, mine[path], study, question) for path in paths]
        return warm, [Row(path, mine[path][:n], study, question) for path in paths for n in counts]
    users, clients = _annotators(n_annotators)
    warm_study = _study(n_items=n_items, annotators=users[:4])
    warm = [Row(path, clients[:4], *warm_study) for path in paths]
    rows = [
        Row(path, clients[:n], *_study(n_items=n_items, annotators=users[:n]))
        for path in paths
        for n in counts
    ]
    return warm, rows


def _flat_row(*, history: int, answers: int, submits: int = 60) -> dict[str, float]:
    """Per-submit and per-next CPU ms for an annotator with ``history`` earlier answers in a
    new study of ``answers`` answers (other annotators answer every item, 5 or more per item)."""
    from django.test import Client
    from knox.models import AuthToken

    from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
    from apps.annotations.models import Assignment
    from apps.items.models import Item
    from apps.studies.models import Membership, Study
    from apps.studies.services import membership_add
    from tests.factories import StudyFactory, UserFactory, categorical_question

    study = StudyFactory()
    question = categorical_question(study)
    n_items = max(history, -(-answers // 5))
    open_items = submits + 20
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"f-{i}", text=f"Sentence {i}.", position=i)
            for i in range(n_items + open_items)
        ],
        batch_size=5000,
    )
    others = -(-(answers - history) // n_items)
    users = [UserFactory() for _ in range(1 + others)]
    for user in users:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING)
    me, rest = users[0], users[1:]
    left = answers - history
    records = [
        FinishedAnnotation(f"f-{i}", me.username, question.key, LABELS[i % 3])
        for i in range(history)
    ]
    for user in rest:
        take = min(left, n_items)
        left -= take
        records += [
            FinishedAnnotation(f"f-{i}", user.username, question.key, LABELS[(i * 7) % 3])
            for i in range(take)
        ]
    annotations_import_finished(study=study, records=records)
    item_ids = study.items.filter(position__gte=n_items).values_list("pk", flat=True)
    Assignment.objects.bulk_create(
        [
            Assignment(study=study, item_id=item_id, annotator=me, position=n_items + j)
            for j, item_id in enumerate(item_ids)
        ]
    )
    client = Client(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=me)[1]}")
    post_ms, next_ms = [], []
    for n in range(submits + 10):
        started = time.thread_time()
        entry = client.get(f"/api/studies/{study.pk}/next/").json()
        took_next = time.thread_time() - started
        body = {
            "assignment": entry["assignment"],
            "answers": {question.key: LABELS[n % 3]},
            "idempotency_key": str(uuid.uuid4()),
            "time_spent_ms": 1000,
        }
        started = time.thread_time()
        response = client.post("/api/annotations/", body, content_type="application/json")
        took_post = time.thread_time() - started
        assert response.status_code == 201, response.content
        if n >= 10:  # the first ones warm caches up
            post_ms.append(1000 * took_post)
            next_ms.append(1000 * took_next)
    return {
        "history": history,
        "answers": answers,
        "post_cpu_ms_p50": _pct(post_ms, 0.5),
        "next_cpu_ms_p50": _pct(next_ms, 0.5),
    }


def _flatness(pairs: str) -> list[dict[str, float]]:
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)  # the dashboard's layout of a big import
    rows = []
    print(f"{'earlier answers':>15} {'study answers':>13} {'POST CPU ms':>11} {'next CPU ms':>11}")
    for pair in pairs.split(","):
        history, answers = (int(n) for n in pair.split(":"))
        row = _flat_row(history=history, answers=answers)
        rows.append(row)
        print(
            f"{history:>15,} {answers:>13,} {row['post_cpu_ms_p50']:>11.1f} "
            f"{row['next_cpu_ms_p50']:>11.1f}",
            flush=True,
        )
    return rows


# --- a minimal keep-alive HTTP/1.1 client --------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection (what a browser tab or an API client holds)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        try:
            return await self._response()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            self.close()
            raise

    async def _response(self) -> tuple[int, dict[str, str], bytes]:
        assert self.reader is not None
        status = int((await self.reader.readuntil(b"\r\n")).split()[1])
        headers: dict[str, str] = {}
        cookies = []
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
            if name.strip().lower() == "set-cookie":
                cookies.append(value.strip())
        headers["set-cookie"] = "\n".join(cookies)
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                body += (await self.reader.readexactly(size + 2))[:-2]
            await self.reader.readuntil(b"\r\n")
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", 0)))
        if headers.get("connection") == "close":
            self.close()
        return status, headers, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# --- simulated annotators ---------------------------------------------------------------------


@dataclass
class Tally:
    """What one client-count run saw."""

    acknowledged: int = 0
    errors: int = 0
    post_ms: list[float] = field(default_factory=list)
    other_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)  # every request of one answer
    ran_out: int = 0  # clients whose queue emptied before the row's end


async def _post_answer(
    conn: Connection,
    auth: dict[str, str],
    assignment: int,
    tally: Tally,
    rng: Any,
    *,
    include_next: bool = False,
) -> tuple[int, bytes]:
    """``POST /api/annotations/`` with a random label (its latency goes to ``post_ms``)."""
    answer = {
        "assignment": assignment,
        "answers": {"sentiment": rng.choice(LABELS)},
        "idempotency_key": str(uuid.uuid4()),
        "time_spent_ms": rng.randint(800, 5000),
        **({"include_next": True} if include_next else {}),
    }
    sent = time.perf_counter()
    status, _, body = await conn.request(
        "POST",
        "/api/annotations/",
        {**auth, "Content-Type": "application/json"},
        json.dumps(answer).encode(),
    )
    tally.post_ms.append(1000 * (time.perf_counter() - sent))
    return status, body


async def _api_annotator(
    conn: Connection, client: dict[str, Any], study_id: int, tally: Tally, until: float, rng: Any
) -> None:
    auth = {"Authorization": f"Token {client['token']}"}
    while time.perf_counter() < until:
        try:
            started = time.perf_counter()
            status, _, body = await conn.request("GET", f"/api/studies/{study_id}/next/", auth)
            tally.other_ms.append(1000 * (time.perf_counter() - started))
            if status == 204:  # nothing left to answer
                tally.ran_out += 1
                return
            if status != 200:
                tally.errors += 1
                continue
            assignment = json.loads(body)["assignment"]
            status, body = await _post_answer(conn, auth, assignment, tally, rng)
            tally.answer_ms.append(1000 * (time.perf_counter() - started))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.errors += 1
            await asyncio.sleep(0.05)
            continue
        if status == 201:
            tally.acknowledged += 1
        else:
            tally.errors += 1


def _page_state(body: bytes) -> dict[str, str]:
    """The next item's idempotency key and ticket from a rendered item area."""
    return dict(HIDDEN.findall(body.decode()))


async def _page_annotator(
    conn: Connection,
    client: dict[str, Any],
    study_id: int,
    question_id: int,
    tally: Tally,
    until: float,
    rng: Any,
) -> None:
    path = f"/studies/{study_id}/annotate/"
    cookie = f"sessionid={client['session']}"
    status, headers, body = await conn.request("GET", path, {"Cookie": cookie})
    csrf_cookie = re.search(r"csrftoken=([^;]+)", headers["set-cookie"])
    if status != 200 or csrf_cookie is None:
        tally.errors += 1
        return
    cookie += f"; csrftoken={csrf_cookie.group(1)}"
    page = body.decode()
    token = CSRF_HEADER.search(page).group(1)
    state = _page_state(body)
    form_headers = {
        "Cookie": cookie,
        "X-CSRFToken": token,
        "HX-Request": "true",
        "HX-Target": "item-area",
        "HX-Current-URL": f"http://127.0.0.1{path}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    while time.perf_counter() < until and "ticket" in state:
        form = {**state, f"q{question_id}": rng.choice(LABELS)}
        try:
            sent = time.perf_counter()
            status, _, body = await conn.request(
                "POST", path, form_headers, urlencode(form).encode()
            )
            tally.post_ms.append(1000 * (time.perf_counter() - sent))
            tally.answer_ms.append(tally.post_ms[-1])
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.errors += 1
            await asyncio.sleep(0.05)
            continue
        if status == 200:
            tally.acknowledged += 1
            state = _page_state(body)
        else:
            tally.errors += 1
    if "ticket" not in state:
        tally.ran_out += 1


async def _answer_annotator(
    conn: Connection, client: dict[str, Any], study_id: int, tally: Tally, until: float, rng: Any
) -> None:
    """One request per answer over the API: ``POST /api/annotations/`` with ``include_next``
    answers and returns the next assignment (one ``GET next`` first)."""
    auth = {"Authorization": f"Token {client['token']}"}
    status, _, body = await conn.request("GET", f"/api/studies/{study_id}/next/", auth)
    entry = json.loads(body) if status == 200 else None
    while entry is not None and time.perf_counter() < until:
        try:
            status, body = await _post_answer(
                conn, auth, entry["assignment"], tally, rng, include_next=True
            )
            tally.answer_ms.append(tally.post_ms[-1])
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.errors += 1
            await asyncio.sleep(0.05)
            continue
        if status == 201:
            tally.acknowledged += 1
            entry = json.loads(body)["next"]
        else:
            tally.errors += 1
    if entry is None:
        tally.ran_out += 1


async def _run(*, ports: list[int], plan: Row, clients: int, seconds: float) -> tuple[Tally, float]:
    """Let the first ``clients`` of ``plan`` loop on its path and study for ``seconds``."""
    import random

    tally = Tally()
    mine = plan.clients[:clients]
    conns = [Connection(ports[i % len(ports)]) for i in range(len(mine))]
    until = time.perf_counter() + seconds
    started = time.perf_counter()
    study_id = plan.study.pk
    if plan.path in ("api", "answer"):
        loop = _api_annotator if plan.path == "api" else _answer_annotator
        tasks = [
            loop(conn, client, study_id, tally, until, random.Random(i))
            for i, (conn, client) in enumerate(zip(conns, mine, strict=True))
        ]
    else:
        tasks = [
            _page_annotator(
                conn, client, study_id, plan.question.pk, tally, until, random.Random(i)
            )
            for i, (conn, client) in enumerate(zip(conns, mine, strict=True))
        ]
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    return tally, elapsed


def warn_ran_out(row: dict[str, Any], system: str) -> None:
    """Say when clients ran out of items before the row's end: its answers/s then covers part
    of the time at fewer clients, and is no measure of the server."""
    if row["ran_out"]:
        print(
            f"  ! {system} at {row['clients']} clients: {row['ran_out']} ran out of items "
            "before the end; this row is not comparable: raise --items",
            flush=True,
        )


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))] if ordered else 0.0


def _process_tree(pids: list[int]) -> list[int]:
    """``pids`` and all their descendants (Linux ``/proc``), the processes whose CPU counts."""
    found = list(pids)
    for pid in found:
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                found += [int(child) for child in task.read_text().split()]
            except OSError:  # the thread or process ended meanwhile
                continue
    return found


def _cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds each process has used so far (Linux ``/proc``; a process that
    has exited is left out)."""
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def _cpu_since(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds the processes used since ``before`` (:func:`_cpu_seconds`): a process that
    exited meanwhile counts nothing, one that started meanwhile all it used."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in _cpu_seconds(pids).items())


def _quality_workers(pids: list[int]) -> list[int]:
    """The quality worker processes among ``pids`` (their command line names
    ``quality_worker``): the web processes' CPU is the server's without theirs."""
    found = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"quality_worker" in command:
            found.append(pid)
    return found


_BIN = Path(sys.executable).parent
ASGI = "annotate_site.asgi:application"
# One process each on its own port (``--web`` of them); the servers compared for issue 22.
SERVERS = {
    "daphne": [str(_BIN / "daphne"), ASGI],
    "uvicorn": [str(_BIN / "uvicorn"), "--no-access-log", "--lifespan", "off", ASGI],
    "granian": [str(_BIN / "granian"), "--interface", "asgi", "--log-level", "warning", ASGI],
    "hypercorn": [str(_BIN / "hypercorn"), ASGI],
}


def _bind(server: str, port: int) -> list[str]:
    """The command-line options that put ``server`` on 127.0.0.1:``port``."""
    if server == "hypercorn":
        return ["-b", f"127.0.0.1:{port}"]
    if server == "daphne":
        return ["-b", "127.0.0.1", "-p", str(port)]
    return ["--host", "127.0.0.1", "--port", str(port)]


def _wait_for(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the server did not start on port {port}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,32,64", help="comma-separated client counts")
    parser.add_argument(
        "--path",
        default="api,page",
        help="comma-separated: api (GET next + POST), answer (POST with include_next: one "
        "request per answer), page (the annotator page's htmx POST)",
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="per client count")
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument(
        "--annotators", type=int, default=0, help="per path; default: the most clients"
    )
    parser.add_argument(
        "--web",
        type=int,
        default=2,
        help="server processes (2: what `annotation-studio serve` starts, WEB_CONCURRENCY)",
    )
    parser.add_argument("--port", type=int, default=8400, help="(first) server port")
    parser.add_argument(
        "--mode",
        choices=["thread", "worker"],
        default="thread",
        help="QUALITY_UPDATES of other servers than studio; worker with --workers 0 = no "
        "quality work at all (the server alone)",
    )
    parser.add_argument("--workers", type=int, default=1, help="quality workers (studio)")
    parser.add_argument(
        "--server",
        choices=["studio", *sorted(SERVERS)],
        default="studio",
        help="studio = `annotation-studio serve` (the supervisor, --web uvicorn processes on one "
        "port, --workers quality workers); else --web processes of that server on consecutive "
        "ports from --port (daphne, granian, hypercorn: pip install them into the venv first)",
    )
    parser.add_argument(
        "--flat", help="HISTORY:ANSWERS pairs: per-submit CPU in process instead of the load"
    )
    parser.add_argument(
        "--peers",
        default="",
        help="side by side: comma-separated peers (potato, label-studio) installed into "
        "throwaway virtualenvs and driven on ports --port+10, +20 after ours",
    )
    parser.add_argument(
        "--peers-dir",
        type=Path,
        help="where the peers' virtualenvs go (default: a new temporary directory); one "
        "installed there by an earlier run is reused",
    )
    parser.add_argument(
        "--study-per-row",
        action="store_true",
        help="each row on a new study of --items items (same annotators): every row starts "
        "from the same state, so rows differ by their client count alone, not by their place "
        "in the run (later rows of one study meet items with more answers)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    counts = [int(n) for n in args.clients.split(",")]
    paths = args.path.split(",")
    if args.server != "studio" and args.mode == "worker" and args.workers:
        parser.error("--mode worker with workers needs --server studio (quality_worker processes)")
    if args.server != "studio" and not Path(SERVERS[args.server][0]).is_file():
        # the studio serves with uvicorn; the others are for this comparison only
        parser.error(f"--server {args.server} is not installed: pip install {args.server}")

    tmp = Path(tempfile.mkdtemp(prefix="submit-throughput-"))
    setup_django(tmp, fast_passwords=True)
    from django.conf import settings

    if args.flat:
        rows = _flatness(args.flat)
        if args.json:
            args.json.write_text(json.dumps({"flat": rows}, indent=2))
        return

    db = settings.DATABASES["default"]
    engine = db["ENGINE"].rsplit(".", 1)[-1]
    warm, planned = _plan(
        paths=paths,
        counts=counts,
        n_items=args.items,
        n_annotators=args.annotators or max(counts),
        fresh=args.study_per_row,
    )
    ports = [args.port + i for i in range(args.web)]
    env = {**os.environ, "QUALITY_UPDATES": args.mode, "ALLOWED_HOSTS": "127.0.0.1"}
    if args.server == "studio":  # what a newcomer runs: the supervisor, its webs and workers
        ports = [args.port]
        env.update(PORT=str(args.port), WEB_CONCURRENCY=str(args.web))
        env["QUALITY_WORKERS"] = str(args.workers)
        commands = [[sys.executable, "-m", "annotate_site", "serve"]]
    else:
        commands = [[*SERVERS[args.server], *_bind(args.server, port)] for port in ports]
    log = (tmp / "server.log").open("w")
    servers = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        for command in commands
    ]
    mode = "worker processes" if args.server == "studio" else args.mode
    print(
        f"{engine}, {args.web} {args.server} web process(es), quality updates: {mode} "
        f"({args.workers} worker(s) in worker mode); load {os.getloadavg()[0]:.1f}; "
        f"{args.items} items, {len({id(c) for row in planned for c in row.clients})} "
        f"annotators, {len({row.study.pk for row in planned})} study(ies); "
        f"{os.cpu_count()} cores; {args.seconds:.0f} s per row"
    )
    header = (
        f"{'path':<5} {'clients':>7} {'answers/s':>9} {'POST p50/p95/p99 ms':>22} {'errors':>6}"
        f" {'server CPU ms/answer':>20} {'web':>5} {'client':>6} {'load':>5}"
    )
    print(header)
    rows = []
    acknowledged: dict[tuple[int, str], int] = defaultdict(int)
    try:
        for port in ports:
            _wait_for(port, timeout=120)
        for row_plan in warm:
            # warm-up: imports, template compilation, connections (acknowledged answers count)
            tally, _ = asyncio.run(_run(ports=ports, plan=row_plan, clients=len(ports), seconds=2))
            acknowledged[row_plan.question.pk, row_plan.path] += tally.acknowledged
        for row_plan in planned:
            path, n = row_plan.path, len(row_plan.clients)
            pids = _process_tree([server.pid for server in servers])
            workers = _quality_workers(pids)
            cpu_server, cpu_client = _cpu_seconds(pids), time.process_time()
            tally, elapsed = asyncio.run(
                _run(ports=ports, plan=row_plan, clients=n, seconds=args.seconds)
            )
            acknowledged[row_plan.question.pk, path] += tally.acknowledged
            per_answer = 1000 / max(1, tally.acknowledged)
            server_cpu = _cpu_since(cpu_server, pids)
            row = {
                "path": path,
                "clients": n,
                "answers_per_s": tally.acknowledged / elapsed,
                "post_ms_p50": _pct(tally.post_ms, 0.50),
                "post_ms_p95": _pct(tally.post_ms, 0.95),
                "post_ms_p99": _pct(tally.post_ms, 0.99),
                "next_ms_p50": _pct(tally.other_ms, 0.50),
                "answer_ms_p50": _pct(tally.answer_ms, 0.50),
                "answer_ms_p99": _pct(tally.answer_ms, 0.99),
                "errors": tally.errors,
                "ran_out": tally.ran_out,
                "server_cpu_ms_per_answer": per_answer * server_cpu,
                "web_cpu_ms_per_answer": per_answer
                * (server_cpu - _cpu_since(cpu_server, workers)),
                "client_cpu_ms_per_answer": per_answer * (time.process_time() - cpu_client),
                "load": os.getloadavg()[0],
            }
            rows.append(row)
            latency = "{post_ms_p50:.0f} / {post_ms_p95:.0f} / {post_ms_p99:.0f}".format(**row)
            print(
                f"{path:<5} {n:>7} {row['answers_per_s']:>9.1f} {latency:>22} "
                f"{row['errors']:>6} {row['server_cpu_ms_per_answer']:>20.1f} "
                f"{row['web_cpu_ms_per_answer']:>5.1f} "
                f"{row['client_cpu_ms_per_answer']:>6.1f} {row['load']:>5.1f}",
                flush=True,
            )
            warn_ran_out(row, path)
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
        log.close()
    stored_ok = _check_stored(acknowledged)
    peer_rows = []
    if args.peers:
        peer_rows = _peers_side_by_side(
            peers=args.peers.split(","), ours=rows, counts=counts, port=args.port + 10, args=args
        )
        stored_ok &= all(row.get("stored_ok", True) for row in peer_rows)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "engine": engine,
                    "web": args.web,
                    "mode": args.mode,
                    "rows": rows,
                    "peers": peer_rows,
                },
                indent=2,
            )
        )
    if not stored_ok:
        raise SystemExit(1)


def _check_stored(acknowledged: dict[tuple[int, str], int]) -> bool:
    """Whether every acknowledged answer is stored exactly once, question by question
    (``acknowledged``: (question id, path) -> answers; revisions by source: the API's paths
    share one)."""
    from django.db.models import Count

    from apps.annotations.models import Revision

    api, ui = Revision.Source.API, Revision.Source.UI
    sources = {"api": api, "answer": api, "page": ui}
    expected: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    paths: dict[str, set[str]] = defaultdict(set)
    for (question_id, path), answers in acknowledged.items():
        expected[sources[path]][question_id] += answers
        paths[sources[path]].add(path)
    stored_ok = True
    for source, want in sorted(expected.items()):
        stored = dict(
            Revision.objects.filter(annotation__question_id__in=want, source=source)
            .values("annotation__question_id")
            .annotate(n=Count("id"))
            .values_list("annotation__question_id", "n")
        )
        ok = all(stored.get(question_id, 0) == n for question_id, n in want.items())
        stored_ok &= ok
        print(
            f"{'+'.join(sorted(paths[source]))}: acknowledged {sum(want.values())}, stored "
            f"{sum(stored.values())} ({'ok' if ok else 'MISMATCH'})"
        )
    return stored_ok


def _peers_side_by_side(
    *,
    peers: list[str],
    ours: list[dict[str, Any]],
    counts: list[int],
    port: int,
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    """Install, start and drive each peer like ours (same items, labels, client counts and
    seconds), one at a time and alone on the machine, then print every system side by side:
    answers/s, whole-answer p50/p99 (every request of one answer), errors, server CPU per
    answer, the load, and our figures as ratios to each peer's."""
    from benchmarks.peers import PeerUnavailableError, peer_run, peer_start, stop

    root = args.peers_dir or Path(tempfile.mkdtemp(prefix="peers-"))
    root.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(peers):
        try:
            started = time.monotonic()
            peer = peer_start(name, root, port=port + 10 * i, items=args.items)
        except PeerUnavailableError as why:
            print(f"{name}: not run: {why}", flush=True)
            rows.append({"path": name, "unavailable": str(why)})
            continue
        print(f"{name}: installed and started in {time.monotonic() - started:.0f} s", flush=True)
        acknowledged = 0
        try:
            tally, _ = asyncio.run(peer_run(peer, clients=1, seconds=2))  # warm-up
            acknowledged += tally.acknowledged
            for n in counts:
                pids = peer.pids()
                cpu = _cpu_seconds(pids)
                tally, elapsed = asyncio.run(peer_run(peer, clients=n, seconds=args.seconds))
                acknowledged += tally.acknowledged
                rows.append(
                    {
                        "path": name,
                        "clients": n,
                        "answers_per_s": tally.acknowledged / elapsed,
                        "answer_ms_p50": _pct(tally.answer_ms, 0.50),
                        "answer_ms_p99": _pct(tally.answer_ms, 0.99),
                        "errors": tally.errors,
                        "ran_out": tally.ran_out,
                        "server_cpu_ms_per_answer": 1000
                        * _cpu_since(cpu, pids)
                        / max(1, tally.acknowledged),
                        "load": os.getloadavg()[0],
                    }
                )
                warn_ran_out(rows[-1], name)
            if name == "label-studio":
                stored = peer.stored()
        finally:
            stop(peer.server)
        if name != "label-studio":
            stored = peer.stored()  # Potato's files, complete once it has stopped
        ok = stored == acknowledged
        verdict = "ok" if ok else "MISMATCH"
        print(f"{name}: acknowledged {acknowledged}, stored {stored} ({verdict})")
        rows[-1]["stored_ok"] = ok
    _print_side_by_side(ours=ours, peers=rows, counts=counts)
    return rows


def _print_side_by_side(
    *, ours: list[dict[str, Any]], peers: list[dict[str, Any]], counts: list[int]
) -> None:
    """One table: every system per client count, with our answers/s and p99 as ratios to each
    peer's (answers/s: ours / theirs, higher is better; p99: theirs / ours, higher is better)."""
    measured = [row for row in peers if "clients" in row]
    names = sorted({row["path"] for row in measured}, key=[row["path"] for row in measured].index)
    head = f"{'system':<14} {'clients':>7} {'answers/s':>9} {'p50 ms':>7} {'p99 ms':>7}"
    head += f" {'errors':>6} {'CPU ms/ans':>10} {'load':>5}"
    head += "".join(f" {'vs ' + name:>22}" for name in names)
    print("\nSide by side (latency: every request of one answer)")
    print(head)
    for n in counts:
        for row in [r for r in [*ours, *measured] if r["clients"] == n]:
            system = row["path"] if row in measured else f"studio {row['path']}"
            line = (
                f"{system:<14} {n:>7} {row['answers_per_s']:>9.1f} {row['answer_ms_p50']:>7.1f} "
                f"{row['answer_ms_p99']:>7.1f} {row['errors']:>6} "
                f"{row['server_cpu_ms_per_answer']:>10.1f} {row['load']:>5.1f}"
            )
            for name in names:
                peer = next((r for r in measured if r["path"] == name and r["clients"] == n), None)
                if row in measured or peer is None:
                    line += f" {'':>22}"
                    continue
                rate = row["answers_per_s"] / max(peer["answers_per_s"], 1e-9)
                tail = peer["answer_ms_p99"] / max(row["answer_ms_p99"], 1e-9)
                line += f" {f'{rate:.2f}x rate, {tail:.2f}x p99':>22}"
            print(line)


if __name__ == "__main__":
    main()
