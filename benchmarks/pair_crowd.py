"""A crowd on one pairwise question: 100,000 items, 200 annotators ranking batches, 100,000
judgements; the manager's pages and an annotator's next pair through the real views.

Seeding (fast, no request per judgement): a running study with one pairwise question of
``--items`` items and ``--batch-size`` (default settings otherwise: 10 calibration triplets,
audit rate 0.1, kappa floor 0.4), and ``--annotators`` annotators. Each one's batch is drawn
as the services draw it when they start (:func:`~apps.preferences.scheduling.batch_draw` on
the batches and judgements so far), then they answer ``--judgements`` pairs in memory through
the same :class:`~apps.preferences.scheduling.PairScheduler` the services replay (truthful by
hidden item levels, annotator k flipping a share 0.1 k / annotators of their answers), and
their session and judgements are bulk-created exactly as ``judgement_record`` stores them
(phase, contradicts, side, pruning stop, the scheduler's figures on the session), so the
annotators' requests replay them and the manager's pages read the stored figures.

Then, through the Django test client (whole middleware stack, sessions, templates):

* the pooled ranking (``question_scores``: count scores per annotator and the sparse pooled
  Bradley-Terry fit, weights from each annotator's stored scheduler figures), cold (no
  scheduler kept by the process, as after a restart) and warm;
* the manager's results page, ``GET .../pairs/<key>/scores/`` (first page, and with
  ``--full-api`` every page) and the score CSV of every item;
* annotator 0 (``--judgements`` in): ``--requests`` each of ``GET .../pairs/<key>/next/``, the
  comparison page's htmx pair area (``GET``) and an htmx answer (``POST``, which stores the
  judgement and renders the next pair), p50 / p95, with the Python memory each kept
  (tracemalloc growth per request) and the queries of one request; ``--profile`` prints the
  cProfile of 20 requests of each.

Figures (README, "A crowd at 100,000 items"): on SQLite, the 2-core machine at load 2-4, the
pooled ranking 1.1 s warm (1.4 s after a restart, the Bradley-Terry fit 0.31-0.33 s), the
results page 1.5 s warm and after a restart, a scores page 1.6 s, the score CSV 2.0 s (606
columns), next pair p50 6-7 ms and p95 7-9 ms for the annotator ranking the whole pool. Before
the stored scheduler figures and the CSV's sparse rows (issue 12): ranking 3.0-3.7 s after a
restart, results page 2.2 s warm and 3.6-3.9 s after a restart, the CSV 35-47 s. Before
the fit ran on one BLAS thread (load 7-9): ranking 9-10 s warm, results page 2.3-32 s, every
item through the scores API 69 s, the CSV 71 s. The score CSV is only traced for memory when
it takes under 5 s.

Uses a temporary SQLite database, or ``DATABASE_URL`` when set (a throw-away database: it is
migrated and written to)::

    .venv/bin/python -m benchmarks.pair_crowd [--items 100000] [--annotators 200]
        [--judgements 500] [--batch-size 1000] [--requests 60] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import pstats
import random
import tempfile
import time
import tracemalloc
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.django_setup import setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--annotators", type=int, default=200)
    parser.add_argument("--judgements", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--full-api", action="store_true", help="also read every scores page")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pair-crowd-") as tmp:
        setup_django(Path(tmp), defaults={"QUALITY_UPDATES": "inline"}, fast_passwords=True)
        run(args)


def _p(times: list[float] | np.ndarray) -> str:
    times = np.asarray(times)
    return f"p50 {np.percentile(times, 50):7.1f} ms  p95 {np.percentile(times, 95):7.1f} ms"


def _seed(args: argparse.Namespace):
    """The study, its question and annotators, with every annotator's batch and judgements."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from apps.items.models import Item
    from apps.preferences.models import Judgement, PairSession, clean_pairwise_settings
    from apps.preferences.scheduling import PairScheduler, batch_draw
    from apps.studies.models import Membership, Question, Study
    from apps.studies.services import question_create, study_set_status
    from tests.factories import StudyFactory

    study = StudyFactory()
    question = question_create(
        study=study,
        key="fluency",
        prompt="Which reads better?",
        kind=Question.Kind.PAIRWISE,
        settings={"batch_size": args.batch_size},
    )
    Item.objects.bulk_create(
        [
            Item(study=study, external_id=f"s{k}", text=f"Sentence {k}.", position=k)
            for k in range(args.items)
        ],
        batch_size=5000,
    )
    study_set_status(study=study, status=Study.Status.RUNNING)  # no annotator yet: no queue
    User = get_user_model()
    users = User.objects.bulk_create(
        [User(username=f"crowd{k:03d}", password="!") for k in range(args.annotators)]
    )
    if users[0].pk is None:  # backends that return no ids from bulk_create
        users = list(User.objects.filter(username__startswith="crowd").order_by("username"))
    Membership.objects.bulk_create(
        [Membership(study=study, user=user, role=Membership.Role.ANNOTATOR) for user in users]
    )
    settings = clean_pairwise_settings(question.settings)
    pool = list(Item.objects.filter(study=study).order_by("position").values_list("pk", flat=True))
    rng = np.random.default_rng(12)
    level = dict(zip(pool, rng.random(len(pool)).tolist(), strict=True))
    coverage: Counter[int] = Counter()
    comparisons: Counter[int] = Counter()
    if "uncertainty" in inspect.signature(batch_draw).parameters:
        # the draw before any pooled fit: 1 / sqrt(judgements an item is in)
        def evidence(counts: Counter[int]) -> dict:
            return {"uncertainty": {item: d**-0.5 for item, d in counts.items()}}
    else:

        def evidence(counts: Counter[int]) -> dict:
            return {"comparisons": counts}

    try:  # the scheduler's figures stored on the session (none before issue 12's fix)
        from apps.preferences.selectors import scheduler_figures as figures
    except ImportError:
        figures = None
    simulated = 0.0
    for k, user in enumerate(users):
        t0 = time.perf_counter()
        seed = int(rng.integers(2**31))
        if k == 0:  # a session started before the batch size was set: the whole pool
            batch, session_settings = pool, replace(settings, batch_size=0)
        else:
            batch, session_settings = (
                batch_draw(
                    pool,
                    size=settings.batch_size,
                    coverage=coverage,
                    rng=np.random.default_rng(seed),
                    **evidence(comparisons),
                ),
                settings,
            )
            coverage.update(batch)
        scheduler = PairScheduler(
            batch,
            strict=settings.strict,
            calibration_triplets=settings.calibration_triplets,
            audit_rate=settings.audit_rate,
            seed=seed,
            audit_rule=2,
            adaptive=True,
        )
        flips = random.Random(seed)
        flip_rate = 0.1 * k / len(users)
        rows, stopped_at = [], None
        for _ in range(args.judgements):
            pending = scheduler.next_pair()
            if pending is None:
                break
            a, b = pending if flips.random() < 0.5 else pending[::-1]  # the side shown as A
            outcome = 1 if level[a] > level[b] else -1
            if flips.random() < flip_rate:
                outcome = -outcome
            before = len(scheduler.contradictions)
            scheduler.record(a, b, outcome)
            rows.append(
                Judgement(
                    question=question,
                    annotator=user,
                    sequence=len(rows) + 1,
                    item_a_id=a,
                    item_b_id=b,
                    outcome=outcome,
                    phase=scheduler.judgements[-1].kind,
                    contradicts=len(scheduler.contradictions) > before,
                    side_a=Judgement.Side.A,
                    time_spent_ms=2000,
                    idempotency_key=uuid.uuid4(),
                )
            )
            comparisons.update((a, b))
            if scheduler.check_floor(settings.kappa_floor):
                stopped_at = len(rows)
        done = scheduler.next_pair() is None
        simulated += time.perf_counter() - t0
        with transaction.atomic():
            session = PairSession.objects.create(
                question=question,
                annotator=user,
                seed=seed,
                items=batch,
                settings=session_settings.as_dict(),
                pruning_stopped_at=stopped_at,
            )
            Judgement.objects.bulk_create(rows, batch_size=2000)
            if figures is not None:  # as judgement_record stores them with every answer
                last = Judgement.objects.filter(question=question, annotator=user).latest("id")
                session.figures = figures(
                    scheduler, kappa_floor=settings.kappa_floor, last_id=last.pk, done=done
                )._asdict()
                session.save(update_fields=["figures"])
    print(f"  {args.annotators} schedulers simulated in {simulated:.1f} s")
    return study, question, users


