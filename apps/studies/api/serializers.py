"""Serializers of studies, questions and memberships: they parse and render, services decide.

Write serializers only check shapes and types; their ``validated_data`` goes to a service as
keyword arguments, and the service's ``ValidationError`` comes back as a 400.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.items.models import Item
from apps.studies.models import Label, Membership, Question, Study
from apps.studies.selectors import question_items
from apps.studies.services import QUESTION_FIELDS


class StudySerializer(serializers.ModelSerializer):
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, read_only=True, help_text="Your role in this study."
    )

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "instructions",
            "status",
            "overlap",
            "repeat_rate",
            "role",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class StudyWriteSerializer(serializers.ModelSerializer):
    class Meta:
        model = Study
        fields = ["name", "instructions", "overlap", "repeat_rate"]


class StudyStatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=Study.Status.choices,
        help_text="Opening (running) fills the annotators' queues; it needs questions and items.",
    )


class LabelSerializer(serializers.ModelSerializer):
    class Meta:
        model = Label
        fields = ["key", "name", "shortcut", "position", "valence", "arousal"]
        extra_kwargs = {
            "name": {"required": False, "help_text": "Defaults to the key."},
            "position": {"help_text": "Defaults to the label's place in the list."},
        }


class QuestionScopeSerializer(serializers.Serializer):
    """The items a question applies to (every part given must hold; ``{}``: every item)."""

    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=Item.Kind.choices),
        required=False,
        help_text="Item kinds (any of them).",
    )
    metadata = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text='Metadata column -> value or list of values (any of them), e.g. {"group": '
        '"sentence"}; compared as imported (CSV columns are text).',
    )
    items = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        help_text="Item external ids (any of them).",
    )

    def to_internal_value(self, data: Any) -> Any:
        """Unknown keys are refused, not dropped: a mistyped ``"kind"`` would otherwise
        silently mean every item."""
        if isinstance(data, dict) and (unknown := sorted(set(data) - set(self.fields))):
            raise serializers.ValidationError(
                f"Unknown scope keys: {', '.join(unknown)}; use {', '.join(self.fields)}."
            )
        return super().to_internal_value(data)


class QuestionSerializer(serializers.ModelSerializer):
    labels = LabelSerializer(many=True, read_only=True)
    scope = QuestionScopeSerializer(read_only=True)
    items_covered = serializers.SerializerMethodField(
        help_text="How many of the study's items the question applies to."
    )

    class Meta:
        model = Question
        fields = ["id", *QUESTION_FIELDS, "items_covered", "labels"]
        read_only_fields = fields

    def get_items_covered(self, question: Question) -> int:
        return question_items(question).count()


class QuestionWriteSerializer(serializers.ModelSerializer):
    labels = LabelSerializer(
        many=True,
        required=False,
        help_text="A categorical question's scale (two or more). On update it replaces the "
        "scale: labels are kept by key, and one that annotations use cannot be removed.",
    )

    scope = QuestionScopeSerializer(
        required=False,
        help_text="The items the question applies to: kinds, metadata tags and/or external "
        "ids; {} or absent: every item. A scope that leaves out answered items is refused.",
    )

    class Meta:
        model = Question
        fields = [*QUESTION_FIELDS, "labels"]
        extra_kwargs = {
            "position": {"help_text": "Defaults to after the last question."},
            "instructions": {"help_text": "Markdown shown on the question's pages."},
        }


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user", "username", "role", "joined_at"]
        read_only_fields = fields


class MembershipAddSerializer(serializers.Serializer):
    username = serializers.CharField(
        max_length=150,
        help_text="An existing account: it is invited, and joins only when it accepts.",
    )
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR
    )


class AnnotatorCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(
        write_only=True, trim_whitespace=False, style={"input_type": "password"}
    )


class QualityFigureSerializer(serializers.Serializer):
    """One figure with its 95 % interval (``None`` until computed) and its evidence."""

    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    evidence = serializers.IntegerField(allow_null=True)
    unit = serializers.CharField()
    effective_samples = serializers.FloatField(
        required=False, help_text="Independent samples the serially correlated samples are worth."
    )
    samples = serializers.IntegerField(required=False, help_text="Samples behind the figure.")
    computed_with = serializers.ChoiceField(
        choices=["intervals"],
        required=False,
        help_text=(
            "Present when the figure has no live value: it is computed with the intervals "
            "(its value is the interval's estimate, as of intervals.computed_at)."
        ),
    )


class AnnotatorQualitySerializer(serializers.Serializer):
    annotator = serializers.IntegerField(help_text="User id.")
    indicators = serializers.DictField(child=QualityFigureSerializer())


class IntervalsComputedSerializer(serializers.Serializer):
    computed_at = serializers.DateTimeField()
    n_answers = serializers.IntegerField(help_text="Answers the intervals rest on.")


class StudyFigureSerializer(QualityFigureSerializer):
    label = serializers.CharField(
        help_text="The figure's name, e.g. 'Krippendorff alpha (ordinal)'."
    )


class QualityRecordSerializer(serializers.Serializer):
    """A question's latest quality figures (schema of ``GET .../questions/{id}/quality/``)."""

    updated_at = serializers.DateTimeField()
    n_annotations = serializers.IntegerField()
    intervals = IntervalsComputedSerializer(allow_null=True)
    annotators = AnnotatorQualitySerializer(many=True)
    study = serializers.DictField(child=StudyFigureSerializer())
    flags = serializers.ListField(child=serializers.DictField())
