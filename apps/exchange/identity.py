"""Annotator identity in exports: usernames, or stable per-study pseudonyms for sharing.

A pseudonym is ``annotator-`` and the first 16 hex digits of HMAC-SHA256 of the username, keyed
by the site's ``SECRET_KEY`` and the study id (Django's ``salted_hmac``). The same annotator has
the same pseudonym in every export of one study (so files can be joined), a different one in
another study (so studies cannot be linked), and no one without the secret key can turn a
pseudonym back into a username (or test a guess). Rotating ``SECRET_KEY`` changes them all.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.utils.crypto import salted_hmac

USERNAMES = "usernames"
PSEUDONYMS = "pseudonyms"
IDENTITIES = (USERNAMES, PSEUDONYMS)
PREFIX = "annotator-"
DIGITS = 16  # 64 bits: no collision in any study of realistic size


def annotator_names(*, study_id: int, identity: str = USERNAMES) -> Callable[[str], str]:
    """How an export names annotators: ``username -> username`` or ``username -> pseudonym``.

    Examples
    --------
    >>> name = annotator_names(study_id=1, identity="usernames")
    >>> name("ann1")
    'ann1'
    """
    if identity == USERNAMES:
        return same_name
    if identity != PSEUDONYMS:
        raise ValueError(f"Unknown annotator identity {identity!r}; use {' or '.join(IDENTITIES)}.")
    salt = f"annotation-studio.exports.pseudonym.study-{study_id}"

    @cache
    def pseudonym(username: str) -> str:
        return PREFIX + salted_hmac(salt, username, algorithm="sha256").hexdigest()[:DIGITS]

    return pseudonym


def same_name(username: str) -> str:
    """The username itself (annotators named by username)."""
    return username
