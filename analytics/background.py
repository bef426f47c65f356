"""The in-process quality worker of a single web process (``QUALITY_UPDATES=thread``).

For a process that serves alone (``uvicorn annotate_site.asgi:application`` alone,
``manage.py runserver``, an embedding): the commit only
records the question id and wakes a daemon thread, which takes every question waiting at that
moment and brings each up to date, so a burst of submissions costs one pass, not one per
submission. ``serve`` and ``prod`` run the ``worker`` mode instead: the work goes to quality
worker processes (:mod:`analytics.worker`) and never takes the web processes' CPU.

A short-lived process (a management command such as ``load_demo``) waits at exit until the
thread has finished what was handed to it, so its answers reach the dashboard at once.

A thread-mode process (through ``annotate_site.asgi``) also runs a sweeper thread: at start and
then every ``QUALITY_SWEEP_INTERVAL`` seconds it dispatches the questions whose answers still
wait for analysis (a process killed mid-batch), so nothing stays pending for longer than one
interval.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

# What waits: (queue, id) -> the callable that processes it. The quality updates use the
# queue "quality"; other off-request work (analytics.pipeline.job_schedule) its job's name.
_waiting: dict[tuple[str, int], Callable[[int], object]] = {}
# What was enqueued with ``once`` and has not finished running yet.
_unfinished: set[tuple[str, int]] = set()
_busy = threading.Event()
_wake = threading.Condition()
_thread: threading.Thread | None = None
_sweeper: threading.Thread | None = None
# The nice value the thread takes when it starts (:func:`lower_priority`).
_niceness = 0
# Cores the machine must leave idle before a batch starts, and the longest wait for them
# (:func:`yield_to_busy_machine`; 0: no wait).
_spare_needed = 0.0
_longest_wait = 0.0


def lower_priority(niceness: int) -> None:
    """Run this process's background thread at the CPU priority ``niceness`` (Linux nice,
    0-19), from its next start; the process's other threads keep theirs.

    The quality worker lowers its slow-work thread so (``QUALITY_SLOW_WORK_NICE``): a
    bootstrap took a core for seconds while 64 annotators waited on the web processes
    (issue 22). Linux schedules each thread on its own, so only that thread yields; elsewhere
    (where a thread has no priority of its own) nothing changes.
    """
    global _niceness
    _niceness = max(0, min(19, niceness))


def yield_to_busy_machine(spare: float, *, longest: float) -> None:
    """Start each batch of this process's background thread once the machine has left
    ``spare`` cores idle over a second (:func:`spare_cores`), or after ``longest`` seconds of
    waiting for that; ``spare`` of 0 (or a system without ``/proc/stat``): no wait.

    The quality worker's thread runs only slow work (``QUALITY_SLOW_WORK_SPARE``,
    ``QUALITY_SLOW_WORK_WAIT``). Its low priority alone did not keep it off a saturated
    machine: at 64 clients on PostgreSQL, with 2-6 % of the two cores idle without it, the
    bootstraps at nice 19 took 0.27 cores and the answers' rate fell by about a tenth (issue
    22): the web processes' threads wait on the database and the GIL between bursts, and
    the thread filled those gaps at their cost. A batch once started runs to its end.
    """
    global _spare_needed, _longest_wait
    _spare_needed, _longest_wait = max(0.0, spare), max(0.0, longest)


def spare_cores(seconds: float = 1.0) -> float | None:
    """Cores the machine leaves idle over the next ``seconds``: idle and I/O-wait time of
    every CPU from Linux's ``/proc/stat``, per second; ``None`` where that cannot be read."""

    def idle_ticks() -> int | None:
        try:
            with open("/proc/stat") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        return int(fields[4]) + int(fields[5])  # "cpu user nice system idle iowait ..."

    before, started = idle_ticks(), time.monotonic()
    if before is None:
        return None
    time.sleep(seconds)
    after, elapsed = idle_ticks(), time.monotonic() - started
    if after is None or elapsed <= 0:
        return None
    return (after - before) / os.sysconf("SC_CLK_TCK") / elapsed


