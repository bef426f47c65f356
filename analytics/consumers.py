"""Channel consumers of the analytics app.

:class:`DashboardConsumer` serves ``ws/studies/<id>/quality/?question=<id>`` to the study's
managers: on ``dashboard.update`` of its question it re-renders the dashboard's fragments (the
same template the page uses) and sends the HTML of those that changed since its last push
(:mod:`analytics.live`: cards, and the table's rows one by one), with a summary for the page's
``aria-live`` region ("2 new answers; 1 new flag"); htmx's ws extension swaps them by id.
Bursts coalesce: while a render is in flight further updates only mark the dashboard stale,
and the renders take at most ``QUALITY_PUSH_DUTY`` of a core over time (a render's CPU grows
with the annotators shown): the sender rests only when its :class:`RenderAllowance` is spent.
The plots (heatmap, map, histograms: thousands of SVG elements with many annotators) are
re-rendered at most every ``QUALITY_PLOT_INTERVAL`` seconds; the table, summary, items and
trends every time.

A channel layer that cannot be reached (Redis down) at connect or later closes the socket with
1013 *Try Again Later*, which the page's ws extension retries with back-off, instead of the
server's 500 at the handshake; the dashboard page itself still renders from the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from analytics.config import quality_config
from analytics.dashboard import dashboard_context, dashboard_questions
from analytics.events import study_group
from analytics.live import (
    Fragment,
    LiveCounts,
    RenderedRows,
    SentFragments,
    announcement,
    announcement_html,
    live_counts,
    live_fragments,
)
from analytics.selectors import is_study_manager
from apps.studies.models import Question, Study

logger = logging.getLogger(__name__)
#: Seconds of a dashboard's render share it may spend at once after a quiet spell (a plot push).
PUSH_WINDOW = 2.0
TRY_AGAIN_LATER = 1013  # RFC 6455 close code; htmx's ws extension reconnects on it
LAYER_OUTAGES = (RedisConnectionError, RedisTimeoutError, OSError)


def _live_question(study: Study, question_id: int | None) -> Question | None:
    """The dashboard's question: the one asked for, else the study's first."""
    questions = dashboard_questions(study)
    return next((q for q in questions if q.pk == question_id), None) or (
        questions[0] if questions else None
    )


def _render_live(
    user: Any,
    study_id: int,
    question_id: int | None,
    *,
    plots: bool,
    rows: RenderedRows | None = None,
) -> tuple[list[Fragment], LiveCounts] | None:
    """The dashboard's fragments for ``user`` (with the plots or only the light ones; the
    rows whose inputs did not change since ``rows`` taken from there) and its counts now, or
    ``None`` if they no longer manage the study."""
    if not is_study_manager(user=user, study_id=study_id):
        return None
    study = Study.objects.get(pk=study_id)
    question = _live_question(study, question_id)
    context = dashboard_context(study=study, question=question, plots=plots)
    counts = live_counts(question=question) if question else LiveCounts(0, frozenset())
    return live_fragments(context, plots=plots, rendered_rows=rows), counts


def _render_timed(
    user: Any, study_id: int, question_id: int | None, *, plots: bool, rows: RenderedRows
) -> tuple[tuple[list[Fragment], LiveCounts] | None, float]:
    """:func:`_render_live` and the CPU seconds it took on its thread."""
    started = time.thread_time()
    live = _render_live(user, study_id, question_id, plots=plots, rows=rows)
    return live, time.thread_time() - started


@dataclass
class RenderAllowance:
    """A connection's CPU for renders, held to ``duty`` of a core over time (a token bucket).

    The allowance accrues at ``duty`` CPU-seconds per second up to ``duty * PUSH_WINDOW``; a
    render spends its CPU; a sender in debt rests until the debt is paid. Resting after every
    render instead (its CPU x (1 / duty - 1)) made each update wait behind the last render's
    rest even while the renders took a quarter of a core: with 128 annotators, push p95
    851-900 ms against 811-851 without the rest. ``duty`` <= 0: never rest.
    """

    duty: float
    credit: float
    at: float

    @classmethod
    def full(cls, duty: float, now: float) -> RenderAllowance:
        return cls(duty, max(duty, 0.0) * PUSH_WINDOW, now)

    def rest_after(self, cpu: float, now: float) -> float:
        """Spend a render's ``cpu`` seconds at ``now``; return the seconds to rest."""
        if self.duty <= 0:
            return 0.0
        accrued = self.credit + self.duty * (now - self.at)
        self.credit, self.at = min(self.duty * PUSH_WINDOW, accrued) - cpu, now
        return max(0.0, -self.credit / self.duty)


