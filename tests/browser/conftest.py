"""Browser tests: Playwright's sync API drives Debian's Chromium against ``live_server``.

Playwright's own browser download cannot work here, so the system Chromium is launched with
flags that keep it off the network. Without ``/usr/bin/chromium`` the tests are skipped.
"""

from __future__ import annotations

import os
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
_DAPHNE: dict[str, str] = {}


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


def _start_daphne() -> str:
    """Start daphne on a free port in a daemon thread; return its base URL."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from annotate_site.asgi import application

    ready = threading.Event()
    server = Server(
        application=ASGIStaticFilesHandler(application),
        endpoints=build_endpoint_description_strings(host="127.0.0.1", port=0),
        signal_handlers=False,
        ready_callable=ready.set,
    )
    threading.Thread(target=server.run, daemon=True, name="daphne").start()
    if not ready.wait(10):
        raise RuntimeError("daphne did not start")
    for _ in range(100):
        if server.listening_addresses:
            break
        threading.Event().wait(0.05)
    host, port = server.listening_addresses[0]
    return f"http://{host}:{port}"


@pytest.fixture
def asgi_url(transactional_db) -> str:
    """The site served by daphne (the production server), for pages that need websockets.

    Daphne runs on 127.0.0.1 in a background thread of the test process: like
    ``live_server``, it shares the test database (SQLite's shared in-memory database or
    PostgreSQL). Twisted's reactor runs once per process, so the server lives for the session
    and every module shares it.
    """
    if "url" not in _DAPHNE:
        _DAPHNE["url"] = _start_daphne()
    return _DAPHNE["url"]


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
