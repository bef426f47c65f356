"""Take the README's screenshots from the current pages: ``python -m docs.screenshots``.

Loads the demo (``manage.py load_demo``) into a throwaway SQLite database, serves the site on
127.0.0.1 from a thread of this process, and drives Debian's Chromium (``/usr/bin/chromium``)
with Playwright through the annotator's queue, a trace page, the comparison page, the quality
dashboard, the items list and an item page, writing one PNG per page to ``docs/screenshots/``.

Options: ``--quick`` leaves out the real data sets (``load_demo --skip-real-data``: no
shades-of-green traces, no 15,521-item study); ``--out DIR`` writes elsewhere. Set
``DATABASE_URL`` to use an existing database instead of the throwaway one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

OUT = Path(__file__).resolve().parent / "screenshots"
DESKTOP = {"width": 1366, "height": 850}
PHONE = {"width": 390, "height": 844}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve() -> Iterator[str]:
    """The site (with its static files) on a free port of 127.0.0.1; yields its base URL."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.wsgi import get_wsgi_application

    app = StaticFilesHandler(get_wsgi_application())
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="screenshots")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def load_demo(*, quick: bool) -> dict[str, str]:
    """Migrate, load the demo and return the paths of the pages to photograph."""
    from django.core.management import call_command

    from apps.annotations.models import Assignment
    from apps.demo.continuous import DEMO_NAME as GREEN_NAME
    from apps.demo.continuous import QUESTION_KEY
    from apps.demo.management.commands.load_demo import EMOTIONS_NAME
    from apps.items.models import Item
    from apps.studies.models import Question, Study

    call_command("migrate", verbosity=0)
    call_command("load_demo", *(["--skip-real-data"] if quick else []))
    emotions = Study.objects.get(name=EMOTIONS_NAME)
    green = Study.objects.get(name=GREEN_NAME)
    pairwise = Question.objects.filter(kind=Question.Kind.PAIRWISE).select_related("study").first()
    gold = Item.objects.filter(study=green, metadata__has_key="signal").order_by("position").first()
    sweep = Assignment.objects.filter(  # the 8 s tone: a few seconds of tracing fill the plot
        study=green, item__kind=Item.Kind.AUDIO, annotator__username="ann1", round=1
    ).first()
    pages = {
        "queue": f"/studies/{emotions.pk}/annotate/",
        "trace": f"/studies/{green.pk}/traces/{QUESTION_KEY}/record/"
        + (f"{sweep.pk}/" if sweep else ""),
        "dashboard": f"/studies/{emotions.pk}/quality/",
        "items": f"/studies/{emotions.pk}/items/?sort=-answers",
    }
    if pairwise is not None:
        pages["compare"] = f"/studies/{pairwise.study_id}/compare/{pairwise.key}/"
    if gold is not None:
        pages["item"] = f"/studies/{green.pk}/items/{gold.pk}/"
    return pages


def photograph(base_url: str, pages: dict[str, str], out: Path) -> list[Path]:
    """Sign in as each page's user and save its screenshots; returns the files written."""
    from playwright.sync_api import Page, expect, sync_playwright

    from apps.demo.management.commands.load_demo import DEMO_PASSWORD
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, sign_in_page

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def fold_instructions(page: Page) -> None:
        """Fold the instructions, as the queue does after the first answer."""
        details = page.locator("details.instructions[open]")
        if details.count():
            details.locator("summary").click()
            expect(page.locator("details.instructions[open]")).to_have_count(0)

    def shot(page: Page, name: str, *, height: int | None = None) -> None:
        """The viewport, or the page's top ``height`` pixels."""
        path = out / f"{name}.png"
        clip = {"x": 0, "y": 0, "width": page.viewport_size["width"], "height": height or 0}
        page.screenshot(path=str(path), full_page=bool(height), clip=clip if height else None)
        written.append(path)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def user_page(username: str, viewport: dict[str, int]) -> Page:
            context = browser.new_context(base_url=base_url, viewport=viewport)
            context.set_default_timeout(30_000)
            page = context.new_page()
            sign_in_page(page, username, DEMO_PASSWORD)
            return page

        annotator = user_page("ann1", DESKTOP)
        annotator.goto(pages["queue"])
        expect(annotator.locator(".label-button").first).to_be_visible()
        fold_instructions(annotator)
        shot(annotator, "queue")

        annotator.goto(pages["trace"])
        play = annotator.get_by_role("button", name="Play")
        expect(play).to_be_enabled()
        play.click()
        for key in ["PageUp"] * 6 + ["PageDown"] * 4 + ["PageUp"] * 3:  # the trace so far
            annotator.keyboard.press(key)
            annotator.wait_for_timeout(350)
        annotator.locator(".trace-stage").evaluate("stage => stage.scrollIntoView()")
        shot(annotator, "trace")

        if "compare" in pages:
            annotator.goto(pages["compare"])
            expect(annotator.get_by_role("button", name="B is better")).to_be_visible()
            shot(annotator, "compare")
        phone = user_page("ann1", PHONE)
        phone.goto(pages["queue"])
        expect(phone.locator(".label-button").first).to_be_visible()
        fold_instructions(phone)
        shot(phone, "queue-phone")

        manager = user_page("manager", DESKTOP)
        manager.goto(pages["dashboard"])
        expect(manager.locator("#quality-heatmap svg")).to_be_visible()
        manager.locator("#quality-map").scroll_into_view_if_needed()  # draws what is lazy
        shot(manager, "dashboard", height=4000)  # down to the heatmap, the map and the histograms
        manager.goto(pages["items"])
        expect(manager.locator("#item-results table")).to_be_visible()
        shot(manager, "items")
        if "item" in pages:
            manager.goto(pages["item"])
            expect(manager.locator(".green-stimulus__strip")).to_be_visible()
            shot(manager, "item", height=1300)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="no real data sets (faster)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"directory (default {OUT})")
    args = parser.parse_args(argv)
    scratch = tempfile.TemporaryDirectory(prefix="studio-screenshots-")
    if not os.environ.get("DATABASE_URL"):
        os.environ["STUDIO_LOCAL_DIR"] = scratch.name  # a throwaway SQLite database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    os.environ.setdefault("QUALITY_UPDATES", "inline")  # the dashboard is current at once
    # Playwright's sync API runs an event loop in this thread; the ORM runs in the server's.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    import django

    django.setup()
    from django.db import connections

    from tests.browser.conftest import CHROMIUM

    if not CHROMIUM.is_file():
        print(f"Needs Chromium at {CHROMIUM} (apt-get install chromium).", file=sys.stderr)
        return 1

    pages = load_demo(quick=args.quick)
    connections.close_all()  # the server's threads open their own
    with serve() as base_url:
        for path in photograph(base_url, pages, args.out):
            print(path)
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
