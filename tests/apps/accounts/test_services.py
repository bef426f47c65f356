"""Account services: invitations addressed to a username, and revoking API tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from knox.models import AuthToken

from apps.accounts.services import api_tokens_revoke, invitation_address, invitation_join
from apps.studies.models import Membership
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_an_inactive_or_unknown_username_gets_an_invitation_nobody_can_accept(study_setup):
    study, _ = study_setup
    inactive = UserFactory(is_active=False)
    for username in (inactive.username, "ghost"):
        invitation = invitation_address(study=study, created_by=study.created_by, username=username)
        assert invitation.invitee is None
        assert invitation.invitee_username == username
        with pytest.raises(ValidationError):
            invitation_join(invitation_id=invitation.pk, user=inactive)
    assert not study.memberships.filter(user=inactive).exists()


def test_another_role_is_another_invitation_and_expired_ones_cannot_be_joined(study_setup):
    study, _ = study_setup
    user = UserFactory()
    as_annotator = invitation_address(
        study=study, created_by=study.created_by, username=user.username
    )
    as_manager = invitation_address(
        study=study, created_by=study.created_by, username=user.username, role="manager"
    )
    assert as_annotator.pk != as_manager.pk
    as_annotator.expires_at = timezone.now() - timedelta(seconds=1)
    as_annotator.save()
    with pytest.raises(ValidationError):
        invitation_join(invitation_id=as_annotator.pk, user=user)
    invitation_join(invitation_id=as_manager.pk, user=user)
    assert study.memberships.get(user=user).role == Membership.Role.MANAGER
    with pytest.raises(ValidationError, match="already a manager"):
        invitation_address(study=study, created_by=study.created_by, username=user.username)


def test_revoking_touches_only_the_users_own_tokens(db):
    user, other = UserFactory(), UserFactory()
    mine = [AuthToken.objects.create(user=user)[0] for _ in range(2)]
    theirs, _ = AuthToken.objects.create(user=other)
    assert api_tokens_revoke(user=user, keys=[theirs.token_key]) == 0
    assert api_tokens_revoke(user=user, keys=[mine[0].token_key]) == 1
    assert api_tokens_revoke(user=user) == 1
    assert list(AuthToken.objects.all()) == [theirs]
