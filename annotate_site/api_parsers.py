"""The API's JSON parser: only text a database can store gets past it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# NUL, which PostgreSQL's text and jsonb refuse, and halves of surrogate pairs, which JSON may
# escape (\ud800) but no UTF-8 text can hold: either one made the write fail with a 500.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class StorableJSONParser(JSONParser):
    """JSON bodies whose every string (keys included) is storable text; else 400."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if _has_unstorable(data):
            raise ParseError(
                "JSON parse error - text may not contain NUL characters (\\u0000) or unpaired "
                "surrogates (\\ud800-\\udfff)."
            )
        return data


def _has_unstorable(value: Any) -> bool:
    """Whether any string in ``value`` (a parsed JSON document) holds an unstorable character."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if _UNSTORABLE.search(node):
                return True
        elif isinstance(node, Mapping):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