def _wait_for_spare_cpu() -> None:
    """Return once the machine has ``_spare_needed`` cores idle, or ``_longest_wait`` has
    passed (:func:`yield_to_busy_machine`)."""
    if _spare_needed <= 0:
        return
    deadline = time.monotonic() + _longest_wait
    while time.monotonic() < deadline:
        spare = spare_cores()
        if spare is None or spare >= _spare_needed:
            return


def enqueue(
    key: int,
    process: Callable[[int], object],
    *,
    queue: str = "quality",
    drain: bool = True,
    once: bool = False,
) -> None:
    """Note that ``key`` (a question id, or the id a job names) has pending work in ``queue``;
    ``process(key)`` will be called for it soon, once however often it was enqueued meanwhile.

    ``once``: an enqueue while ``key`` waits *or runs* is dropped, for slow work that reads
    everything afresh and that its callers find due until it has finished (the intervals'
    bootstrap, the forecast's retraining: asked again by every pass while it ran, it ran twice
    back to back). Without it (the quality updates) an enqueue while it runs runs it again:
    answers arrived meanwhile. ``drain``: the process waits at exit for what was handed over
    (not for work a later sweep redoes anyway, such as the quality worker's intervals)."""
    global _thread
    with _wake:
        if once:
            if (queue, key) in _unfinished:
                return
            _unfinished.add((queue, key))
        _waiting[(queue, key)] = process
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="quality-updates", daemon=True)
            _thread.start()
            if drain:
                _at_exit(lambda: idle(timeout=120))
        _wake.notify()


def _at_exit(callback: Callable[[], object]) -> None:
    """Run ``callback`` when the process ends, before thread pools refuse new work.

    ``threading._register_atexit`` (what ``concurrent.futures`` itself uses) runs its callbacks
    before that shutdown, so the drained updates can still push to the dashboard through
    ``async_to_sync``; plain ``atexit`` runs too late for that and is only the fallback.
    """
    register = getattr(threading, "_register_atexit", None)
    (register or atexit.register)(callback)


def idle(timeout: float = 10.0) -> bool:
    """Wait until nothing is waiting or being processed (tests); ``False`` on time-out."""
    with _wake:
        return _wake.wait_for(lambda: not _waiting and not _busy.is_set(), timeout=timeout)


def _serve() -> None:
    if _niceness and sys.platform == "linux":
        # raising the nice value needs no privilege; a thread id is a task id on Linux
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _niceness)
    while True:
        with _wake:
            _wake.wait_for(lambda: bool(_waiting))
            batch = sorted(_waiting.items(), key=lambda entry: entry[0])
            _waiting.clear()
            _busy.set()
        try:
            _wait_for_spare_cpu()
            for (queue, key), process in batch:
                try:  # a connection that cannot be checked fails this job, not the thread
                    close_old_connections()
                    process(key)
                except Exception:  # one failing question must not stop the others
                    logger.exception("background %s of %s failed", queue, key)
                finally:
                    with _wake:
                        _unfinished.discard((queue, key))
        finally:
            connection.close()
            with _wake:
                _busy.clear()
                _wake.notify_all()


def start_sweeper(sweep: Callable[[], object], *, interval: float) -> bool:
    """Run ``sweep`` now and then every ``interval`` seconds on a daemon thread (once per
    process; an interval <= 0 starts nothing); ``True`` if it started."""
    global _sweeper
    with _wake:
        if interval <= 0 or (_sweeper is not None and _sweeper.is_alive()):
            return False
        _sweeper = threading.Thread(
            target=_sweep_every, args=(sweep, interval), name="quality-sweep", daemon=True
        )
        _sweeper.start()
        return True


def _sweep_every(sweep: Callable[[], object], interval: float) -> None:
    while True:
        try:
            sweep()
        except Exception as exc:  # the database may be away: try again at the next tick
            logger.warning("quality sweep failed (%r); next try in %s s", exc, interval)
        finally:
            connection.close()
        time.sleep(interval)
