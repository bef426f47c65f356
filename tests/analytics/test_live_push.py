"""Dashboard pushes send only the fragments that changed, with a spoken summary of the change.

The consumer tests run on whichever channel layer the settings choose: the in-memory layer by
default, channels-redis when ``REDIS_URL`` is set (CI runs both).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from analytics import consumers, live
from analytics.consumers import _render_live
from analytics.dashboard import dashboard_context
from analytics.events import dashboard_notify
from analytics.live import (
    Fragment,
    LiveCounts,
    RenderedRows,
    SentFragments,
    announcement,
    live_fragments,
)
from analytics.models import Flag
from analytics.services import annotator_exclude, flag_dismiss
from annotate_site.routing import websocket_urlpatterns
from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from tests.factories import running_study

LABELS = ["negative", "neutral", "positive"]


def _card(rows: dict[str, str], frame: str = "card") -> Fragment:
    parts = tuple(Fragment(key, f'<tr id="{key}">{text}</tr>') for key, text in rows.items())
    html = f'<section id="c"><h2>{frame}</h2>{"".join(p.html for p in parts)}</section>'
    return Fragment("c", html, parts)


def test_first_push_sends_everything_then_only_what_changed():
    sent = SentFragments()
    other = Fragment("other", '<section id="other">same</section>')
    first = _card({"r1": "a", "r2": "b"})
    assert sent.changed([first, other]) == ([first.html, other.html], [])
    assert sent.changed([first, other]) == ([], [])  # nothing changed: nothing to send
    second = _card({"r1": "a", "r2": "B"})
    # the one row, not the card (in a message of its own)
    assert sent.changed([second, other]) == ([], ['<tr id="r2">B</tr>'])


def test_a_changed_frame_or_row_order_sends_the_whole_card():
    sent = SentFragments()
    sent.changed([_card({"r1": "a", "r2": "b"})])
    reordered = _card({"r2": "b", "r1": "a"})
    assert sent.changed([reordered]) == ([reordered.html], [])
    added = _card({"r2": "b", "r1": "a", "r3": "c"})
    assert sent.changed([added]) == ([added.html], [])
    retitled = _card({"r2": "b", "r1": "a", "r3": "c"}, frame="new title")
    assert sent.changed([retitled]) == ([retitled.html], [])
    # after a whole card, its rows count as sent
    assert sent.changed([_card({"r2": "b", "r1": "A", "r3": "c"}, frame="new title")]) == (
        [],
        ['<tr id="r1">A</tr>'],
    )


def test_announcement_counts_new_answers_and_new_open_flags():
    before = LiveCounts(answers=10, open_flags=frozenset({1}))
    assert announcement(before, LiveCounts(13, frozenset({1, 2}))) == "3 new answers; 1 new flag"
    assert announcement(before, LiveCounts(11, frozenset({1}))) == "1 new answer"
    assert announcement(before, LiveCounts(10, frozenset({1, 4, 5}))) == "2 new flags"
    assert announcement(before, LiveCounts(10, frozenset())) == ""  # a flag closed: no news


def _seed(study, annotators, *, leave: int) -> None:
    """Three careful annotators and a random one; the first leaves ``leave`` items open."""
    question = study.questions.get()
    rng = np.random.default_rng(3)
    truth = {pk: int(rng.integers(3)) for pk in study.items.values_list("pk", flat=True)}
    for k, user in enumerate(annotators):
        assignments = list(Assignment.objects.filter(annotator=user, round=1).order_by("pk"))
        for assignment in assignments[: len(assignments) - leave] if k == 0 else assignments:
            label = int(rng.integers(3)) if k == len(annotators) - 1 else truth[assignment.item_id]
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: LABELS[label]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=1500,
            )


@pytest.mark.django_db(transaction=True)
def test_pushes_send_the_changed_fragments_and_announce_them(settings, capsys):
    settings.QUALITY_MIN_EVIDENCE = 5
    # three annotators per item, as studies run: an answer moves the figures of few annotators
    study, annotators = running_study(n_items=60, n_annotators=8, overlap=3)
    _seed(study, annotators, leave=2)
    question = study.questions.get()
    first = annotators[0]
    open_items = list(
        Assignment.objects.filter(annotator=first, completed_at__isnull=True).order_by("pk")
    )
    # what every push sent before: the whole set of fragments (with or without the plots)
    every_fragment = render_to_string(
        "analytics/dashboard.html#live", _context(study, question, plots=True)
    )
    light = "".join(
        f.html for f in live_fragments(_context(study, question, plots=False), plots=False)
    )

    def submit(assignment: Assignment) -> None:
        annotations_submit(
            annotator=first,
            assignment=assignment,
            answers={question: "positive"},
            idempotency_key=uuid.uuid4(),
        )

    async def run() -> tuple[str, str, bool]:
        communicator = await dashboard_socket(study, question)
        await database_sync_to_async(submit)(open_items[0])
        initial = await _push(communicator)
        await database_sync_to_async(submit)(open_items[1])
        later = await _push(communicator)
        # an update that changes nothing shown sends nothing at all
        await database_sync_to_async(dashboard_notify)(study_id=study.pk, question_id=question.pk)
        quiet = await communicator.receive_nothing(timeout=1)
        await communicator.disconnect()
        return initial, later, quiet

    initial, later, quiet = async_to_sync(run)()
    size = {name: len(text.encode()) for name, text in [("all", every_fragment), ("light", light)]}
    print(
        f"\npush size: every fragment {size['all']:,} B, light fragments {size['light']:,} B; "
        f"first push after connecting {len(initial.encode()):,} B, "
        f"next push {len(later.encode()):,} B"
    )
    rows = re.findall(r'<tbody id="quality-row-(\d+)"', initial)
    sent_rows = re.findall(r'<tbody id="quality-row-(\d+)"', later)
    # one new answer each time; whether it also raised a flag depends on which items the
    # assignment gave the random annotator (ids differ with the tests run before)
    said = r'id="quality-announce" hx-swap-oob="innerHTML">1 new answer(; \d+ new flags?)?<'
    assert re.search(said, initial)
    assert re.search(said, later)
    assert 'id="quality-summary"' in later  # the counts changed
    assert str(first.pk) in sent_rows  # the annotator's own row changed ...
    assert 'id="quality-annotators"' not in later  # ... but not the table around it
    assert len(sent_rows) < len(rows) == len(annotators)  # nor the rows that did not change
    assert 'id="quality-heatmap"' not in later
    assert len(later.encode()) < len(light.encode()) < len(every_fragment.encode())
    assert quiet


async def dashboard_socket(study, question) -> WebsocketCommunicator:
    """The study's creator (a manager) connected to the question's dashboard socket."""
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns),
        f"/ws/studies/{study.pk}/quality/?question={question.pk}",
    )
    communicator.scope["user"] = study.created_by
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _push(communicator: WebsocketCommunicator) -> str:
    """One push: its messages up to the one that ends with the announcement."""
    messages = [await communicator.receive_from(timeout=10)]
    while 'id="quality-announce"' not in messages[-1]:
        messages.append(await communicator.receive_from(timeout=10))
    return "".join(messages)


def _context(study, question, *, plots: bool) -> dict:
    return dashboard_context(study=study, question=question, plots=plots)


@pytest.mark.django_db(transaction=True)
def test_a_light_push_leaves_the_pair_matrices_in_the_database():
    """Only the plots draw the snapshot's pair matrices (175 KB of JSON with 128 annotators,
    1.0 of a light push's 1.6 ms reading its snapshot); a light push no longer loads them,
    and rendering its fragments does not fetch them either."""
    study, annotators = running_study(n_items=6, n_annotators=3)
    _seed(study, annotators, leave=0)
    question = study.questions.get()
    light = _context(study, question, plots=False)
    assert "matrices" in light["snapshot"].get_deferred_fields()
    with CaptureQueriesContext(connection) as queries:
        live_fragments(light, plots=False)
    assert not [q for q in queries.captured_queries if "matrices" in q["sql"]]
    full = _context(study, question, plots=True)
    assert "matrices" not in full["snapshot"].get_deferred_fields()
    assert full["heatmap"]


@pytest.mark.django_db(transaction=True)
def test_the_live_render_gives_each_row_its_own_fragment():
    study, annotators = running_study(n_items=6, n_annotators=3)
    _seed(study, annotators, leave=0)
    question = study.questions.get()
    fragments, counts = _render_live(study.created_by, study.pk, question.pk, plots=True)
    table = next(f for f in fragments if f.key == "annotators")
    assert sorted(p.key for p in table.parts) == sorted(f"row-{a.pk}" for a in annotators)
    assert all(p.html in table.html for p in table.parts)  # rows render as in the card
    # every card of the page's own refresh, none left out
    context = _context(study, question, plots=True)
    whole = render_to_string("analytics/dashboard.html#live", context)
    assert "".join(f.html for f in live_fragments(context, plots=True)) == whole
    assert counts.answers == 18


def _count_row_renders(monkeypatch, part: str = "annotator-row") -> list[int]:
    """The annotator of every render of the row's ``part`` (``annotator-row``, or
    ``annotator-figures`` or ``annotator-actions`` inside it) from now on, in order."""
    rendered: list[int] = []
    real_render = live.render_to_string

    def counting_render(name: str, context: dict, *args, **kwargs) -> str:
        if name.endswith(f"#{part}"):
            rendered.append(context["row"].user_id)
        return real_render(name, context, *args, **kwargs)

    monkeypatch.setattr(live, "render_to_string", counting_render)
    return rendered


@pytest.mark.django_db(transaction=True)
def test_a_push_renders_each_annotator_row_once(monkeypatch):
    """Each row was rendered twice a push: inside the annotators card, then alone for the
    row-by-row comparison (65 % of a push's CPU is template rendering; with 64 annotators the
    rows are most of it). The card now takes the rows as rendered, and stays the same text."""
    study, annotators = running_study(n_items=6, n_annotators=3)
    _seed(study, annotators, leave=0)
    question = study.questions.get()
    context = _context(study, question, plots=False)
    whole = render_to_string("analytics/dashboard.html#annotators", context)
    rendered = _count_row_renders(monkeypatch)
    table = next(f for f in live_fragments(context, plots=False) if f.key == "annotators")
    assert sorted(rendered) == sorted(a.pk for a in annotators)
    assert table.html == whole
    assert all(part.html in table.html for part in table.parts)


@pytest.mark.django_db(transaction=True)
def test_a_stream_of_updates_keeps_a_dashboards_renders_to_their_share_of_the_time(
    settings, monkeypatch
):
    """A dashboard's render grows with its annotators (0.3 ms of CPU a row here; 52 ms with
    128), and under a crowd's stream of updates it ran back to back: one open dashboard of
    128 annotators took 0.35 of a core from the requests of its web process. After each
    render the sender now rests so that renders take at most ``QUALITY_PUSH_DUTY`` of a core;
    an update after a quiet spell still renders at once, and the last one is always pushed."""
    settings.QUALITY_PUSH_DUTY = 0.25
    study, _ = running_study(n_items=2, n_annotators=2)
    question = study.questions.get()
    render_s = 0.1
    renders: list[float] = []

    def slow_render(user, study_id, question_id, *, plots, rows):
        started = time.thread_time()
        while time.thread_time() - started < render_s:  # a render's CPU
            pass
        renders.append(time.monotonic())
        html = f'<section id="quality-summary">render {len(renders)}</section>'
        return [Fragment("summary", html)], LiveCounts(len(renders), frozenset())

    monkeypatch.setattr(consumers, "_render_live", slow_render)

    async def run() -> tuple[float, float, float]:
        communicator = await dashboard_socket(study, question)
        notify = database_sync_to_async(dashboard_notify)
        sent = time.monotonic()
        await notify(study_id=study.pk, question_id=question.pk)
        await communicator.receive_from(timeout=5)
        first = time.monotonic() - sent
        started = time.monotonic()
        while time.monotonic() - started < 3:  # an update every 20 ms for 3 s
            await notify(study_id=study.pk, question_id=question.pk)
            await asyncio.sleep(0.02)
        ended = time.monotonic()
        while not await communicator.receive_nothing(timeout=1):  # until a second's silence
            await communicator.receive_from()
        await communicator.disconnect()
        return first, started, ended

    first, started, ended = async_to_sync(run)()
    assert first < 0.6  # the first update after a quiet spell: rendered at once
    during = [t for t in renders if started <= t <= ended]
    # back to back, 3 s of renders of 0.1 s of CPU make about 28; at a quarter of a core, the
    # allowance's burst (a quarter of PUSH_WINDOW, 2 s: 0.5 s of CPU) plus 0.75 s: 12-13
    assert 4 <= len(during) <= 14, len(during)
    assert renders[-1] > ended  # the updates of the stream's end were pushed too


@pytest.mark.django_db(transaction=True)
def test_a_dashboard_under_its_share_never_rests_after_a_costly_render(settings, monkeypatch):
    """The sender rested after every render for the render's CPU x (1 / duty - 1), whatever
    the renders had taken before: with 128 annotators each plot push (every 5 s, 150 ms of CPU
    in process, 580 ms of wall time under load) held the next light push for its CPU time,
    though the renders took about a quarter of a core. The renders' share is now held over
    time (an allowance that accrues at ``QUALITY_PUSH_DUTY`` per second, a burst of
    ``PUSH_WINDOW`` of it): an update after a costly render within the share renders at once."""
    settings.QUALITY_PUSH_DUTY = 0.5
    study, _ = running_study(n_items=2, n_annotators=2)
    question = study.questions.get()
    renders: list[tuple[float, float]] = []  # (started, ended)

    def render(user, study_id, question_id, *, plots, rows):
        started = time.monotonic()
        cpu = 0.4 if not renders else 0.01  # a plot push, then light ones
        begun = time.thread_time()
        while time.thread_time() - begun < cpu:
            pass
        renders.append((started, time.monotonic()))
        html = f'<section id="quality-summary">render {len(renders)}</section>'
        return [Fragment("summary", html)], LiveCounts(len(renders), frozenset())

    monkeypatch.setattr(consumers, "_render_live", render)

    async def run() -> float:
        communicator = await dashboard_socket(study, question)
        notify = database_sync_to_async(dashboard_notify)
        await notify(study_id=study.pk, question_id=question.pk)
        await communicator.receive_from(timeout=5)
        sent = time.monotonic()  # the costly render has just been pushed
        await notify(study_id=study.pk, question_id=question.pk)
        await communicator.receive_from(timeout=5)
        waited = time.monotonic() - sent
        await communicator.disconnect()
        return waited

    waited = async_to_sync(run)()
    # resting after each render: 0.4 s; within the share: the light render's own 10 ms
    assert waited < 0.2, waited


@pytest.mark.django_db(transaction=True)
def test_a_push_renders_again_only_the_rows_whose_inputs_changed(settings, monkeypatch):
    """The rows were 73 % of a push's CPU (38 of 52 ms with 128 annotators), every row
    rendered on every push though most had not changed. A connection now keeps each row's
    inputs and HTML, and renders again only the rows whose inputs changed: an answer, an
    exclusion, a flag's review. What it pushes is what a fresh render gives."""
    settings.QUALITY_MIN_EVIDENCE = 5
    study, annotators = running_study(n_items=60, n_annotators=8, overlap=3)
    _seed(study, annotators, leave=2)
    question = study.questions.get()
    first, second = annotators[0], annotators[1]
    rendered, rows_rendered = RenderedRows(), _count_row_renders(monkeypatch)
    actions_rendered = _count_row_renders(monkeypatch, "annotator-actions")
    actions_now: list[int] = []

    def push() -> list[int]:
        """The rows a cached push rendered (and in ``actions_now``, the rows whose actions
        it rendered); its fragments must equal a fresh render's."""
        context = _context(study, question, plots=False)
        start, actions_start = len(rows_rendered), len(actions_rendered)
        cached = live_fragments(context, plots=False, rendered_rows=rendered)
        rendered_now = rows_rendered[start:]
        actions_now[:] = actions_rendered[actions_start:]
        fresh = live_fragments(_context(study, question, plots=False), plots=False)
        assert [(f.key, f.html) for f in cached] == [(f.key, f.html) for f in fresh]
        return rendered_now

    assert sorted(push()) == sorted(a.pk for a in annotators)
    assert push() == []  # nothing changed, nothing rendered
    open_item = Assignment.objects.filter(annotator=first, completed_at__isnull=True).first()
    annotations_submit(
        annotator=first,
        assignment=open_item,
        answers={question: "positive"},
        idempotency_key=uuid.uuid4(),
    )
    after_answer = push()
    assert first.pk in after_answer
    assert len(after_answer) < len(annotators)  # those not sharing the item: as they were
    # an answer moves figures; the flags and export actions (forms, links: half a row's CPU)
    # stay as they were, unless a flag opened or closed with it
    flagged = set(Flag.objects.filter(question=question).values_list("annotator", flat=True))
    assert set(actions_now) <= flagged & set(after_answer)
    annotator_exclude(study=study, annotator=second, by=study.created_by, reason="bot")
    assert push() == [second.pk]
    assert actions_now == [second.pk]  # its "Undo" form in place of "Exclude"
    open_flags = Flag.objects.filter(question=question, status=Flag.Status.OPEN, active=True)
    flag = open_flags.exclude(annotator=None).first()  # the random annotator's, mostly
    if flag is None:  # who shares which items follows the study's id (the tests before)
        flag = Flag.objects.create(
            study=study, question=question, annotator=annotators[2], indicator="x", reason="r"
        )
        assert push() == [annotators[2].pk]
    flag_dismiss(flag=flag, actor=study.created_by, note="checked")
    assert push() == [flag.annotator_id]
