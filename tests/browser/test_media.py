"""Uploaded stimuli in a real browser: served by the members-only view, they play and seek.

Players seek with byte ranges: without them Chromium can only seek within what it has
buffered, and the continuous recorder's resume (``currentTime = last_time``) would restart.
"""

from __future__ import annotations

import time

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from apps.demo.continuous import tone_sweep_wav
from apps.items.models import Item
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECONDS = 120.0  # 3.8 MB of WAV: more than Chromium buffers for preload="metadata"


@pytest.fixture
def audio_item(settings, tmp_path) -> Item:
    settings.MEDIA_ROOT = tmp_path
    study, _ = running_study(n_items=1, n_annotators=1)
    item = study.items.get()
    item.kind = Item.Kind.AUDIO
    item.media.save("tone.wav", ContentFile(tone_sweep_wav(seconds=SECONDS)))
    return item


def _until(check, seconds: float = 10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_stimulus_plays_from_its_view_and_seeks_anywhere(open_page, sign_in, audio_item):
    page = open_page()
    sign_in(page, audio_item.study.created_by.username)
    page.goto(reverse("items:detail", args=[audio_item.study_id, audio_item.pk]))
    audio = page.locator("audio.item__media")
    assert audio.get_attribute("src") == audio_item.media_url
    _until(lambda: audio.evaluate("a => a.readyState >= 1"))
    assert audio.evaluate("a => a.duration") == pytest.approx(SECONDS, abs=0.01)
    assert audio.evaluate("a => a.seekable.end(a.seekable.length - 1)") == pytest.approx(
        SECONDS, abs=0.01
    )
    audio.evaluate("a => { a.currentTime = 100; }")
    _until(lambda: audio.evaluate("a => !a.seeking && a.readyState >= 2"))
    assert audio.evaluate("a => a.currentTime") == pytest.approx(100, abs=0.01)
