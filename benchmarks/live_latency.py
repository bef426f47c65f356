"""Live quality at scale: rebuild time, incremental cost per annotation, submit-to-push latency.

A study with one ordered categorical question already holds ``--annotations`` round-1 answers
(500,000 by default: 50 annotators, 5 per item, bulk-inserted) when the benchmark

1. rebuilds the quality state from scratch (``quality_rebuild``, then the publish alone);
2. times ``quality_process_pending`` for single new annotations (stats update, then the publish:
   indicators + snapshot + flags + push), in process;
3. serves the site on 127.0.0.1: ``--mode worker`` (the default) as ``annotation-studio
   serve`` does (the supervisor, ``--web`` web processes on one port and a quality worker
   process; the pushes cross processes through Redis when ``REDIS_URL`` is set, else through
   the peer channel layer), or one daphne process with ``--mode thread`` (a background thread
   of the web process) or ``inline`` (in the request thread after commit); it opens the
   manager's dashboard websocket and lets ``--annotators`` simulated annotators submit over the
   REST API (``POST /api/annotations/``, token auth) with think times; the latency of a submit
   is the time until the first pushed dashboard whose row for that annotator shows the new item
   count (exact per submission, whatever the coalescing);
4. once the worker has taken in every answer, checks that the state it kept live equals one
   recomputed from the stored answers (the run fails otherwise).

Uses a temporary SQLite database (or ``DATABASE_URL`` when set: give a throw-away database, the
benchmark migrates it and writes to it). Bounded: ``--submits`` per annotator, ``--timeout``.
Run from the repository root::

    .venv/bin/python -m benchmarks.live_latency [--quick] [--in-process] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.django_setup import ROOT, setup_django

LABELS = ["negative", "neutral", "positive"]
ROW = re.compile(
    r'<th scope="row">([^<\s]+)[^<]*(?:<span[^>]*>[^<]*</span>)?</th>\s*'
    r'<td class="num[^"]*"[^>]*>(\d+)'
)


def _seed(*, n_annotators: int, n_annotations: int, per_item: int, submits: int, seed: int):
    """Bulk-insert the study; return (study, question, manager, annotators, open assignments)."""
    import numpy as np
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.annotations.models import Annotation, Assignment, Revision
    from apps.items.models import Item
    from apps.studies.models import Label
    from tests.factories import running_study

    rng = np.random.default_rng(seed)
    study, annotators = running_study(n_items=1, n_annotators=n_annotators)
    question = study.questions.get()
    labels = {label.key: label.pk for label in Label.objects.filter(question=question)}
    n_items = n_annotations // per_item
    n_new = max(1, n_annotators * submits // per_item + 1)
    now = timezone.now()
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"b-{i}", text=f"Sentence {i}.", position=i)
            for i in range(n_items + n_new)
        ],
        batch_size=5000,
    )
    item_ids = np.array(
        Item.objects.filter(study=study, external_id__startswith="b-")
        .order_by("position")
        .values_list("pk", flat=True)
    )
    # each item gets per_item distinct annotators; annotator quality varies (noise 5 % - 45 %)
    who = np.argsort(rng.random((n_items + n_new, n_annotators)), axis=1)[:, :per_item]
    truth = rng.integers(3, size=n_items)
    noise = np.linspace(0.05, 0.45, n_annotators)
    users = np.array([u.pk for u in annotators])
    a_idx = who[:n_items].ravel()
    items = np.repeat(item_ids[:n_items], per_item)
    codes = np.where(
        rng.random(a_idx.size) < noise[a_idx],
        rng.integers(3, size=a_idx.size),
        np.repeat(truth, per_item),
    )
    times = rng.integers(800, 6000, size=a_idx.size)
    start = (Annotation.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    rstart = (Revision.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    ann_table, rev_table = Annotation._meta.db_table, Revision._meta.db_table
    value_json = {key: json.dumps({"label": key}) for key in LABELS}
    is_sqlite = connection.vendor == "sqlite"
    stamp = now.replace(tzinfo=None).isoformat(sep=" ") if is_sqlite else now
    chunk = 50_000
    with transaction.atomic(), connection.cursor() as cursor:
        for lo in range(0, a_idx.size, chunk):
            hi = min(lo + chunk, a_idx.size)
            ids = range(start + lo, start + hi)
            rids = range(rstart + lo, rstart + hi)
            cursor.executemany(
                f"INSERT INTO {rev_table} (id, annotation_id, number, value, label_id, "
                "time_spent_ms, idempotency_key, source, created_at) "
                "VALUES (%s, %s, 1, %s, %s, %s, %s, 'import', %s)",
                [
                    (
                        rid,
                        aid,
                        value_json[LABELS[c]],
                        labels[LABELS[c]],
                        int(t),
                        uuid.uuid4().hex if is_sqlite else str(uuid.uuid4()),
                        stamp,
                    )
                    for rid, aid, c, t in zip(rids, ids, codes[lo:hi], times[lo:hi], strict=True)
                ],
            )
            cursor.executemany(
                f"INSERT INTO {ann_table} (id, question_id, item_id, annotator_id, round, "
                "current_revision_id, analysed_revision_id, analysis_pending, created_at) "
                "VALUES (%s, %s, %s, %s, 1, %s, %s, %s, %s)",
                [
                    (aid, question.pk, int(item), int(users[a]), rid, rid, False, stamp)
                    for aid, rid, item, a in zip(ids, rids, items[lo:hi], a_idx[lo:hi], strict=True)
                ],
            )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for model in (Annotation, Revision):
                table = model._meta.db_table
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT MAX(id) FROM {table}))"
                )
    Assignment.objects.bulk_create(
        [
            Assignment(
                study=study,
                item_id=int(item_ids[n_items + j]),
                annotator_id=int(users[a]),
                position=j,
            )
            for j in range(n_new)
            for a in who[n_items + j]
        ],
        batch_size=5000,
    )
    return study, question, study.created_by, annotators


def _time_rebuild(question_id: int) -> dict[str, float]:
    """The state from scratch (the publish held back), then the rebuild's publish alone."""
    from unittest import mock

    from analytics import pipeline
    from analytics.publishing import quality_publish

    with mock.patch.object(pipeline, "quality_publish"):
        started = time.perf_counter()
        pipeline.quality_rebuild(question_id=question_id)
        stats = time.perf_counter() - started
    started = time.perf_counter()
    quality_publish(question_id=question_id, rebuild=True)
    publish = time.perf_counter() - started
    return {"rebuild_s": stats + publish, "rebuild_stats_s": stats, "rebuild_publish_s": publish}


