"""The background thread's ``once`` jobs: dropped while waiting or running, asked again after."""

from __future__ import annotations

from analytics import background


def test_a_once_job_that_failed_can_be_asked_for_again():
    """A failing bootstrap must not leave its key marked unfinished: it would never run again."""
    runs: list[int] = []

    def failing(key: int) -> None:
        runs.append(key)
        raise RuntimeError("the database went away")

    background.enqueue(7, failing, queue="test.once", drain=False, once=True)
    assert background.idle(timeout=10)
    background.enqueue(7, failing, queue="test.once", drain=False, once=True)
    assert background.idle(timeout=10)
    assert runs == [7, 7]
