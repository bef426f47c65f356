"""Pairwise questions at scale: next-pair latency and memory per request, 5,000 to 100,000 items.

For each size n, a running study with one pairwise question (default settings: 10 calibration
triplets, audit rate 0.1, kappa floor 0.4) and one annotator who has answered ``--judgements``
pairs (500 by default) through the services, truthfully.
Then, per size:

* ``pair_next`` (the service behind the comparison page and ``GET .../next/``), warm: the
  process keeps the annotator's replayed scheduler (``apps.preferences.selectors.replays``), as
  for every request after the first one; p50 and p95 of ``--requests`` calls;
* the same cold: the kept schedulers are dropped before each call, as for the first request of
  a process, which replays the whole history (O(n) seeded shuffles plus the judgements);
* ``judgement_record`` while the history was built (warm);
* the same after pruning stops, in a session started before the adaptive scheduler (a second
  annotator's, stopped from its first judgement, 20 random answers): every pair never asked
  is asked from then on (an adaptive session ends instead);
* memory per warm request: the peak of Python allocations above the level before the call, and
  what stays allocated after it (tracemalloc, in a separate pass since tracing slows calls);
* reference: one indexed query (``Item.objects.in_bulk`` of two ids), the floor of any request
  on this machine; the ratios divide by it.

Uses a temporary SQLite database, or ``DATABASE_URL`` when set (give a throw-away database such
as ``postgres://postgres@127.0.0.1:5432/h8``: the benchmark migrates it and writes to it). Run
from the repository root::

    .venv/bin/python -m benchmarks.pair_scale [--sizes 5000 15000 100000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.django_setup import setup_django


def _times(call: Callable[[], Any], repeat: int, before: Callable[[], None] = lambda: None):
    """Wall times in milliseconds of ``repeat`` calls (``before`` runs untimed)."""
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        call()
        times.append(1000 * (time.perf_counter() - start))
    return np.array(times)


def _memory(call: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Largest peak above the starting level and largest growth kept, in MB, over the calls."""
    peaks, kept = [], []
    tracemalloc.start()
    try:
        for _ in range(repeat):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            call()
            current, peak = tracemalloc.get_traced_memory()
            peaks.append(peak - before)
            kept.append(current - before)
    finally:
        tracemalloc.stop()
    return max(peaks) / 2**20, max(kept) / 2**20


def _study(n: int):
    """A running study with one pairwise question, n items and one annotator."""
    from apps.items.models import Item
    from apps.studies.models import Membership, Question, Study
    from apps.studies.services import membership_add, question_create, study_set_status
    from tests.factories import StudyFactory, UserFactory

    study = StudyFactory()
    question = question_create(
        study=study, key="fluency", prompt="Which reads better?", kind=Question.Kind.PAIRWISE
    )
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"s{k}", text=f"Sentence {k}.", position=k)
            for k in range(n)
        ],
        batch_size=5000,
    )
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return question, annotator


def _answer(question, annotator, level: dict[int, float] | None, rng: random.Random) -> None:
    """Answer the pending pair: by the hidden levels, or at random without them."""
    from apps.preferences.services import judgement_record, pair_next

    a, b = pair_next(question=question, annotator=annotator).pending
    if level is None:
        outcome = rng.choice([1, 0, -1])
    else:
        outcome = (level[a] > level[b]) - (level[a] < level[b])
    judgement_record(
        question=question,
        annotator=annotator,
        item_a=a,
        item_b=b,
        outcome=outcome,
        idempotency_key=uuid.uuid4(),
    )