def _counts_now(study_id: int, question_id: int | None) -> LiveCounts:
    question = _live_question(Study.objects.get(pk=study_id), question_id)
    return live_counts(question=question) if question else LiveCounts(0, frozenset())


class DashboardConsumer(AsyncWebsocketConsumer):
    """Pushes a study's quality dashboard to its managers (others are refused at connect)."""

    study_id: int
    question_id: int | None
    group: str
    _stale: bool = False
    _sending: asyncio.Future | None = None
    _plots_at: float = float("-inf")
    _sent: SentFragments
    _rows: RenderedRows
    _allowance: RenderAllowance
    _counts: LiveCounts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the socket; close it with 1013 when the channel layer is unreachable."""
        accepted = closed = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal accepted, closed
            accepted = accepted or message["type"] == "websocket.accept"
            closed = closed or message["type"] == "websocket.close"
            await send(message)

        try:
            await super().__call__(scope, receive, tracked_send)
        except LAYER_OUTAGES as exc:
            logger.warning("dashboard socket: channel layer unreachable (%r); 1013", exc)
            if closed:
                return
            if not accepted:  # a refused handshake would read as a failure, not a retry
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": TRY_AGAIN_LATER})

    async def connect(self) -> None:
        self.study_id = int(self.scope["url_route"]["kwargs"]["study_id"])
        query = parse_qs(self.scope.get("query_string", b"").decode())
        raw = (query.get("question") or [""])[0]
        self.question_id = int(raw) if raw.isdigit() else None
        user = self.scope.get("user")
        allowed = user is not None and await database_sync_to_async(is_study_manager)(
            user=user, study_id=self.study_id
        )
        if not allowed:
            await self.close(code=4403)
            return
        self._sent = SentFragments()
        self._rows = RenderedRows()
        self._allowance = RenderAllowance.full(
            quality_config().push_duty, asyncio.get_running_loop().time()
        )
        self._counts = await database_sync_to_async(_counts_now)(self.study_id, self.question_id)
        self.group = study_group(self.study_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self._sending is not None:
            self._sending.cancel()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dashboard_update(self, event: dict[str, Any]) -> None:
        """Note that this dashboard's question changed; (re)start the sender if idle.

        A burst of updates costs one render in flight plus at most one more: events arriving
        while a render runs only mark the dashboard stale.
        """
        if self.question_id is not None and event.get("question_id") != self.question_id:
            return
        self._stale = True
        if self._sending is None or self._sending.done():
            self._sending = asyncio.ensure_future(self._send_while_stale())

    async def _send_while_stale(self) -> None:
        loop = asyncio.get_running_loop()
        while self._stale:
            self._stale = False
            config = quality_config()
            plots = loop.time() - self._plots_at >= config.plot_interval
            # a read-only render: off the thread that serialises the site's sync views
            live, cpu = await database_sync_to_async(_render_timed, thread_sensitive=False)(
                self.scope["user"], self.study_id, self.question_id, plots=plots, rows=self._rows
            )
            if plots:
                self._plots_at = loop.time()
            if live is None:  # no longer a manager of the study
                await self.close(code=4403)
                return
            fragments, counts = live
            wholes, parts = self._sent.changed(fragments)
            said = announcement(self._counts, counts)
            self._counts = counts
            # the rows first; the summary for the aria-live region once everything is in
            for message in (parts, [*wholes, *([announcement_html(said)] if said else [])]):
                if message:
                    await self.send(text_data="".join(message))
            # A render's CPU grows with the annotators shown, and a crowd's updates never stop:
            # past the allowance, rest (updates meanwhile only mark the dashboard stale; the
            # next render takes them all in).
            rest = self._allowance.rest_after(cpu, loop.time())
            if rest:
                await asyncio.sleep(rest)
