"""Studies, their questions and members in the admin, read-only
(:class:`core.admin.ReadOnlyAdmin`)."""

from django.contrib import admin

from apps.studies.models import Membership, Question, Study
from core.admin import ReadOnlyAdmin


@admin.register(Study)
class StudyAdmin(ReadOnlyAdmin):
    list_display = ("name", "status", "created_by", "created_at")
    list_filter = ("status",)
    search_fields = ("name",)


@admin.register(Question)
class QuestionAdmin(ReadOnlyAdmin):
    list_display = ("key", "prompt", "kind", "study")
    list_filter = ("kind",)
    search_fields = ("key", "prompt", "study__name")


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("user", "study", "role")
    list_filter = ("role",)
    search_fields = ("user__username", "study__name")