def run_size(n: int, *, judgements: int, requests: int, cold: int) -> dict[str, float]:
    """Build the history for n items, then time and measure next-pair requests."""
    from apps.items.models import Item
    from apps.preferences.models import PairSession
    from apps.preferences.selectors import replays
    from apps.preferences.services import pair_next

    question, annotator = _study(n)
    rng = random.Random(n)
    ids = list(Item.objects.filter(study=question.study).values_list("id", flat=True))
    level = {item: rng.random() for item in ids}
    replays.clear()
    first = _times(lambda: pair_next(question=question, annotator=annotator), 1)[0]
    record = _times(lambda: _answer(question, annotator, level, rng), judgements)
    session = PairSession.objects.get(question=question, annotator=annotator)
    assert session.pruning_stopped_at is None

    def next_pair() -> Any:
        return pair_next(question=question, annotator=annotator)

    pair = next_pair().pending
    row: dict[str, float] = {"n": n, "judgements": judgements, "first_ms": float(first)}
    warm = _times(next_pair, requests)
    cold_times = _times(next_pair, cold, before=replays.clear)
    reference = _times(lambda: Item.objects.in_bulk(pair), requests)
    peak, kept = _memory(next_pair, min(requests, 20))
    row |= {
        "warm_p50_ms": float(np.percentile(warm, 50)),
        "warm_p95_ms": float(np.percentile(warm, 95)),
        "cold_p50_ms": float(np.percentile(cold_times, 50)),
        "cold_p95_ms": float(np.percentile(cold_times, 95)),
        "record_p50_ms": float(np.percentile(record, 50)),
        "record_p95_ms": float(np.percentile(record, 95)),
        "reference_p50_ms": float(np.percentile(reference, 50)),
        "peak_mb_per_request": peak,
        "kept_mb_per_request": kept,
    }
    # Pruning stops. An adaptive session (new sessions) then ends; one started before the
    # adaptive scheduler asks every pair never asked, in the seeded order: measured on a
    # second annotator's session of that kind, stopped from its first judgement.
    from apps.studies.models import Membership
    from apps.studies.services import membership_add
    from tests.factories import UserFactory

    legacy = UserFactory()
    membership_add(study=question.study, user=legacy, role=Membership.Role.ANNOTATOR)
    legacy_session = pair_next(question=question, annotator=legacy).session
    PairSession.objects.filter(pk=legacy_session.pk).update(pruning_stopped_at=0, adaptive=False)
    replays.clear()

    def next_pair_legacy() -> Any:
        return pair_next(question=question, annotator=legacy)

    exhaustive_cold = _times(next_pair_legacy, 1)[0]
    exhaustive_record = _times(lambda: _answer(question, legacy, None, rng), 20)
    exhaustive = _times(next_pair_legacy, requests)
    exhaustive_peak, _ = _memory(next_pair_legacy, min(requests, 20))
    row |= {
        "stopped_cold_ms": float(exhaustive_cold),
        "stopped_p95_ms": float(np.percentile(exhaustive, 95)),
        "stopped_record_p95_ms": float(np.percentile(exhaustive_record, 95)),
        "stopped_peak_mb_per_request": exhaustive_peak,
    }
    return row


def main() -> None:
    """Run every size and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 15000, 100_000])
    parser.add_argument("--judgements", type=int, default=500)
    parser.add_argument("--requests", type=int, default=60, help="warm requests per size")
    parser.add_argument("--cold", type=int, default=5, help="cold requests per size")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pair-scale-") as tmp:
        setup_django(Path(tmp), defaults={"QUALITY_UPDATES": "inline"})
        from django.db import connection

        print(
            f"{connection.vendor}: next-pair request after {args.judgements} judgements"
            " (ms; MB of Python allocations per request)"
        )
        header = (
            f"{'n':>7} {'warm p50':>9} {'warm p95':>9} {'/ref':>6} {'cold p50':>9}"
            f" {'cold p95':>9} {'answer p95':>10} {'peak MB':>8} {'kept MB':>8}"
            f" {'stopped p95':>11} {'stopped MB':>10}"
        )
        print(header)
        rows = []
        for n in args.sizes:
            row = run_size(n, judgements=args.judgements, requests=args.requests, cold=args.cold)
            rows.append(row)
            print(
                f"{n:>7} {row['warm_p50_ms']:>9.1f} {row['warm_p95_ms']:>9.1f}"
                f" {row['warm_p50_ms'] / row['reference_p50_ms']:>6.1f}"
                f" {row['cold_p50_ms']:>9.1f} {row['cold_p95_ms']:>9.1f}"
                f" {row['record_p95_ms']:>10.1f} {row['peak_mb_per_request']:>8.2f}"
                f" {row['kept_mb_per_request']:>8.3f} {row['stopped_p95_ms']:>11.1f}"
                f" {row['stopped_peak_mb_per_request']:>10.2f}",
                flush=True,
            )
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
