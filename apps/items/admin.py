"""Items in the admin, read-only (:class:`core.admin.ReadOnlyAdmin`)."""

from django.contrib import admin

from apps.items.models import Item
from core.admin import ReadOnlyAdmin


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "kind", "study", "created_at")
    list_filter = ("kind",)
    search_fields = ("external_id", "text", "study__name")
