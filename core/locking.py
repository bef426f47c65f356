"""Row locks that hold against concurrent first writers."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import IntegrityError, models, transaction

M = TypeVar("M", bound=models.Model)


def locked_get_or_create(model: type[M], *, likely_new: bool = False, **lookup: Any) -> M:
    """The row ``lookup`` names, created if missing, locked until the transaction ends.

    One locking read when the row exists; otherwise the insert (in a savepoint) holds it. A
    concurrent first writer's insert wins the unique constraint, and this waits for its lock.
    ``likely_new``: the caller expects no row, so the insert is tried first (no read before
    it); a row that exists after all fails the unique constraint and is read, locked, then.
    Call inside a transaction.
    """
    manager = model._default_manager
    if not likely_new:
        found = manager.select_for_update().filter(**lookup).first()
        if found is not None:
            return found
    try:
        with transaction.atomic():
            return manager.create(**lookup)
    except IntegrityError:  # created before, or by a concurrent first writer: wait for its lock
        return manager.select_for_update().get(**lookup)
