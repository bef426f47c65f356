"""A web process holding more than its share of the port's keep-alive connections closes the
next ones it answers (``Connection: close``): the clients reconnect and land afresh."""

from __future__ import annotations

import asyncio
from pathlib import Path

from annotate_site.body_limit import Message, Scope
from annotate_site.connection_balance import SHED_INTERVAL, ConnectionBalance, create_table


async def _ok(scope: Scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1")]})
    await send({"type": "http.response.body", "body": b"ok"})


class Clock:
    """A clock the test moves: each reading a second later, so no close waits for the last."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 1.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _balances(
    tmp_path: Path, processes: int, clock: Clock | None = None
) -> list[ConnectionBalance]:
    create_table(tmp_path / "table", processes)
    return [
        ConnectionBalance(
            _ok, table=tmp_path / "table", slot=slot, processes=processes, clock=clock or Clock()
        )
        for slot in range(processes)
    ]


def _answer(balance: ConnectionBalance, kind: str = "http") -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    asyncio.run(balance({"type": kind, "path": "/"}, receive, send))
    return sent


def _closes(balance: ConnectionBalance) -> bool:
    headers = _answer(balance)[0]["headers"]
    assert (b"x-a", b"1") in headers  # the application's own headers are kept
    return (b"connection", b"close") in headers


def test_the_process_over_the_mean_rounded_up_closes_and_the_others_keep(
    tmp_path: Path,
) -> None:
    a, b = _balances(tmp_path, 2)
    a.attach(lambda: 38)
    b.attach(lambda: 26)
    assert _closes(a)
    assert not _closes(b)
    held = [28]
    a.attach(lambda: held[0])
    assert _closes(a)  # 28 > 27, the mean of 28 and 26
    held[0] = 27  # each published count is read live by the other
    assert not _closes(a)  # 27 and 26: within one of each other
    b.attach(lambda: 29)
    assert _closes(b)  # 29 against 27
    held[0] = 3
    b.attach(lambda: 1)
    assert _closes(a)  # few connections: 3 against 1 is half as much again as the mean
    assert not _closes(b)


def test_three_processes_weigh_against_the_mean_of_all(tmp_path: Path) -> None:
    a, b, c = _balances(tmp_path, 3)
    for balance, held in ((a, 40), (b, 30), (c, 20)):
        balance.attach(lambda held=held: held)
    assert [_closes(balance) for balance in (a, b, c)] == [True, False, False]


def test_alone_or_not_yet_attached_it_never_closes(tmp_path: Path) -> None:
    (alone,) = _balances(tmp_path, 1)
    alone.attach(lambda: 500)
    assert not _closes(alone)
    a, b = _balances(tmp_path, 2)
    b.attach(lambda: 0)
    assert not _closes(a)  # no count yet: every message passes unchanged
    assert _answer(a)[0]["headers"] == [(b"x-a", b"1")]


def test_websockets_pass_untouched(tmp_path: Path) -> None:
    a, b = _balances(tmp_path, 2)
    a.attach(lambda: 100)
    b.attach(lambda: 0)
    assert _answer(a, "websocket")[0]["headers"] == [(b"x-a", b"1")]


def test_a_process_closes_at_most_one_connection_per_interval(tmp_path: Path) -> None:
    """In a burst the others' counts lag their accepts: unlimited, 64 connections cost 117
    closes. Over its share, a process closes one, then none until SHED_INTERVAL has passed."""
    clock = Clock()
    a, b = _balances(tmp_path, 2, clock)
    a.attach(lambda: 40)
    b.attach(lambda: 0)
    clock.step = SHED_INTERVAL / 4
    closed = [_closes(a) for _ in range(8)]
    assert closed == [True, False, False, False, True, False, False, False]
