"""Every write to studies, questions, labels and memberships."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, F, OuterRef

from apps.studies.kinds import clean_question_settings, question_kind
from apps.studies.models import Label, Membership, Question, Study
from apps.studies.scope import clean_scope
from apps.studies.selectors import label_answer_counts, question_item_filter
from core.limits import labels_count_check
from core.types import Account

STUDY_FIELDS = ("name", "instructions", "overlap", "repeat_rate")
QUESTION_FIELDS = (
    "key",
    "prompt",
    "kind",
    "ordered",
    "position",
    "settings",
    "scope",
    "instructions",
)
LABEL_FIELDS = ("key", "name", "shortcut", "position", "valence", "arousal")


@transaction.atomic
def study_create(
    *,
    creator: Account,
    name: str,
    instructions: str = "",
    overlap: int | None = None,
    repeat_rate: float = 0.0,
) -> Study:
    """Create a draft study; its creator becomes its first manager."""
    study = Study(
        name=name,
        instructions=instructions,
        overlap=overlap,
        repeat_rate=repeat_rate,
        created_by=creator,
    )
    study.full_clean()
    study.save()
    Membership.objects.create(study=study, user=creator, role=Membership.Role.MANAGER)
    return study


@transaction.atomic
def study_update(*, study: Study, **fields: Any) -> Study:
    """Change a study's name, instructions, overlap or repeat rate."""
    unknown = set(fields) - set(STUDY_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown study fields: {', '.join(sorted(unknown))}")
    for name, value in fields.items():
        setattr(study, name, value)
    study.full_clean()
    # only these: a full save would write back a questions_version read before a question
    # changed, and a cache keyed on it could then serve the old questions
    study.save(update_fields=[*fields, "updated_at"])
    return study


def study_questions_changed(*, study_id: int | None = None, question_id: int | None = None) -> int:
    """Raise the ``questions_version`` of the study (given, or of the question given): every
    process's cache of its questions (:func:`apps.studies.selectors.study_questions_cached`)
    reads them again. Called on every save and delete of a question, a label or an
    adaptive-overlap rule (receivers connected in the apps' ``ready()``), in the writer's
    transaction; a bulk ``update()`` of such rows must call it itself. Returns the rows
    updated (0 once the study is deleted)."""
    studies = Study.objects.all()
    if study_id is not None:
        studies = studies.filter(pk=study_id)
    elif question_id is not None:
        studies = studies.filter(pk__in=Question.objects.filter(pk=question_id).values("study_id"))
    else:
        raise ValueError("Give study_id or question_id.")
    return studies.update(questions_version=F("questions_version") + 1)


@transaction.atomic
def study_set_status(*, study: Study, status: str) -> Study:
    """Open, pause back to draft, or close a study. Opening fills the annotators' queues."""
    from apps.annotations.services import assignments_fill

    if status not in Study.Status.values:
        raise ValidationError({"status": f"Unknown status {status!r}."})
    if status == Study.Status.RUNNING:
        if not study.questions.exists():
            raise ValidationError({"status": "Add at least one question before opening."})
        if not study.items.exists():
            raise ValidationError({"status": "Import items before opening the study."})
    study.status = status
    study.save(update_fields=["status", "updated_at"])
    if status == Study.Status.RUNNING:
        assignments_fill(study=study)
    return study


def _labels_validate(labels: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check a whole scale before anything is written: known fields, unique keys and
    shortcuts; every problem keyed ``labels[i]`` (the row it is on)."""
    labels_count_check(len(labels))
    cleaned: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {}
    first: dict[tuple[str, str], int] = {}
    for position, data in enumerate(labels):
        unknown = set(data) - set(LABEL_FIELDS)
        if unknown:
            raise ValidationError(f"Unknown label fields: {', '.join(sorted(unknown))}")
        data = {"position": position, **data}
        for name in ("key", "name", "shortcut"):
            data[name] = data.get(name) or ""
        row = errors.setdefault(f"labels[{position}]", [])
        if not data["key"]:
            row.append("A label needs a key.")
        for name in ("key", "shortcut"):
            seen = (name, data[name].lower())
            if data[name] and seen in first:
                row.append(
                    f"The {name} {data[name]!r} is already label {first[seen] + 1}'s; "
                    f"each label needs its own."
                )
            first.setdefault(seen, position)
        data["name"] = data["name"] or data["key"]
        cleaned.append(data)
    if errors := {key: messages for key, messages in errors.items() if messages}:
        raise ValidationError(errors)
    return cleaned


def _labels_write(*, question: Question, labels: Sequence[dict[str, Any]]) -> None:
    """Create or update labels by key. Answers keep their meaning: a label that answers use
    cannot be removed, nor the labels of an answered ordered scale reordered."""
    cleaned = _labels_validate(labels)
    keys = [data["key"] for data in cleaned]
    used = label_answer_counts(question=question)
    removed = [
        f"{label.name!r} ({label.key}) has {used[label.key]} answer"
        f"{'s' if used[label.key] != 1 else ''}"
        for label in question.labels.exclude(key__in=keys)
        if label.key in used
    ]
    if removed:
        raise ValidationError(
            {"labels": [f"{text}: keep it (rename it if you wish)." for text in removed]}
        )
    if question.ordered and used:
        before = [key for key in question.labels.values_list("key", flat=True) if key in keys]
        if before != [key for key in keys if key in before]:
            raise ValidationError(
                {
                    "labels": "The scale is ordered and answered: its labels must stay in the "
                    f"order {', '.join(before)} (new ones may go anywhere), or the answers "
                    "would change meaning."
                }
            )
    question.labels.exclude(key__in=keys).delete()
    question.labels.update(shortcut="")  # lets labels swap shortcuts inside this transaction
    # (no study_questions_changed here: every label below is saved, and each save calls it)
    existing = {label.key: label for label in question.labels.all()}
    for position, data in enumerate(cleaned):
        label = existing.get(data["key"]) or Label(question=question)
        for name, value in data.items():
            setattr(label, name, value)
        try:
            label.full_clean(validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            raise ValidationError({f"labels[{position}]": exc.messages}) from exc
        label.save()


@transaction.atomic
def question_create(
    *,
    study: Study,
    key: str,
    prompt: str,
    kind: str = Question.Kind.CATEGORICAL,
    ordered: bool = False,
    position: int | None = None,
    settings: dict[str, Any] | None = None,
    labels: Sequence[dict[str, Any]] = (),
    scope: dict[str, Any] | None = None,
    instructions: str = "",
) -> Question:
    """Add a question (and, for categorical questions, its labels) to a study.

    ``scope`` chooses the items it applies to (:mod:`apps.studies.scope`; empty: every item);
    ``instructions`` (Markdown) are shown on its pages instead of the study's.
    """
    if position is None:
        position = study.questions.count()
    question = Question(
        study=study,
        key=key,
        prompt=prompt,
        kind=kind,
        ordered=ordered,
        position=position,
        settings=clean_question_settings(kind, settings),
        scope=clean_scope(scope),
        instructions=instructions or "",
    )
    question.full_clean()
    question.save()
    if problems := question_kind(kind).settings_problems(question):
        raise ValidationError(problems)
    _queue_order_follow(question=question, before={})
    if question_kind(kind).has_labels:
        if len(labels) < 2:
            raise ValidationError({"labels": "A categorical question needs at least two labels."})
        _labels_write(question=question, labels=labels)
    return question


@transaction.atomic
def question_update(
    *, question: Question, labels: Sequence[dict[str, Any]] | None = None, **fields: Any
) -> Question:
    """Edit a question; ``labels`` (if given) replaces the scale, keeping labels by key."""
    unknown = set(fields) - set(QUESTION_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown question fields: {', '.join(sorted(unknown))}")
    kind = question_kind(question.kind)
    answered = kind.answered(question)
    if "kind" in fields and fields["kind"] != question.kind and answered:
        raise ValidationError({"kind": "The kind of an answered question cannot change."})
    before = clean_question_settings(question.kind, question.settings)  # defaults filled in
    for name, value in fields.items():
        setattr(question, name, value)
    question.settings = clean_question_settings(question.kind, question.settings)
    question.scope = clean_scope(question.scope)
    question.instructions = question.instructions or ""
    if answered:
        _scope_check_answers(question)
    if answered:  # (then the kind is unchanged)
        changed = [name for name in kind.answer_settings if before[name] != question.settings[name]]
        if changed:
            raise ValidationError(
                {
                    name: f"The answers were given with {name} = {before[name]!r}: it "
                    "cannot change once the question has answers."
                    for name in changed
                }
            )
    if problems := question_kind(question.kind).settings_problems(question):
        raise ValidationError(problems)
    question.full_clean()
    question.save()
    if "scope" in fields and question.study.is_running:  # a wider scope: the new items' work
        from apps.annotations.services import assignments_fill

        assignments_fill(study=question.study)
    _queue_order_follow(question=question, before=before, scope="scope" in fields)
    if labels is not None and question_kind(question.kind).has_labels:
        if len(labels) < 2:
            raise ValidationError({"labels": "A categorical question needs at least two labels."})
        _labels_write(question=question, labels=labels)
    return question


def _queue_order_follow(*, question: Question, before: dict[str, Any], scope: bool = False) -> None:
    """Ask for the study's queue order to be applied again (after the commit, off the request:
    :mod:`apps.annotations.ordering`) when the question asks or asked for an active order."""
    from apps.annotations.ordering import SETTINGS, queue_order_request

    if any(key in before or key in question.settings for key in SETTINGS) and (
        scope or any(before.get(key) != question.settings.get(key) for key in SETTINGS)
    ):
        queue_order_request(study_id=question.study_id)


def _scope_check_answers(question: Question) -> None:
    """Refuse a scope that leaves out items the question already has answers about: the
    answers would drop out of its analysis and exports unannounced. (Answers are never
    deleted; a question asked about the wrong items is best replaced by a new one.)"""
    from apps.annotations.models import Annotation
    from apps.items.models import Item
    from apps.preferences.models import Judgement

    inside = Item.objects.filter(question_item_filter(question), study_id=question.study_id)
    answered = Annotation.objects.filter(
        question=question, current_revision__value__isnull=False
    ).exclude(item__in=inside)
    judged = (
        Judgement.objects.filter(question=question)
        .kept()
        .exclude(item_a__in=inside, item_b__in=inside)
    )
    outside = set(answered.values_list("item__external_id", flat=True)[:6])
    outside |= set(judged.values_list("item_a__external_id", flat=True)[:6])
    outside |= set(judged.values_list("item_b__external_id", flat=True)[:6])
    outside -= set(inside.filter(external_id__in=outside).values_list("external_id", flat=True))
    if outside:
        names = ", ".join(sorted(outside)[:5]) + (" and more" if len(outside) > 5 else "")
        raise ValidationError(
            {
                "scope": "This scope leaves out items the question already has answers "
                f"about ({names}); widen it to include them, or add a new question."
            }
        )


@transaction.atomic
def membership_add(
    *, study: Study, user: Account, role: str, change_role: bool = False
) -> Membership:
    """Give ``user`` a role in ``study``; annotators of a running study get work at once.

    Adding a member again with the same role changes nothing. A different role is refused
    unless ``change_role`` says so, so that a manager is never demoted by accident.
    """
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    membership, created = Membership.objects.get_or_create(
        study=study, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        if not change_role:
            raise ValidationError(
                {"role": f"{user} is already {membership.get_role_display().lower()} here."}
            )
        membership.role = role
        membership.save(update_fields=["role"])
    if role == Membership.Role.ANNOTATOR and study.is_running:
        from apps.annotations.services import assignments_fill

        assignments_fill(study=study)
    return membership


@transaction.atomic
def membership_remove(*, study: Study, user: Account, by: Account) -> int:
    """Take ``user`` out of ``study``: they lose access at once; their answers stay, attributed.

    Their open assignments that hold no answer are withdrawn (nothing is left waiting for a
    non-member); the number withdrawn is returned. Refused with ``ValidationError`` for a
    non-member, for the remover themselves and for the study's last manager.
    """
    from apps.annotations.models import Annotation, Assignment

    membership = Membership.objects.select_for_update().filter(study=study, user=user).first()
    if membership is None:
        raise ValidationError({"user": f"{user} takes no part in this study."})
    if user == by:
        raise ValidationError({"user": "You cannot remove yourself; ask another manager."})
    managers = study.memberships.filter(role=Membership.Role.MANAGER)
    if membership.role == Membership.Role.MANAGER and managers.count() == 1:
        raise ValidationError({"user": "A study keeps at least one manager."})
    membership.delete()
    answered = Annotation.objects.filter(
        annotator=user, item=OuterRef("item"), round=OuterRef("round")
    )
    withdrawn, _ = (
        Assignment.objects.filter(study=study, annotator=user, completed_at__isnull=True)
        .exclude(Exists(answered))
        .delete()
    )
    return withdrawn