def _memory_growth(call, repeat: int) -> float:
    """Largest Python memory kept by one call, in MB, over ``repeat`` calls (tracemalloc)."""
    kept = []
    tracemalloc.start()
    try:
        for _ in range(repeat):
            before = tracemalloc.get_traced_memory()[0]
            call()
            kept.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    return max(kept) / 2**20


def _peak(call) -> float:
    """Peak Python memory of one call above the level before it, in MB."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return (tracemalloc.get_traced_memory()[1] - before) / 2**20
    finally:
        tracemalloc.stop()


def _profile(label: str, call, repeat: int = 20) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        call()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    print(f"--- cProfile, {repeat} x {label} ---")
    print(out.getvalue())


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return 1000 * (time.perf_counter() - t0)


def run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.urls import reverse
    from rest_framework.test import APIClient

    from analytics.metrics.preferences import bradley_terry
    from apps.preferences.models import Judgement
    from apps.preferences.selectors import question_scores, replays
    from apps.studies.models import Membership
    from apps.studies.services import membership_add
    from tests.factories import UserFactory

    start = time.perf_counter()
    print(
        f"{connection.vendor}: {args.items:,} items, {args.annotators} annotators x "
        f"{args.judgements} judgements, batches of {args.batch_size}"
    )
    study, question, users = _seed(args)
    n_judgements = Judgement.objects.filter(question=question).count()
    print(f"  seeded {n_judgements:,} judgements in {time.perf_counter() - start:.1f} s")

    # The pooled ranking, cold (every scheduler replayed) then warm.
    replays.clear()
    cold = _timed(lambda: question_scores(question=question))
    warm = [_timed(lambda: question_scores(question=question)) for _ in range(3)]
    scores = question_scores(question=question)
    print(
        f"pooled ranking (question_scores): cold {cold / 1000:.2f} s, "
        f"warm {min(warm) / 1000:.2f} s;"
        f" {sum(not np.isnan(r.log_strength) for r in scores.rows):,} items fitted,"
        f" alpha {scores.alpha}, se_exact {scores.se_exact}"
    )
    if args.profile:
        _profile("question_scores, warm", lambda: question_scores(question=question), 1)
    by_annotator: dict[int, list[tuple[int, int, int]]] = {}
    for a, b, outcome, annotator in Judgement.objects.filter(question=question).values_list(
        "item_a_id", "item_b_id", "outcome", "annotator_id"
    ):
        by_annotator.setdefault(annotator, []).append((a, b, outcome))
    order = [row.item.pk for row in scores.rows]
    fit_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            bradley_terry(by_annotator, items=order)
        except ValueError:
            bradley_terry(by_annotator, items=order, alpha=0.01)
        fit_times.append(time.perf_counter() - t0)
    print(f"  of which the sparse Bradley-Terry fit alone: {min(fit_times):.2f} s")

    manager = UserFactory()
    membership_add(study=study, user=manager, role=Membership.Role.MANAGER)
    client = APIClient()
    client.force_login(manager)
    results = reverse("preferences:results", args=[study.pk, question.key])
    csv_url = reverse("preferences:scores_csv", args=[study.pk, question.key])
    scores_url = f"/api/studies/{study.pk}/pairs/{question.key}/scores/"

    def page() -> None:
        assert client.get(results).status_code == 200

    replays.clear()
    cold = _timed(page)
    warm = min(_timed(page) for _ in range(3))
    print(f"manager's results page: cold {cold / 1000:.2f} s, warm {warm / 1000:.2f} s")

    def api_first() -> dict:
        response = client.get(scores_url)
        assert response.status_code == 200, response.status_code
        return response.json()

    body = api_first()
    shown = len(body["items"])
    api = _timed(api_first)
    if api < 5000:  # a full response of 100,000 items x 200 annotators takes minutes traced
        api = min(api, *(_timed(api_first) for _ in range(2)))
        peak = f", peak {_peak(api_first):.0f} MB"
    else:
        peak = ""
    print(
        f"GET .../scores/: {api / 1000:.2f} s, {shown:,} items in the response "
        f"(count {body.get('count', shown):,}){peak}"
    )
    if args.full_api and body.get("next"):
        url, rows, t0 = scores_url, 0, time.perf_counter()
        while url:
            body = client.get(url).json()
            rows += len(body["items"])
            url = body["next"]
        print(f"  every page: {rows:,} items in {time.perf_counter() - t0:.2f} s")

    def download() -> int:
        response = client.get(csv_url)
        return sum(chunk.count(b"\n") for chunk in response.streaming_content)

    t0 = time.perf_counter()
    lines = download()
    csv_seconds = time.perf_counter() - t0
    peak = f", peak {_peak(download):.0f} MB" if csv_seconds < 5 else ""  # traced: minutes
    print(f"score CSV: {lines - 1:,} item rows in {csv_seconds:.2f} s{peak}")

    for annotator, what in ((users[0], "the whole pool"), (users[1], "a batch")):
        _next_pair(args, client, study, question, annotator, what)


def _next_pair(args, client, study, question, annotator, what: str) -> None:
    """An annotator ``--judgements`` in: the next pair through the API and the htmx page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from apps.preferences.forms import JudgementForm
    from apps.preferences.selectors import replays

    client.force_login(annotator)
    next_url = f"/api/studies/{study.pk}/pairs/{question.key}/next/"
    compare = reverse("preferences:compare", args=[study.pk, question.key])
    htmx = {"HTTP_HX_REQUEST": "true"}

    def next_api() -> dict:
        response = client.get(next_url)
        assert response.status_code == 200, response.status_code
        return response.json()

    def pair_area() -> None:
        assert client.get(compare, **htmx).status_code == 200

    answer_rng = random.Random(3)

    def answer() -> None:
        pair = next_api()  # the ticket the page signs for its pair
        form = JudgementForm.for_pair((pair["item_a"]["id"], pair["item_b"]["id"]))
        response = client.post(
            compare,
            {
                "ticket": form.initial["ticket"],
                "outcome": answer_rng.choice([1, -1]),
                "idempotency_key": str(uuid.uuid4()),
            },
            **htmx,
        )
        assert response.status_code == 200, response.content[:500]

    replays.clear()
    first = _timed(next_api)
    print(
        f"annotator ranking {what} ({args.judgements} judgements in), "
        f"first request of the process: {first:.0f} ms"
    )
    for label, call in (
        ("GET .../next/ (API)", next_api),
        ("GET comparison pair area (htmx)", pair_area),
        ("POST answer, htmx (GET next + POST)", answer),
    ):
        times = [_timed(call) for _ in range(args.requests)]
        growth = _memory_growth(call, 10)
        with CaptureQueriesContext(connection) as queries:
            call()
        print(f"  {label:38s} {_p(times)}  kept {growth:.3f} MB  {len(queries)} queries")
        if args.profile:
            for query in queries.captured_queries:
                print(f"    {query['time']} s  {query['sql'][:160]}")
            _profile(label, call)


if __name__ == "__main__":
    main()
