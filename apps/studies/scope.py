"""A question's scope: the items it applies to (by media kind, metadata tag, or list of ids).

A scope is a small JSON object stored on :attr:`apps.studies.models.Question.scope`::

    {"kinds": ["audio", "video"],              # item kinds (any of them)
     "metadata": {"group": ["a", "b"]},         # metadata key -> value or values (any of them)
     "items": ["clip-01", "clip-02"]}           # item external ids (any of them)

Every part that is given must hold (they are combined with AND); a part left out, or the empty
object, restricts nothing: ``{}`` is every item, the default of every question. Metadata
values compare as imported (a CSV column's are text, JSON keeps numbers and booleans).

:func:`clean_scope` validates a scope as typed or posted; :func:`scope_filter` turns it into
the one ``Q`` every consumer filters items with
(:func:`apps.items.selectors.question_item_filter`); :func:`scope_matches` is the same test in
Python, for an item already loaded (the queue asks it per item without a query).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import reduce
from operator import or_
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import JSONField, Q, Value
from django.db.models.fields.json import KeyTransform

SCOPE_KEYS = ("kinds", "metadata", "items")
ITEM_KINDS = ("text", "image", "audio", "video")  # apps.items.models.Item.Kind's values
METADATA_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
MAX_SCOPE_ITEMS = 10_000
MAX_METADATA_VALUES = 100
Scalar = str | int | float | bool


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) and not (
        isinstance(value, str) and len(value) > 200
    )


def clean_scope(raw: Any) -> dict[str, Any]:
    """A valid scope from ``raw`` (``None`` or ``{}``: every item); raise ``ValidationError``
    keyed ``scope`` naming each problem."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError({"scope": 'A scope is an object such as {"kinds": ["audio"]}.'})
    problems: list[str] = []
    if unknown := sorted(set(raw) - set(SCOPE_KEYS)):
        problems.append(f"Unknown scope keys: {', '.join(unknown)}; use {', '.join(SCOPE_KEYS)}.")
    cleaned: dict[str, Any] = {}
    kinds = raw.get("kinds") or []
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        problems.append("kinds: give a list of item kinds.")
    elif bad := [k for k in kinds if k not in ITEM_KINDS]:
        problems.append(f"kinds: {', '.join(map(repr, bad))}: use {', '.join(ITEM_KINDS)}.")
    elif kinds:
        cleaned["kinds"] = [k for k in ITEM_KINDS if k in kinds]
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        problems.append('metadata: give an object such as {"group": "sentence"}.')
    else:
        tags: dict[str, list[Scalar]] = {}
        for key, value in metadata.items():
            values = value if isinstance(value, list) else [value]
            if not METADATA_KEY.match(str(key)):
                problems.append(f"metadata: {key!r} is not a column name (letters, digits, _.-).")
            elif not values or len(values) > MAX_METADATA_VALUES or not all(map(_scalar, values)):
                problems.append(
                    f"metadata: {key!r} needs a value or a list of up to "
                    f"{MAX_METADATA_VALUES} values (text, number, true or false)."
                )
            else:
                tags[str(key)] = values
        if tags:
            cleaned["metadata"] = tags
    items = raw.get("items") or []
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        problems.append("items: give a list of item ids (external ids).")
    elif len(items) > MAX_SCOPE_ITEMS:
        problems.append(f"items: at most {MAX_SCOPE_ITEMS:,} ids; tag the items instead.")
    elif items:
        cleaned["items"] = list(dict.fromkeys(items))
    if problems:
        raise ValidationError({"scope": problems})
    return cleaned


def scope_filter(scope: Mapping[str, Any] | None, *, prefix: str = "") -> Q:
    """The items of ``scope`` as a ``Q`` on ``Item`` (``prefix``: the path to the item, e.g.
    ``"item__"``); ``Q()`` (no condition) for the empty scope."""
    scope = scope or {}
    condition = Q()
    if kinds := scope.get("kinds"):
        condition &= Q(**{f"{prefix}kind__in": kinds})
    for key, given in (scope.get("metadata") or {}).items():
        values = given if isinstance(given, list) else [given]
        # an expression, not "metadata__<key>": a key may be named like a lookup ("in")
        value = KeyTransform(key, f"{prefix}metadata")
        exact = value.get_lookup("exact")
        assert exact is not None  # a key transform's KeyTransformExact
        wanted = [Q(exact(value, Value(v, output_field=JSONField()))) for v in values]
        condition &= reduce(or_, wanted)
    if items := scope.get("items"):
        condition &= Q(**{f"{prefix}external_id__in": items})
    return condition


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, ``"1"`` is not ``1``."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def scope_matches(
    scope: Mapping[str, Any] | None, *, kind: str, metadata: Any, external_id: str
) -> bool:
    """Whether an item (its kind, metadata and external id) is in ``scope``: the test of
    :func:`scope_filter`, in Python."""
    scope = scope or {}
    if (kinds := scope.get("kinds")) and kind not in kinds:
        return False
    metadata = metadata if isinstance(metadata, Mapping) else {}
    for key, given in (scope.get("metadata") or {}).items():
        values = given if isinstance(given, list) else [given]
        if key not in metadata or not any(_same(metadata[key], v) for v in values):
            return False
    items = scope.get("items")
    return not items or external_id in items


def scope_text(scope: Mapping[str, Any] | None) -> str:
    """The scope in words, for the editor and the manager's pages: "every item", "audio and
    video items tagged group = a or b"."""
    scope = scope or {}
    if not scope:
        return "every item"
    parts = []
    kinds = scope.get("kinds")
    parts.append(f"{' and '.join(kinds)} items" if kinds else "items")
    for key, given in (scope.get("metadata") or {}).items():
        values = given if isinstance(given, list) else [given]
        parts.append(f"tagged {key} = {' or '.join(str(v) for v in values)}")
    if items := scope.get("items"):
        listed = ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
        parts.append(f"among {listed}")
    return " ".join(parts)
