"""One-time invitation links: a manager invites without a mail server."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.studies.models import Membership, Study


class Invitation(models.Model):
    """An invitation to join a study, used once.

    Either a one-time link that makes whoever opens it a member (only the SHA-256 of its token
    is stored; the link is shown once, when it is made), or an invitation addressed to a
    username, which that account sees on its home page and accepts while signed in. An
    invitation to a username that no account has is stored all the same (``invitee`` empty),
    so that the manager who made it learns nothing about which usernames exist; it expires
    unused.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(
        max_length=10, choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR
    )
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    invitee_username = models.CharField(max_length=150, blank=True)
    invitee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="invitations_received",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # a manager withdrew it before anyone used it: the link then says so
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="invitation_is_a_link_or_addressed",
                condition=models.Q(token_hash__isnull=False, invitee_username="")
                | models.Q(token_hash__isnull=True, invitee_username__gt=""),
            )
        ]

    def __str__(self) -> str:
        return f"invitation to {self.study} ({self.role})"

    @property
    def is_usable(self) -> bool:
        return self.used_at is None and self.revoked_at is None and self.expires_at > timezone.now()
