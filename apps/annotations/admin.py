"""Answers in the admin, read-only (:class:`core.admin.ReadOnlyAdmin`): an answer is an
annotation with its append-only revisions."""

from django.contrib import admin

from apps.annotations.models import Annotation, Revision
from core.admin import ReadOnlyAdmin


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = ("id", "question", "item", "annotator", "round", "current_revision")
    search_fields = ("item__external_id", "annotator__username", "question__key")
    list_select_related = ("question", "item", "annotator", "current_revision")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "annotation", "number", "source", "created_at")
    list_filter = ("source",)
