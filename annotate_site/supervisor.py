"""A process supervisor for one machine: start programs, restart the one that dies, stop all.

``annotation-studio serve`` and ``prod`` run their web processes and quality workers under
:class:`Supervisor` (honcho, used before, stopped every process when one died: a ``kill -9``
of one web process took the stack down until someone restarted it). Here:

- a program that exits while the supervisor is running is started again alone, after a delay
  that grows while it keeps dying young (0.1 s, then 0.5, 1, 2, up to 5 s) and starts again
  from 0.1 s once it has run for :data:`STABLE_AFTER` seconds; the others are not touched;
- SIGTERM, SIGINT (Ctrl-C) or SIGHUP stop everything: each program gets SIGTERM, those still
  running after ``grace`` seconds get SIGKILL, and the supervisor exits 0.

Programs inherit the supervisor's standard output and error, and the descriptors it names
(the web processes' shared listening socket).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RESTART_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)  # seconds; the last repeats
STABLE_AFTER = 30.0  # seconds up after which a crash counts as the first again
TICK = 0.05  # seconds between checks of the children


@dataclass
class Program:
    """One process to keep running: its name in the log, command and inherited descriptors."""

    name: str
    argv: Sequence[str]
    pass_fds: Sequence[int] = ()
    process: subprocess.Popen | None = field(default=None, repr=False)
    started_at: float = 0.0
    crashes: int = 0
    restart_at: float | None = None


class Supervisor:
    """Run ``programs`` until a stop signal (see the module docstring)."""

    def __init__(
        self,
        programs: Sequence[Program],
        *,
        env: Mapping[str, str] | None = None,
        grace: float = 15.0,
    ) -> None:
        self.programs = list(programs)
        self.env = dict(os.environ if env is None else env)
        self.grace = grace
        self._stop_signal: int | None = None

    def _say(self, text: str) -> None:
        print(f"supervisor: {text}", file=sys.stderr, flush=True)

    def _start(self, program: Program) -> None:
        program.process = subprocess.Popen(
            list(program.argv), env=self.env, pass_fds=tuple(program.pass_fds)
        )
        program.started_at = time.monotonic()
        program.restart_at = None

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stop_signal = signum

    def run(self) -> int:
        """Start every program and keep them running until a stop signal; 0 once all stopped."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        for program in self.programs:
            self._start(program)
        while self._stop_signal is None:
            now = time.monotonic()
            for program in self.programs:
                self._tend(program, now)
            time.sleep(TICK)
        self._say(f"{signal.Signals(self._stop_signal).name}: stopping every process")
        self._stop_all()
        return 0

    def _tend(self, program: Program, now: float) -> None:
        """Restart ``program`` if it died and its delay has passed."""
        if program.restart_at is not None:
            if now >= program.restart_at:
                self._start(program)
                assert program.process is not None
                self._say(f"{program.name} restarted (pid {program.process.pid})")
            return
        assert program.process is not None
        code = program.process.poll()
        if code is None:
            return
        if now - program.started_at >= STABLE_AFTER:
            program.crashes = 0
        delay = RESTART_DELAYS[min(program.crashes, len(RESTART_DELAYS) - 1)]
        program.crashes += 1
        program.restart_at = now + delay
        self._say(
            f"{program.name} (pid {program.process.pid}) exited with {code}; "
            f"restarting it in {delay} s"
        )

    def _stop_all(self) -> None:
        running = [p.process for p in self.programs if p.process and p.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
