"""The live server of the browser tests runs a bounded number of requests at once, and the test
process's database pool has room for them (tests/live_server.py, tests/conftest.py)."""

from __future__ import annotations

import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started

from tests.live_server import REQUESTS


@pytest.mark.django_db(transaction=True)
def test_the_live_server_runs_at_most_its_bound_of_requests_at_once(live_server):
    lock = threading.Lock()
    running = [0]
    most = [0]

    def started(**kwargs: object) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)  # long enough for the other requests to arrive meanwhile

    def finished(**kwargs: object) -> None:
        with lock:
            running[0] -= 1

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        with ThreadPoolExecutor(3 * REQUESTS) as pool:
            statuses = list(
                pool.map(
                    lambda _: urllib.request.urlopen(f"{live_server.url}/accounts/login/").status,
                    range(3 * REQUESTS),
                )
            )
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert statuses == [200] * (3 * REQUESTS)
    assert most[0] == REQUESTS


def test_the_test_process_pool_has_room_for_the_live_server_and_the_test():
    options = settings.DATABASES["default"].get("OPTIONS", {})
    if "pool" not in options:
        pytest.skip("PostgreSQL's pool: the PostgreSQL pass")
    assert options["pool"]["max_size"] == settings.DB_POOL_SIZE + REQUESTS + 1
