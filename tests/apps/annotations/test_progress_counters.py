"""The annotator's progress (done and total of their queue) is read from counters the database
keeps on every write of an assignment, not counted from the assignments on every answer: the
read costs the same at 20 or 20,000 assignments, and the counters equal a recount whatever
path wrote the assignments (bulk inserts skipping conflicts, queryset updates, saves, cascading
deletes)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.annotations.models import AnnotatorProgress, Assignment
from apps.annotations.selectors import annotator_progress
from apps.items.models import Item
from apps.studies.models import Study
from tests.factories import ItemFactory, StudyFactory, UserFactory, running_study

pytestmark = pytest.mark.django_db


def _recount() -> dict[tuple[int, int], tuple[int, int]]:
    rows = Assignment.objects.values("study_id", "annotator_id").annotate(
        total=Count("id"), done=Count("completed_at")
    )
    return {(r["study_id"], r["annotator_id"]): (r["total"], r["done"]) for r in rows}


def _counters() -> dict[tuple[int, int], tuple[int, int]]:
    return {
        (p.study_id, p.annotator_id): (p.total, p.done)
        for p in AnnotatorProgress.objects.all()
        if p.total or p.done
    }


def test_the_progress_read_reads_no_assignment() -> None:
    study, (annotator, _) = running_study(n_items=30, n_annotators=2)  # queues filled
    Assignment.objects.filter(annotator=annotator, position__lt=4).update(
        completed_at=timezone.now()
    )
    with CaptureQueriesContext(connection) as queries:
        progress = annotator_progress(annotator=annotator, study=study)
    assert progress == {"done": 4, "total": 30, "percent": 13}
    assert [q["sql"] for q in queries if "annotations_assignment" in q["sql"]] == []


def test_an_annotator_without_assignments_has_no_progress() -> None:
    study, annotator = StudyFactory(), UserFactory()
    assert annotator_progress(annotator=annotator, study=study) == {
        "done": 0,
        "total": 0,
        "percent": 0,
    }


# What a sequence of writes does, by kind: queue items (bulk, a repeat of an existing
# assignment skipped), complete or reopen some (one queryset update, or each saved), delete some,
# move some to another annotator, delete an item, an annotator or a study (cascades).
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("queue"), st.integers(0, 2), st.lists(st.integers(0, 5), max_size=6)),
        st.tuples(
            st.sampled_from(["complete", "reopen", "save_complete", "delete"]),
            st.lists(st.integers(0, 40), max_size=6),
        ),
        st.tuples(st.just("move"), st.lists(st.integers(0, 40), max_size=4), st.integers(0, 2)),
        st.tuples(st.sampled_from(["drop_item", "drop_user", "drop_study"]), st.integers(0, 5)),
    ),
    max_size=12,
)


class _RolledBackError(Exception):
    """Raised to roll an example's writes back."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_the_counters_equal_a_recount_after_any_writes(ops) -> None:
    try:
        with transaction.atomic():
            _apply(ops)
            raise _RolledBackError
    except _RolledBackError:
        pass


def _apply(ops) -> None:
    studies = [StudyFactory(), StudyFactory()]
    items = [ItemFactory(study=studies[n % 2]) for n in range(6)]
    users = [UserFactory() for _ in range(3)]

    def pick(indexes):
        ids = sorted(Assignment.objects.values_list("pk", flat=True))
        return [ids[i % len(ids)] for i in indexes] if ids else []

    for op in ops:
        kind = op[0]
        if kind == "queue":
            user, chosen = users[op[1]], [items[i] for i in op[2]]
            Assignment.objects.bulk_create(
                [
                    Assignment(study=item.study, item=item, annotator=user, position=n)
                    for n, item in enumerate(chosen)
                    if Item.objects.filter(pk=item.pk).exists()
                    and Study.objects.filter(pk=item.study_id).exists()
                ],
                ignore_conflicts=True,
            )
        elif kind == "complete":
            Assignment.objects.filter(pk__in=pick(op[1])).update(completed_at=timezone.now())
        elif kind == "reopen":
            Assignment.objects.filter(pk__in=pick(op[1])).update(completed_at=None)
        elif kind == "save_complete":
            for assignment in Assignment.objects.filter(pk__in=pick(op[1])):
                assignment.completed_at = None if assignment.completed_at else timezone.now()
                assignment.save()
        elif kind == "delete":
            Assignment.objects.filter(pk__in=pick(op[1])).delete()
        elif kind == "move":
            # to an annotator who holds none of the moved items (the unique constraint)
            moved = Assignment.objects.filter(pk__in=pick(op[1])).exclude(
                item__assignments__annotator=users[op[2]]
            )
            one_per_item = {a.item_id: a.pk for a in moved}
            Assignment.objects.filter(pk__in=one_per_item.values()).update(annotator=users[op[2]])
        elif kind == "drop_item":
            Item.objects.filter(pk=items[op[1]].pk).delete()
        elif kind == "drop_user":
            users[op[1] % 3].delete()
            users[op[1] % 3] = UserFactory()
        else:
            Study.objects.filter(pk=studies[op[1] % 2].pk).delete()
        assert _counters() == _recount(), op


def test_recount_progress_mends_counters_written_around_the_triggers() -> None:
    """Rows loaded with the triggers off (a data-only restore) leave the counters behind;
    ``manage.py recount_progress`` recounts them from the assignments and says how many
    annotators' counts it changed."""
    study, (first, second) = running_study(n_items=6, n_annotators=2)
    Assignment.objects.filter(annotator=first, position__lt=2).update(completed_at=timezone.now())
    AnnotatorProgress.objects.filter(annotator=first).update(total=99, done=0)
    AnnotatorProgress.objects.filter(annotator=second).delete()
    AnnotatorProgress.objects.create(study=StudyFactory(), annotator=second, total=3, done=1)
    out = io.StringIO()
    call_command("recount_progress", stdout=out)
    assert _counters() == _recount()
    assert annotator_progress(annotator=first, study=study)["done"] == 2
    assert "3 annotators' counts were wrong" in out.getvalue()
    out = io.StringIO()
    call_command("recount_progress", stdout=out)
    assert "0 annotators' counts were wrong" in out.getvalue()
