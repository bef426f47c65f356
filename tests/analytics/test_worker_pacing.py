"""A quality worker leaves the CPU to serving as a crowd grows (issue 22).

A pass's cost grows with the question's annotators (their pair matrices, the snapshot), and
under load the worker ran its passes back to back: served on PostgreSQL + Redis (answer path,
a new study per row), it took 0.13 cores at 64 clients, 0.27 at 256 and 0.35 at 512, and the
rate fell from 451.7 to 413.5 and 350.5 answers/s. After a pass the worker now rests long
enough that its passes use at most ``QUALITY_WORKER_CPU_SHARE`` of the machine's cores, and
never longer than ``QUALITY_WORKER_LONGEST_REST``: the pushes come less often, the answers do
not wait.
"""

from __future__ import annotations

import threading
import time

import pytest

from analytics.worker import pass_rest, quality_worker_run


@pytest.mark.parametrize(
    ("cpu", "elapsed", "rest"),
    [
        (0.002, 0.003, 0.247),  # an idle pass: the interval
        (0.020, 0.030, 0.220),  # cheap: the interval still bounds it (0.1 / 0.25 = 0.08 s)
        (0.100, 0.120, 0.280),  # 0.1 s of CPU at 0.25 cores: a 0.4-s cycle
        (0.500, 0.600, 1.000),  # at most the longest rest
        (0.100, 0.500, 0.000),  # a pass that waited longer than its share asks: none
    ],
)
def test_the_rest_after_a_pass_keeps_the_worker_within_its_share(cpu, elapsed, rest):
    got = pass_rest(cpu=cpu, elapsed=elapsed, interval=0.25, share=0.25, longest=1.0)
    assert got == pytest.approx(rest)


def test_no_share_is_the_interval_alone():
    assert pass_rest(cpu=0.5, elapsed=0.1, interval=0.25, share=0, longest=1.0) == 0.15
    assert pass_rest(cpu=0.5, elapsed=0.3, interval=0.25, share=0, longest=1.0) == 0.0


@pytest.fixture(autouse=True)
def _no_database(monkeypatch):
    """The passes below only burn CPU: nothing to close between them."""
    monkeypatch.setattr("analytics.worker.close_old_connections", lambda: None)


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_busy_worker_uses_at_most_its_share_of_a_core(monkeypatch):
    """Passes of 30 ms of CPU with no interval ran back to back (a whole core); with a
    share of 0.25 cores each is followed by a rest of 90 ms."""
    monkeypatch.setattr("analytics.worker.quality_sweep", lambda **kw: _burn(0.03))
    started_wall, started_cpu = time.monotonic(), time.thread_time()
    quality_worker_run(interval=0, stop=threading.Event(), passes=4, share=0.25, longest=1.0)
    wall = time.monotonic() - started_wall
    cpu = time.thread_time() - started_cpu
    assert wall >= 4 * 0.03 / 0.25 * 0.95
    assert cpu / wall <= 0.25 * 1.1


def test_a_stop_ends_the_rest_at_once(monkeypatch):
    stop = threading.Event()
    monkeypatch.setattr("analytics.worker.quality_sweep", lambda **kw: (_burn(0.02), stop.set()))
    started = time.monotonic()
    assert quality_worker_run(interval=0, stop=stop, share=0.01, longest=30.0) == 1
    assert time.monotonic() - started < 1.0
