"""The API's pagination: limit and offset, with a ceiling on the page size."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination


class CappedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=&offset=`` pages of ``PAGE_SIZE`` rows by default and never more than
    :attr:`max_limit`, whatever ``limit`` asks: a larger ``limit`` gets ``max_limit`` rows and
    ``next`` links the rest. Bulk data goes through the streamed exports instead.
    """

    max_limit = 1000
