"""Simultaneous arrivals through the link, on PostgreSQL (SQLite serialises writes).

Each thread is a separate browser (client) with its own database connection; a barrier
releases the requests at once. The same platform id must make one participant; many ids at
once must not get past ``max_participants``.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client

from apps.recruitment.models import Participant
from tests.apps.recruitment.setup import recruiting_study

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _arrive_together(token: str, pids: list[str], extra: str = "") -> list[int]:
    """Open the link once per pid from parallel threads; return the status codes."""
    barrier = threading.Barrier(len(pids))
    codes: list[int] = [0] * len(pids)
    errors: list[BaseException] = []

    def arrive(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            response = Client().get(f"/join/{token}/?PROLIFIC_PID={pids[index]}{extra}")
            codes[index] = response.status_code
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=arrive, args=(i,)) for i in range(len(pids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    return codes


def test_one_id_in_many_tabs_at_once_is_one_participant():
    """The same attempt (Prolific's SESSION_ID) opened in six tabs at once: one participant,
    and every tab continues."""
    _, recruitment = recruiting_study()
    codes = _arrive_together(recruitment.token, ["same-id"] * 6, "&SESSION_ID=s1")
    assert codes == [302] * 6
    assert Participant.objects.count() == 1


def test_one_id_from_many_browsers_at_once_is_one_participant_and_one_browser():
    """Six browsers naming one id without its attempt id: the first in is the participant, the
    others are refused (409), never handed the participant (issue 24's impersonation)."""
    _, recruitment = recruiting_study()
    codes = _arrive_together(recruitment.token, ["same-id"] * 6)
    assert sorted(codes) == [302] + [409] * 5
    assert Participant.objects.count() == 1


def test_many_ids_at_once_stop_at_max_participants():
    _, recruitment = recruiting_study(max_participants=3)
    codes = _arrive_together(recruitment.token, [f"id{n}" for n in range(8)])
    assert sorted(codes) == [200] * 5 + [302] * 3  # five get the "study full" screen-out
    assert Participant.objects.count() == 3
