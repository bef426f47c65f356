"""The flush that empties the test database after each transactional test (tests/conftest.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db.models.signals import post_migrate

from apps.studies.models import Study
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_a_flush_keeps_the_rows_only_migrate_writes_and_empties_the_rest():
    permission = Permission.objects.get(codename="manage_studies")
    kinds = ContentType.objects.count()
    user = UserFactory()
    user.user_permissions.add(permission)
    heard: list[dict] = []

    def receiver(**kwargs: object) -> None:
        heard.append(kwargs)

    post_migrate.connect(receiver)
    try:
        call_command("flush", verbosity=0, interactive=False)
    finally:
        post_migrate.disconnect(receiver)
    assert heard == []  # the handlers that would write the same rows again did not run
    assert Permission.objects.get(codename="manage_studies").pk == permission.pk
    assert ContentType.objects.count() == kinds
    assert ContentType.objects.get_for_model(Study).pk == permission.content_type_id
    assert not type(user).objects.exists()
    assert not Permission.user_set.through.objects.exists()
