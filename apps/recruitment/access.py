"""Whether a recruited participant may answer now: the one check every answer path makes."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.recruitment.models import Participant
from apps.recruitment.selectors import package_deadline
from apps.studies.models import Study
from core.types import Account


def participant_check_answering(*, user: Account, study: Study) -> None:
    """Refuse the answers of a recruited participant of ``study`` outside their open package.

    Every answer path calls it (the queue and the API through ``assignment_check_annotator``,
    traces, pairwise judgements), so a participant with an API token is held to the same
    deadline as the page: between the deadline and the release of the package (which happens
    on the next visit of anyone to the study's pages) nothing more is accepted. Staff
    annotators pass. ``user.participation`` and ``study.recruitment`` are read from the
    objects when selected with them (no query then).
    """
    participant = getattr(user, "participation", None)
    if participant is None or participant.study_id != study.pk:
        return
    if participant.status != Participant.Status.WORKING:
        raise ValidationError(
            {"assignment": "Your package is closed; answers are no longer accepted."}
        )
    deadline = package_deadline(participant, recruitment=study.recruitment)
    if deadline is not None and timezone.now() > deadline:
        raise ValidationError(
            {
                "assignment": f"Your time for this package ended at {deadline:%H:%M} UTC; "
                "answers are no longer accepted."
            }
        )
