"""Row locks that hold against concurrent first writers."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import connections, models, router
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery

M = TypeVar("M", bound=models.Model)


def locked_get_or_create(model: type[M], *, likely_new: bool = False, **lookup: Any) -> M:
    """The row ``lookup`` names, created if missing, locked until the transaction ends.

    One locking read when the row exists; otherwise the insert holds it. The insert is an
    ``INSERT ... ON CONFLICT DO NOTHING``: a concurrent first writer's insert wins the unique
    constraint, this one inserts nothing, and the row is then read with a lock, which waits
    for the winner's. (It used to be ``create()`` in a savepoint, the conflict caught as an
    ``IntegrityError``: two more statements on every new row, three round trips on
    PostgreSQL.) ``likely_new``: the caller expects no row, so the insert is tried first (no
    read before it). As with ``bulk_create``, no save signal is sent. Call inside a
    transaction.
    """
    manager = model._default_manager
    if not likely_new:
        found = manager.select_for_update().filter(**lookup).first()
        if found is not None:
            return found
    created = _insert_unless_present(model(**lookup))
    if created is not None:
        return created
    return manager.select_for_update().get(**lookup)


def _insert_unless_present(obj: M) -> M | None:
    """Insert ``obj`` as ``save()`` would (its fields' defaults and ``pre_save``, the returned
    primary key set), or nothing if the row would break a unique constraint: ``None`` then."""
    meta = obj._meta
    db = router.db_for_write(type(obj))
    fields = [
        field
        for field in meta.local_concrete_fields
        if field is not meta.auto_field and not field.generated
    ]
    query = InsertQuery(type(obj), on_conflict=OnConflict.IGNORE)
    query.insert_values(fields, [obj])
    compiler = query.get_compiler(using=db)
    compiler.returning_fields = meta.db_returning_fields
    with connections[db].cursor() as cursor:
        for sql, params in compiler.as_sql():
            cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    for field, value in zip(meta.db_returning_fields, row, strict=True):
        setattr(obj, field.attname, value)
    obj._state.adding, obj._state.db = False, db
    return obj
