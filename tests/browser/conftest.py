"""Browser tests: Playwright's sync API drives Debian's Chromium against ``live_server``.

Playwright's own browser download cannot work here, so the system Chromium is launched with
flags that keep it off the network. Without ``/usr/bin/chromium`` the tests are skipped.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.browser.contexts import close_contexts
from tests.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
_ASGI: dict[str, str] = {}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium per test module.

    Playwright's sync API keeps an asyncio loop running in the test thread, which Django would
    take for async code and refuse ORM calls from fixtures and assertions: the async-safety
    check is switched off for the browser modules only, and switched back on after them.
    """
    if not CHROMIUM.is_file():
        message = (
            "Browser tests need Chromium at /usr/bin/chromium (apt-get install chromium); "
            "CI installs it."
        )
        if os.environ.get("STUDIO_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def open_page(chromium: Browser, live_server) -> Iterator[Callable[..., Page]]:
    """Open a page in a fresh browser context: ``open_page(java_script_enabled=False)``."""
    contexts = []

    def open_(**context_options: object) -> Page:
        options = {"viewport": {"width": 1200, "height": 900}, **context_options}
        context = chromium.new_context(base_url=live_server.url, **options)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield open_
    close_contexts(contexts)


def _start_server() -> str:
    """Serve the studio as its web processes do, in a daemon thread; return its base URL.

    The listening socket is open before the thread starts, so the first request waits in its
    backlog rather than failing while uvicorn starts.
    """
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from annotate_site.webserver import serve

    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(
        target=serve,
        args=(listener,),
        kwargs={"wrap": ASGIStaticFilesHandler},
        daemon=True,
        name="uvicorn",
    ).start()
    host, port = listener.getsockname()
    return f"http://{host}:{port}"


@pytest.fixture
def asgi_url(transactional_db) -> str:
    """The site served by uvicorn as ``serve`` runs it, for pages that need websockets.

    The server runs on 127.0.0.1 in a background thread of the test process: like
    ``live_server``, it shares the test database (SQLite's shared in-memory database or
    PostgreSQL). It lives for the session and every module shares it.
    """
    if "url" not in _ASGI:
        _ASGI["url"] = _start_server()
    return _ASGI["url"]


@pytest.fixture
def screenshot() -> Callable[[Page, str], Path]:
    """Save a full-page screenshot as ``test-artifacts/<name>.png`` (kept for review)."""
    ARTIFACTS.mkdir(exist_ok=True)

    def take(page: Page, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def sign_in_page(page: Page, username: str, password: str = PASSWORD) -> None:
    """Sign a user in through the login form (works with or without JavaScript)."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="My studies")).to_be_visible()


@pytest.fixture
def sign_in() -> Callable[[Page, str], None]:
    """:func:`sign_in_page` with the factories' password."""
    return sign_in_page
