"""Serializers of assignments, annotations and their revisions."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from rest_framework import serializers

from apps.annotations.exporting import CONTENT_TYPES
from apps.annotations.models import Annotation, Assignment, Revision
from apps.annotations.selectors import assignment_to_answer, assignments_to_answer
from apps.exchange.huggingface import LICENSES
from apps.exchange.identity import IDENTITIES, USERNAMES
from apps.items.api.serializers import ItemSerializer
from apps.studies.selectors import study_questions_cached
from core.limits import id_filter_field, time_spent_field


class OwnAssignmentField(serializers.PrimaryKeyRelatedField):
    """The id of one of the requesting annotator's assignments (of the ``study`` in context).

    Anyone else's assignment reads as "does not exist": ids never reveal other people's work.
    It comes with what the answer check reads (one query for both).
    """

    def get_queryset(self) -> Any:
        assignments = assignments_to_answer().filter(annotator=self.context["request"].user)
        study = self.context.get("study")
        if study is not None:
            assignments = assignments.filter(study=study)
        return assignments

    def to_internal_value(self, data: Any) -> Any:
        """One read from SQL built once (:func:`~apps.annotations.selectors.
        assignment_to_answer`); the errors are the field's own."""
        study = self.context.get("study")
        if isinstance(data, bool) or not isinstance(data, int | str):
            return super().to_internal_value(data)
        try:
            pk = int(data)
        except ValueError:
            self.fail("incorrect_type", data_type=type(data).__name__)
        found = assignment_to_answer(
            pk=pk,
            annotator=self.context["request"].user.pk,
            study=None if study is None else study.pk,
        )
        if found is None:
            self.fail("does_not_exist", pk_value=data)
        return found


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    percent = serializers.IntegerField()


class QueueEntrySerializer(serializers.Serializer):
    """An assignment to work on, with the item to show and the annotator's progress."""

    assignment = serializers.IntegerField(source="assignment.pk")
    round = serializers.IntegerField(source="assignment.round", help_text="2 = a repeat.")
    item = ItemSerializer(source="assignment.item")
    questions = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys of the questions to answer about this item: the queue questions whose "
        "scope covers it (an answer to another is refused).",
    )
    progress = ProgressSerializer()


class SkipSerializer(serializers.Serializer):
    assignment = OwnAssignmentField(queryset=Assignment.objects.all())


class UndoSerializer(serializers.Serializer):
    idempotency_key = serializers.UUIDField(
        help_text="New per undo; resending it undoes nothing more."
    )


