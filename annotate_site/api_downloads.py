"""Content negotiation for API endpoints that stream files (CSV, JSONL exports)."""

from __future__ import annotations

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class FileDownloadNegotiation(BaseContentNegotiation):
    """For file downloads: ignore ``Accept`` and ``?format=``; errors still render as JSON."""

    def select_parser(self, request: Request, parsers: list[BaseParser]) -> BaseParser | None:
        return None  # downloads take no body

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type
