"""Dashboard events on the channel layer: group names, the ``dashboard.update`` message, and
:func:`layer_sync`, the way sync code calls the (async-only) channel layer from any thread."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

P = ParamSpec("P")
T = TypeVar("T")


def layer_sync(method: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """``method`` (a channel-layer coroutine function) as a blocking call that works in any
    thread; it returns (or raises) what the coroutine does, once the coroutine has finished.

    The channels docs call the layer from sync code through ``async_to_sync``, which refuses
    to run in a thread whose event loop is running ("You cannot use AsyncToSync in the same
    thread as an async event loop"): sync code called from a coroutine (``asyncio.run``, a
    live server's loop, Playwright's sync API) blocks that loop, so the coroutine could never
    run on it (django/channels#1194). There the call runs in a worker thread with an event loop
    of its own while this thread waits, as it would have waited for the loop. Everywhere else
    it is ``async_to_sync``, which from a ``sync_to_async`` thread (a view under uvicorn) runs
    the coroutine on the server's loop.
    """
    blocking = async_to_sync(method)

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running in this thread: the usual case
            return blocking(*args, **kwargs)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="channel-layer") as pool:
            return pool.submit(blocking, *args, **kwargs).result()

    return call


def study_group(study_id: int) -> str:
    """Channel-layer group of a study's open dashboards."""
    return f"study_{study_id}"


def dashboard_notify(*, study_id: int, question_id: int) -> None:
    """Tell every open dashboard of the study that a question's figures changed.

    Call it after the commit: the consumers re-read the database when the message arrives.
    Safe from any thread, one with a running event loop too (:func:`layer_sync`).
    """
    layer_sync(get_channel_layer().group_send)(
        study_group(study_id), {"type": "dashboard.update", "question_id": question_id}
    )
