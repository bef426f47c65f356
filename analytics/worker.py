"""The quality worker: a process that keeps every question's quality state current.

``annotation-studio serve`` and ``prod`` start ``QUALITY_WORKERS`` of them beside the web
processes (``manage.py quality_worker``), so the statistics never take the web processes' CPU
or GIL. A web process in ``worker`` mode sends nothing after a commit: the submit transaction
already marked the answer as pending (``Annotation.analysis_pending``, the pairwise sequence),
and that outbox is the queue. Every ``QUALITY_WORKER_INTERVAL`` seconds (0.25) a pass runs
:func:`analytics.pipeline.quality_sweep` with the process in ``inline`` mode: one indexed query
finds the questions with answers waiting, each is processed once with all its pending answers
(a burst of 50 answers to a question is one update), published, and the dashboards are told
through the channel layer. A pass that takes longer than the interval is followed at once by
the next; an idle pass costs one query per kind that counts its own backlog. The apps' catch-up
hooks (queue orders asked for, model runs and endpoints waiting, forecasts and intervals due,
snapshots behind their state: 2.9 ms of an idle pass's 3.2) run every
``QUALITY_WORKER_HOOK_INTERVAL`` seconds (2) instead of on every pass.

A pass costs more as a question's annotators grow (its pair matrices, the snapshot), and under
load passes ran back to back: at 512 annotators the worker took 0.35 cores of the two serving
the crowd. After a pass the worker rests so that its passes use at most ``share`` cores
(``QUALITY_WORKER_CPU_SHARE`` of the machine's), and at most ``longest`` seconds
(``QUALITY_WORKER_LONGEST_REST``): a crowd's pushes come less often, its answers never wait
(:func:`pass_rest`).

The slow work after an update (interval bootstraps, the disagreement forecast's retraining)
runs on the process's background thread (:mod:`analytics.background`;
``QUALITY_SLOW_WORK_APART``), never in a pass.

Nothing is lost: a worker killed mid-batch rolls back and the answers stay pending; a worker
that cannot reach the database logs it and tries again on the next pass. Several workers are
safe (each question's state row is locked for its batch) but only help with many questions.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections, connection

from analytics.pipeline import quality_sweep

logger = logging.getLogger(__name__)


def pass_rest(
    *, cpu: float, elapsed: float, interval: float, share: float, longest: float
) -> float:
    """Seconds to rest after a pass that used ``cpu`` seconds of CPU in ``elapsed`` seconds.

    The next pass starts ``interval`` seconds after this one started, or later if needed for
    the passes to average at most ``share`` cores (a cycle of ``cpu / share`` seconds), but
    never more than ``longest`` seconds after this one ended; ``share`` 0 leaves the interval
    alone.
    """
    cycle = max(interval, cpu / share) if share > 0 else interval
    return max(0.0, min(cycle - elapsed, longest))


def quality_worker_run(
    *,
    interval: float,
    stop: threading.Event,
    passes: int = 0,
    hook_interval: float = 0.0,
    share: float = 0.0,
    longest: float = 1.0,
) -> int:
    """Run sweeps every ``interval`` seconds until ``stop`` is set (or ``passes`` have run, if
    not 0); returns how many passes ran. The apps' catch-up hooks run on the first pass and
    then on the first pass at least ``hook_interval`` seconds after their last run. With
    ``share``, a pass is followed by a rest that keeps the passes within ``share`` cores,
    ``longest`` seconds at most (:func:`pass_rest`). The process must be in ``inline`` mode
    (the command sets it), so a pass processes the questions it finds in this thread."""
    done = 0
    hooks_at = -float("inf")
    while not stop.is_set() and (not passes or done < passes):
        started, cpu = time.monotonic(), time.thread_time()
        hooks = started - hooks_at >= hook_interval
        hooks_at = started if hooks else hooks_at
        close_old_connections()
        try:
            quality_sweep(hooks=hooks)
        except Exception as exc:  # the database away: the answers wait for the next pass
            logger.warning("quality pass failed (%r); next try in %s s", exc, interval)
            connection.close()
        done += 1
        stop.wait(
            pass_rest(
                cpu=time.thread_time() - cpu,
                elapsed=time.monotonic() - started,
                interval=interval,
                share=share,
                longest=longest,
            )
        )
    return done