class AnnotationSubmitSerializer(serializers.Serializer):
    assignment = OwnAssignmentField(queryset=Assignment.objects.all())
    answers = serializers.DictField(
        child=serializers.JSONField(),
        help_text='Question key -> answer; for a categorical question the label key ("joy") '
        'or {"label": "joy"}.',
    )
    idempotency_key = serializers.UUIDField(
        help_text="Made by the client once per answer it means to give: resending the same key "
        "(a retry, a double click) stores nothing new and returns the same revisions."
    )
    time_spent_ms = time_spent_field()
    include_next = serializers.BooleanField(
        default=False,
        help_text="true: the response also holds your next assignment in this study (`next`), "
        "so one request per answer is enough.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Turn the answers' question keys into the assignment's study's questions (with the
        labels and the adaptive-overlap rule the submit reads; cached per process)."""
        study = attrs["assignment"].study  # read with the assignment: its questions_version
        questions = {q.key: q for q in study_questions_cached(study=study)}
        unknown = [key for key in attrs["answers"] if key not in questions]
        if unknown:
            raise serializers.ValidationError(
                {"answers": [f"{key!r} is not a question of this study." for key in unknown]}
            )
        attrs["answers"] = {questions[key]: value for key, value in attrs["answers"].items()}
        return attrs


class RevisionSerializer(serializers.ModelSerializer):
    question = serializers.SlugRelatedField(
        source="annotation.question", slug_field="key", read_only=True
    )
    label = serializers.SlugRelatedField(slug_field="key", read_only=True)

    class Meta:
        model = Revision
        fields = [
            "id",
            "annotation",
            "question",
            "number",
            "value",
            "label",
            "time_spent_ms",
            "idempotency_key",
            "source",
            "created_at",
        ]
        read_only_fields = fields


class SubmissionSerializer(serializers.Serializer):
    revisions = RevisionSerializer(many=True, help_text="One per answered question.")
    next = QueueEntrySerializer(
        required=False,
        allow_null=True,
        help_text="Only with `include_next`: your next assignment in this study, as "
        "`GET /api/studies/{id}/next/` gives it; null when nothing is left.",
    )

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        data = super().to_representation(instance)
        if "next" not in instance:  # not asked for: absent (null means nothing is left)
            del data["next"]
        return data


def submission_data(
    submission: dict[str, Any], *, request: HttpRequest | None = None
) -> dict[str, Any]:
    """``SubmissionSerializer(submission, context={"request": request}).data``, built
    directly: the answer's response, on the annotator's hot path.

    DRF builds a ``ModelSerializer``'s fields anew for every instance; for the revisions and
    the next item that is about half a millisecond of CPU per answer, a tenth of its cost.
    The serializers stay the schema (``tests/api/test_hot_paths.py`` checks that both give
    the same data)."""
    data: dict[str, Any] = {
        "revisions": [_revision_data(revision) for revision in submission["revisions"]]
    }
    if "next" in submission:
        entry = submission["next"]
        data["next"] = None if entry is None else queue_entry_data(entry, request=request)
    return data


def queue_entry_data(entry: dict[str, Any], *, request: HttpRequest | None) -> dict[str, Any]:
    """``QueueEntrySerializer(entry, context={"request": request}).data``, built directly."""
    assignment, progress = entry["assignment"], entry["progress"]
    item = assignment.item
    media = None
    if item.media:
        media = request.build_absolute_uri(item.media_url) if request else item.media_url
    return {
        "assignment": assignment.pk,
        "round": assignment.round,
        "item": {
            "id": item.pk,
            "kind": item.kind,
            "text": item.text,
            "url": item.url,
            "media": media,
        },
        "questions": list(entry["questions"]),
        "progress": {
            "done": progress["done"],
            "total": progress["total"],
            "percent": progress["percent"],
        },
    }


def _revision_data(revision: Revision) -> dict[str, Any]:
    """``RevisionSerializer(revision).data``, built directly."""
    return {
        "id": revision.pk,
        "annotation": revision.annotation_id,
        "question": revision.annotation.question.key,
        "number": revision.number,
        "value": revision.value,
        "label": revision.label.key if revision.label_id is not None else None,
        "time_spent_ms": revision.time_spent_ms,
        "idempotency_key": str(revision.idempotency_key),
        "source": revision.source,
        "created_at": _DATETIME.to_representation(revision.created_at),
    }


_DATETIME = serializers.DateTimeField()


class AnnotationSerializer(serializers.ModelSerializer):
    """An annotation with its current revision (``value`` null: retracted by an undo)."""

    study = serializers.IntegerField(source="question.study_id", read_only=True)
    question_key = serializers.CharField(source="question.key", read_only=True)
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)
    annotator_username = serializers.CharField(source="annotator.username", read_only=True)
    value = serializers.JSONField(source="current_revision.value", read_only=True)
    label = serializers.SlugRelatedField(
        source="current_revision.label", slug_field="key", read_only=True
    )
    revision = serializers.IntegerField(source="current_revision.number", read_only=True)
    time_spent_ms = serializers.IntegerField(
        source="current_revision.time_spent_ms", read_only=True, allow_null=True
    )
    updated_at = serializers.DateTimeField(source="current_revision.created_at", read_only=True)

    class Meta:
        model = Annotation
        fields = [
            "id",
            "study",
            "question",
            "question_key",
            "item",
            "item_external_id",
            "annotator",
            "annotator_username",
            "round",
            "value",
            "label",
            "revision",
            "time_spent_ms",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class AnnotationFilterSerializer(serializers.Serializer):
    """Query filters of the annotation list (each narrows; all are optional)."""

    study = id_filter_field("A study id.")
    question = id_filter_field("A question id.")
    annotator = id_filter_field("An annotator's user id.")


class ExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=list(CONTENT_TYPES), default="csv")
    history = serializers.BooleanField(
        default=False, help_text="1: every revision (the audit trail); 0: current answers."
    )
    curated = serializers.BooleanField(
        default=False,
        help_text="1: leave out every row of the annotators excluded on the quality dashboard.",
    )
    annotators = serializers.ChoiceField(
        choices=list(IDENTITIES),
        default=USERNAMES,
        help_text="How annotators are named: usernames, or pseudonyms (stable per study, "
        "keyed HMAC of the username) for sharing.",
    )


class HuggingFaceQuerySerializer(serializers.Serializer):
    curated = serializers.BooleanField(
        default=True, help_text="1 (default): leave out the excluded annotators."
    )
    annotators = serializers.ChoiceField(
        choices=list(IDENTITIES),
        default=USERNAMES,
        help_text="How annotators are named: usernames, or stable per-study pseudonyms.",
    )
    license = serializers.ChoiceField(
        choices=list(LICENSES), default="other", help_text="The licence written in the card."
    )


class ProvenanceStudySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()


class ProvenanceSoftwareSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField(help_text='The installed package\'s version, or "unknown".')
    git_commit = serializers.CharField(allow_null=True, help_text="Null if .git is unreadable.")


class ProvenanceOptionsSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=list(CONTENT_TYPES))
    curated = serializers.BooleanField()
    include_history = serializers.BooleanField()
    annotators = serializers.ChoiceField(choices=list(IDENTITIES))


class ProvenanceFileSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The file name the download is offered under.")
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.IntegerField(help_text="Data rows (CSV: without the header).")
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField(help_text="Hex SHA-256 of the exact bytes downloaded.")


class ProvenanceCountsSerializer(serializers.Serializer):
    rows_total = serializers.IntegerField(help_text="Rows of the same export, uncurated.")
    rows_exported = serializers.IntegerField()
    annotators_total = serializers.IntegerField(help_text="Annotators with rows, uncurated.")
    annotators_kept = serializers.IntegerField(help_text="Annotators with rows in the file.")


class ProvenanceFlagSerializer(serializers.Serializer):
    annotator = serializers.CharField(allow_null=True, help_text="Null: the whole question.")
    question = serializers.CharField(help_text="The question's key.")
    indicator = serializers.CharField()
    reason = serializers.CharField()
    figures = serializers.JSONField(help_text="The indicator's value, median, z, evidence ...")
    status = serializers.CharField(help_text="open, confirmed or dismissed.")
    active = serializers.BooleanField(help_text="Whether the latest figures still break the rule.")
    raised_at = serializers.CharField(help_text="UTC, ISO 8601.")


class ProvenanceExclusionSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    excluded_by = serializers.CharField()
    excluded_at = serializers.CharField(help_text="UTC, ISO 8601.")
    reason = serializers.CharField(allow_blank=True)
    applied = serializers.BooleanField(help_text="Whether this file leaves the annotator out.")
    rows_left_out = serializers.IntegerField()
    flags = ProvenanceFlagSerializer(many=True, help_text="Every flag of the annotator.")


class ProvenanceSerializer(serializers.Serializer):
    """What an export holds, what it leaves out and why, and the checksum of its file."""

    schema = serializers.CharField()
    study = ProvenanceStudySerializer()
    generated_at = serializers.CharField(help_text="UTC, ISO 8601.")
    software = ProvenanceSoftwareSerializer()
    options = ProvenanceOptionsSerializer()
    file = ProvenanceFileSerializer()
    counts = ProvenanceCountsSerializer()
    exclusions = ProvenanceExclusionSerializer(many=True)
    open_flags = ProvenanceFlagSerializer(
        many=True, help_text="Open flags of the annotators kept and of whole questions."
    )
