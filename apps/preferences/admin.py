"""Pairwise judgements in the admin, read-only (:class:`core.admin.ReadOnlyAdmin`)."""

from django.contrib import admin

from apps.preferences.models import Judgement
from core.admin import ReadOnlyAdmin


@admin.register(Judgement)
class JudgementAdmin(ReadOnlyAdmin):
    list_display = ("id", "question", "annotator", "outcome", "created_at")
    list_select_related = ("question", "annotator")
