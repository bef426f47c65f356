"""End to end at 100,000 items: an annotator gets and answers pairs through the real views.

A running study with one pairwise question of ``--items`` items (bulk-created) and one
annotator. Through the Django test client (the full middleware stack, sessions, templates):

* the annotator's first visit to the comparison page (the session freezes 100,000 item ids);
* ``--judgements`` answers: ``GET /api/studies/<id>/pairs/<key>/next/`` then
  ``POST /api/judgements/`` each, truthful by hidden levels (p50 / p95 of both);
* then, warm, ``--requests`` comparison pages and ``next`` calls (p50 / p95), and the Python
  memory a comparison page allocates at its peak and keeps (tracemalloc);
* the manager's results page and the score CSV of all 100,000 items, once each (the pooled
  Bradley-Terry fit is sparse, the count scores cover each annotator's judged items).

Reference in the same run: one indexed query (``Item.objects.in_bulk`` of two ids); the
``/ref`` column divides the next-pair p50 by it. Uses a temporary SQLite database, or
``DATABASE_URL`` when set (a throw-away database: it is migrated and written to)::

    .venv/bin/python -m benchmarks.pair_views [--items 100000] [--judgements 500]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

import numpy as np

from benchmarks.django_setup import setup_django
from benchmarks.pair_scale import _study, _times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--judgements", type=int, default=500)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pair-views-") as tmp:
        setup_django(Path(tmp), defaults={"QUALITY_UPDATES": "inline"}, fast_passwords=True)
        run(args)


def _p(times: np.ndarray) -> str:
    return f"p50 {np.percentile(times, 50):7.1f} ms  p95 {np.percentile(times, 95):7.1f} ms"


def run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.urls import reverse
    from rest_framework.test import APIClient

    from apps.items.models import Item
    from apps.studies.models import Membership
    from apps.studies.services import membership_add
    from tests.factories import UserFactory

    start = time.perf_counter()
    question, annotator = _study(args.items)
    study = question.study
    print(
        f"{connection.vendor}: {args.items:,} items created in {time.perf_counter() - start:.1f} s"
    )
    client = APIClient()
    client.force_login(annotator)
    page = reverse("preferences:compare", args=[study.pk, question.key])
    next_url = f"/api/studies/{study.pk}/pairs/{question.key}/next/"

    def compare() -> None:
        assert client.get(page).status_code == 200

    def pending() -> dict:
        response = client.get(next_url)
        assert response.status_code == 200, response.status_code
        return response.json()

    first = _times(compare, 1)[0]
    print(f"first visit to the comparison page: {first:.0f} ms")
    rng = random.Random(12)
    level: dict[int, float] = {}
    gets, posts = [], []
    for _ in range(args.judgements):
        t0 = time.perf_counter()
        pair = pending()
        t1 = time.perf_counter()
        a, b = pair["item_a"]["id"], pair["item_b"]["id"]
        la, lb = (level.setdefault(item, rng.random()) for item in (a, b))
        response = client.post(
            "/api/judgements/",
            {
                "question": question.pk,
                "item_a": a,
                "item_b": b,
                "outcome": 1 if la > lb else -1,
                "idempotency_key": str(uuid.uuid4()),
            },
            format="json",
        )
        assert response.status_code == 201, response.content
        gets.append(1000 * (t1 - t0))
        posts.append(1000 * (time.perf_counter() - t1))
    print(f"{args.judgements} judgements through the API:")
    print(f"  GET next            {_p(np.array(gets))}")
    print(f"  POST judgement      {_p(np.array(posts))}")
    pair = pending()
    reference = _times(
        lambda: Item.objects.in_bulk([pair["item_a"]["id"], pair["item_b"]["id"]]), args.requests
    )
    warm_next = _times(pending, args.requests)
    warm_page = _times(compare, args.requests)
    ratio = np.percentile(warm_next, 50) / np.percentile(reference, 50)
    print(f"after {args.judgements} judgements, warm:")
    print(f"  GET next            {_p(warm_next)}  /ref {ratio:.1f}")
    print(f"  comparison page     {_p(warm_page)}")
    print(f"  reference query     {_p(reference)}")
    peaks, kept = [], []
    tracemalloc.start()
    for _ in range(10):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        compare()
        current, peak = tracemalloc.get_traced_memory()
        peaks.append((peak - before) / 2**20)
        kept.append((current - before) / 2**20)
    tracemalloc.stop()
    print(f"  comparison page memory: peak {max(peaks):.2f} MB, kept {max(kept):.3f} MB")
    manager = UserFactory()
    membership_add(study=study, user=manager, role=Membership.Role.MANAGER)
    client.force_login(manager)
    results = reverse("preferences:results", args=[study.pk, question.key])
    csv_url = reverse("preferences:scores_csv", args=[study.pk, question.key])
    seconds = _times(lambda: client.get(results), 1)[0] / 1000
    print(f"manager's results page ({args.items:,} items): {seconds:.2f} s")

    def download() -> int:
        response = client.get(csv_url)
        return sum(chunk.count(b"\n") for chunk in response.streaming_content)

    t0 = time.perf_counter()
    lines = download()
    print(f"score CSV: {lines - 1:,} item rows in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
