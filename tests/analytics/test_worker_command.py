"""``manage.py quality_worker`` before its first pass."""

from __future__ import annotations

import gc
import signal
from typing import Any

import pytest
from django.core.management import call_command

from analytics import background
from analytics.management.commands import quality_worker


@pytest.fixture(autouse=True)
def _background_as_it_was(monkeypatch):
    """The command lowers this process's background thread and makes it wait for spare CPU:
    undone after each test, or the test process's later slow work would wait too."""
    for name in ("_niceness", "_spare_needed", "_longest_wait"):
        monkeypatch.setattr(background, name, getattr(background, name))


def test_the_worker_freezes_what_it_loaded_before_its_passes(monkeypatch, settings) -> None:
    """What Django and the apps loaded lives as long as the worker: its full collections
    scanned all of it (about 174,000 objects, 94 ms a collection in a web process). Frozen
    before the passes, the collector leaves it alone."""
    # the command sets these two for its process: the fixture restores them afterwards
    settings.QUALITY_UPDATES = settings.QUALITY_UPDATES
    settings.QUALITY_SLOW_WORK_APART = settings.QUALITY_SLOW_WORK_APART
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # pytest keeps its handlers
    frozen: list[int] = []

    def run(**kwargs: Any) -> int:
        frozen.append(gc.get_freeze_count())
        return 0

    monkeypatch.setattr(quality_worker, "quality_worker_run", run)
    gc.unfreeze()
    try:
        call_command("quality_worker", interval=0.01)
    finally:
        gc.unfreeze()
    assert len(frozen) == 1
    assert frozen[0] > 10_000


def test_the_worker_runs_its_slow_work_at_the_priority_the_settings_give(
    monkeypatch, settings
) -> None:
    """The bootstraps and retrainings take the CPU the web processes and the live updates
    leave (``QUALITY_SLOW_WORK_NICE``; tests/analytics/test_background.py checks the thread)."""
    settings.QUALITY_UPDATES = settings.QUALITY_UPDATES
    settings.QUALITY_SLOW_WORK_APART = settings.QUALITY_SLOW_WORK_APART
    settings.QUALITY_SLOW_WORK_NICE = 12
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(quality_worker, "quality_worker_run", lambda **kwargs: 0)
    settings.QUALITY_SLOW_WORK_SPARE, settings.QUALITY_SLOW_WORK_WAIT = 0.75, 42.0
    lowered: list[int] = []
    monkeypatch.setattr(background, "lower_priority", lowered.append)
    yielded: list[tuple[float, float]] = []
    monkeypatch.setattr(
        background, "yield_to_busy_machine", lambda spare, longest: yielded.append((spare, longest))
    )
    try:
        call_command("quality_worker", interval=0.01)
    finally:
        gc.unfreeze()
    assert lowered == [12]
    assert yielded == [(0.75, 42.0)]  # ... and waits for a machine with CPU to spare


def test_the_worker_gets_its_share_of_the_machine(monkeypatch, settings) -> None:
    """``QUALITY_WORKER_CPU_SHARE`` is a share of the machine's cores; the command hands the
    worker loop the cores it may use and the longest rest (test_worker_pacing.py)."""
    settings.QUALITY_UPDATES = settings.QUALITY_UPDATES
    settings.QUALITY_SLOW_WORK_APART = settings.QUALITY_SLOW_WORK_APART
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setattr(quality_worker.os, "cpu_count", lambda: 2)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(quality_worker, "quality_worker_run", lambda **kw: seen.update(kw))
    settings.QUALITY_WORKER_CPU_SHARE = 0.1
    settings.QUALITY_WORKER_LONGEST_REST = 1.5
    call_command("quality_worker")
    assert seen["share"] == pytest.approx(0.2)  # a tenth of two cores
    assert seen["longest"] == 1.5