def _time_incremental(question, annotators, n: int) -> dict[str, float]:
    """Submit single annotations with processing deferred, then time each step alone."""
    from unittest import mock

    from analytics import pipeline
    from analytics.publishing import quality_publish
    from apps.annotations.models import Assignment
    from apps.annotations.services import annotations_submit

    open_ = list(Assignment.objects.filter(study=question.study_id, completed_at=None)[:n])
    process, publish = [], []
    for i, assignment in enumerate(open_):
        with mock.patch.object(pipeline, "_dispatch"):
            annotations_submit(
                annotator=assignment.annotator,
                assignment=assignment,
                answers={question: LABELS[i % 3]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=1500,
            )
        with mock.patch.object(pipeline, "quality_publish"):
            started = time.perf_counter()
            applied = pipeline.quality_process(question_id=question.pk)
            process.append(time.perf_counter() - started)
        assert applied == 1
        started = time.perf_counter()
        quality_publish(question_id=question.pk, item_ids=[assignment.item_id])
        publish.append(time.perf_counter() - started)
    return {
        "process_pending_ms_median": 1000 * median(process),
        "process_pending_ms_max": 1000 * max(process),
        "publish_ms_median": 1000 * median(publish),
        "publish_ms_max": 1000 * max(publish),
    }


def _live_equals_rebuild(question_id: int, *, wait: float = 60.0) -> bool:
    """Once the served worker has taken in every answer (``wait`` seconds at most): whether
    the state it kept live equals one recomputed from the stored answers."""
    from apps.annotations.models import Annotation
    from apps.categorical.quality import quality_stats

    pending = Annotation.objects.filter(question_id=question_id, analysis_pending=True)
    deadline = time.monotonic() + wait
    while pending.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    _, live = quality_stats(question_id=question_id)
    _, fresh = quality_stats(question_id=question_id, fresh=True)
    return not pending.exists() and live.equals(fresh)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _load(
    *,
    port: int,
    session: str,
    study_id: int,
    question_id: int,
    clients: list[dict[str, Any]],
    think: float,
    timeout: float,
    warm_up: float,
) -> dict[str, Any]:
    """Simulated annotators submit over HTTP while one dashboard websocket listens; the push
    latencies of the submits sent ``warm_up`` seconds or more after the start are also given
    apart (the steady state: a fresh worker imports its libraries and computes its first
    intervals in the first seconds)."""
    import websockets

    from benchmarks.submit_throughput import Connection

    pushes: list[tuple[float, dict[str, int]]] = []
    url = f"ws://127.0.0.1:{port}/ws/studies/{study_id}/quality/?question={question_id}"

    async def listen(ws) -> None:
        async for message in ws:
            pushes.append((time.perf_counter(), dict(ROW.findall(message))))
            for waiter in list(waiters):
                waiter.set()

    async def post(connection: Connection, body: dict[str, Any], token: str) -> int:
        """A submit on the annotator's own keep-alive connection, as a browser tab sends it
        (a thread per submit from asyncio's pool queued them six at a time in this client)."""
        status, _, _ = await asyncio.wait_for(
            connection.request(
                "POST",
                "/api/annotations/",
                {"Content-Type": "application/json", "Authorization": f"Token {token}"},
                json.dumps(body).encode(),
            ),
            30,
        )
        return status

    waiters: set[asyncio.Event] = set()
    latencies: list[tuple[float, float]] = []  # (sent, latency)
    http_times: list[float] = []
    errors = 0

    async def annotator(client: dict[str, Any], rng_seed: int) -> None:
        nonlocal errors
        import random

        rng = random.Random(rng_seed)
        done = client["done"]
        connection = Connection(port)
        for assignment in client["assignments"]:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * think)
            body = {
                "assignment": assignment,
                "answers": {"sentiment": rng.choice(LABELS)},
                "idempotency_key": str(uuid.uuid4()),
                "time_spent_ms": rng.randint(800, 5000),
            }
            sent = time.perf_counter()
            try:
                status = await post(connection, body, client["token"])
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
                # refused, reset, timed out or garbled: counted and reported
                errors += 1
                continue
            http_times.append(time.perf_counter() - sent)
            if status not in (200, 201):
                errors += 1
                continue
            done += 1
            event = asyncio.Event()
            waiters.add(event)
            deadline = sent + timeout
            try:
                while True:
                    seen = next(
                        (
                            t
                            for t, rows in pushes
                            if t >= sent and int(rows.get(client["name"], 0)) >= done
                        ),
                        None,
                    )
                    if seen is not None:
                        latencies.append((sent, seen - sent))
                        break
                    event.clear()
                    remaining = deadline - time.perf_counter()
                    if remaining <= 0:
                        errors += 1
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), remaining)
            finally:
                waiters.discard(event)
        connection.close()

    async with websockets.connect(
        url,
        additional_headers={"Cookie": f"sessionid={session}"},
        origin=f"http://127.0.0.1:{port}",
        max_size=None,
    ) as ws:
        listener = asyncio.create_task(listen(ws))
        # one untimed submit first: template compilation, imports and caches are not latency
        first = clients[0]
        await annotator({**first, "assignments": first["assignments"][:1]}, -1)
        clients[0] = {**first, "assignments": first["assignments"][1:], "done": first["done"] + 1}
        latencies.clear()
        http_times.clear()
        pushes.clear()
        started = time.perf_counter()
        await asyncio.gather(*(annotator(c, i) for i, c in enumerate(clients)))
        elapsed = time.perf_counter() - started
        listener.cancel()
    lat = sorted(latency for _, latency in latencies)
    steady = sorted(latency for sent, latency in latencies if sent - started >= warm_up)

    def pct(p: float, values: list[float] = lat) -> float:
        if not values:
            return float("nan")
        return 1000 * values[min(len(values) - 1, round(p * (len(values) - 1)))]

    return {
        "submits": len(http_times),
        "errors": errors,
        "pushes": len(pushes),
        "submits_per_s": len(http_times) / elapsed,
        "http_ms_median": 1000 * median(http_times) if http_times else float("nan"),
        "push_latency_ms_p50": pct(0.50),
        "push_latency_ms_p95": pct(0.95),
        "push_latency_ms_max": pct(1.0),
        "steady_submits": len(steady),
        "steady_push_latency_ms_p50": pct(0.50, steady),
        "steady_push_latency_ms_p95": pct(0.95, steady),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 annotations, 10 annotators")
    parser.add_argument("--annotations", type=int, default=500_000)
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--per-item", type=int, default=5)
    parser.add_argument("--submits", type=int, default=6, help="per simulated annotator")
    parser.add_argument("--think", type=float, default=3.0, help="mean seconds between submits")
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument(
        "--warm-up", type=float, default=10.0, help="seconds left out of the steady-state p95"
    )
    parser.add_argument(
        "--mode",
        choices=["thread", "inline", "worker"],
        default="worker",
        help="QUALITY_UPDATES; worker = `annotation-studio serve` (web processes + a quality "
        "worker), the others one daphne process",
    )
    parser.add_argument("--web", type=int, default=2, help="web processes (worker mode)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="stop after steps 1 and 2 (rebuild, one annotation's process and publish): the "
        "cost of a quality pass by study size, without serving",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.worker = args.mode == "worker"
    if args.quick:
        args.annotations, args.annotators, args.submits, args.think = 20_000, 10, 4, 0.5

    tmp = Path(tempfile.mkdtemp(prefix="live-latency-"))
    setup_django(tmp, defaults={"QUALITY_SNAPSHOT_INTERVAL": "10"}, fast_passwords=True)
    from django.conf import settings
    from django.test import Client
    from knox.models import AuthToken

    from apps.annotations.models import Assignment

    db = settings.DATABASES["default"]
    print(f"database: {db['ENGINE'].rsplit('.', 1)[-1]} {db['NAME']}")
    started = time.perf_counter()
    study, question, manager, annotators = _seed(
        n_annotators=args.annotators,
        n_annotations=args.annotations,
        per_item=args.per_item,
        submits=args.submits + 5,
        seed=1,
    )
    print(f"seeded {args.annotations:,} annotations in {time.perf_counter() - started:.1f} s")
    from django.db import connection

    # after a bulk load the planner needs fresh statistics (SQLite: ANALYZE; PostgreSQL's
    # autovacuum would run it soon anyway): without them the pipeline's per-item query
    # scans the whole question (~150 ms at 500k instead of < 1 ms)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    results: dict[str, Any] = {
        "annotations": args.annotations,
        "annotators": args.annotators,
        "mode": args.mode,
    }

    results.update(_time_rebuild(question.pk))
    print(
        f"rebuild: {results['rebuild_s']:.2f} s (stats {results['rebuild_stats_s']:.2f} s, "
        f"publish with Dawid-Skene and every item's AAD-RMSE {results['rebuild_publish_s']:.2f} s)"
        " - goal < 10 s"
    )
    results.update(_time_incremental(question, annotators, n=20))
    print(
        "incremental, one annotation: process_pending median "
        f"{results['process_pending_ms_median']:.1f} ms "
        f"(max {results['process_pending_ms_max']:.1f})"
        f" - goal <= 20 ms; publish median {results['publish_ms_median']:.1f} ms "
        f"(max {results['publish_ms_max']:.1f})"
    )
    if args.in_process:
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return

    client = Client()
    client.force_login(manager)
    session = client.cookies["sessionid"].value
    clients = []
    for user in annotators:
        open_ = list(
            Assignment.objects.filter(annotator=user, completed_at=None)
            .order_by("position")
            .values_list("pk", flat=True)[: args.submits]
        )
        done = question.annotations.filter(
            annotator=user, round=1, current_revision__value__isnull=False
        ).count()
        clients.append(
            {
                "name": user.username,
                "token": AuthToken.objects.create(user=user)[1],
                "assignments": open_,
                "done": done,
            }
        )
    port = _free_port()
    mode = args.mode
    env = {**os.environ, "QUALITY_UPDATES": mode, "ALLOWED_HOSTS": "127.0.0.1"}
    log = (tmp / "server.log").open("w")
    daphne = str(Path(sys.executable).parent / "daphne")
    commands = [[daphne, "-b", "127.0.0.1", "-p", str(port), "annotate_site.asgi:application"]]
    if args.worker:
        env.update(PORT=str(port), WEB_CONCURRENCY=str(args.web), QUALITY_WORKERS="1")
        commands = [[sys.executable, "-m", "annotate_site", "serve"]]
    servers = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        for command in commands
    ]
    try:
        for _ in range(600):  # serve migrates and collects the static files first
            try:  # a page, not a connection: serve's port listens before its processes serve
                urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        results.update(
            asyncio.run(
                _load(
                    port=port,
                    session=session,
                    study_id=study.pk,
                    question_id=question.pk,
                    clients=clients,
                    think=args.think,
                    timeout=args.timeout,
                    warm_up=args.warm_up,
                )
            )
        )
        results["live_equals_rebuild"] = _live_equals_rebuild(question.pk)
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
        log.close()
    print(
        f"end to end over HTTP + websocket ({mode} processing): {results['submits']} submits "
        f"({results['submits_per_s']:.1f}/s), {results['errors']} errors, "
        f"{results['pushes']} pushes; HTTP median {results['http_ms_median']:.0f} ms; "
        f"submit -> pushed update p50 {results['push_latency_ms_p50']:.0f} ms, "
        f"p95 {results['push_latency_ms_p95']:.0f} ms (max {results['push_latency_ms_max']:.0f})"
        " - goal p95 <= 1000 ms"
    )
    print(
        f"  after the first {args.warm_up:g} s ({results['steady_submits']} submits): "
        f"p50 {results['steady_push_latency_ms_p50']:.0f} ms, "
        f"p95 {results['steady_push_latency_ms_p95']:.0f} ms"
    )
    print(
        "after the load, the live state equals a rebuild from the stored answers: "
        + ("yes" if results["live_equals_rebuild"] else "NO")
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if not results["live_equals_rebuild"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
