"""``manage.py quality_worker``: keep the quality states current (:mod:`analytics.worker`).

Started by ``annotation-studio serve`` and ``prod`` beside the web processes; SIGTERM or
Ctrl-C ends it after the pass in progress."""

from __future__ import annotations

import gc
import os
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from analytics import background
from analytics.worker import quality_worker_run


class Command(BaseCommand):
    help = "Process the answers waiting for quality analysis, every QUALITY_WORKER_INTERVAL s."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=float(settings.QUALITY_WORKER_INTERVAL),
            help="seconds between passes (default: QUALITY_WORKER_INTERVAL)",
        )

    def handle(self, *args: Any, interval: float, **options: Any) -> None:
        settings.QUALITY_UPDATES = "inline"  # this process is where the updates run
        settings.QUALITY_SLOW_WORK_APART = True  # bootstraps, forecasts beside the passes
        background.lower_priority(settings.QUALITY_SLOW_WORK_NICE)  # ... on the CPU left over
        background.yield_to_busy_machine(  # ... once the machine has some to spare
            settings.QUALITY_SLOW_WORK_SPARE, longest=settings.QUALITY_SLOW_WORK_WAIT
        )
        # what Django and the apps loaded lives as long as the process: the collector's full
        # passes skip it (annotate_site.webserver.preload says why)
        gc.freeze()
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"Quality worker: a pass every {interval} s", ending="\n")
        self.stdout.flush()
        quality_worker_run(
            interval=interval,
            stop=stop,
            hook_interval=settings.QUALITY_WORKER_HOOK_INTERVAL,
            share=settings.QUALITY_WORKER_CPU_SHARE * (os.cpu_count() or 1),
            longest=settings.QUALITY_WORKER_LONGEST_REST,
        )
