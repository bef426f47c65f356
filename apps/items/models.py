"""Items to annotate: text, image, audio or video, from an upload or a URL."""

from __future__ import annotations

from pathlib import PurePath

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db import models
from django.urls import reverse

from apps.studies.models import Study
from core.limits import MAX_ITEM_TEXT


class Item(models.Model):
    class Kind(models.TextChoices):
        TEXT = "text", "Text"
        IMAGE = "image", "Image"
        AUDIO = "audio", "Audio"
        VIDEO = "video", "Video"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=5, choices=Kind.choices, default=Kind.TEXT)
    text = models.TextField(blank=True, validators=[MaxLengthValidator(MAX_ITEM_TEXT)])
    media = models.FileField(upload_to="items/%Y/%m/", blank=True)
    url = models.URLField(max_length=1000, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order in the annotation queue.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "external_id"], name="item_external_id_unique_in_study"
            )
        ]
        indexes = [models.Index(fields=["study", "position", "id"], name="item_study_position")]

    def __str__(self) -> str:
        return self.external_id

    def clean(self) -> None:
        if self.kind == self.Kind.TEXT and not self.text:
            raise ValidationError({"text": "A text item needs its text."})
        if self.kind != self.Kind.TEXT and not (self.media or self.url):
            raise ValidationError({"url": f"A {self.kind} item needs an uploaded file or a URL."})

    @property
    def media_src(self) -> str:
        """Where the browser loads the stimulus from (upload first, then URL)."""
        return self.media_url or self.url

    @property
    def media_url(self) -> str:
        """The uploaded file's address: a view that serves it to the study's members only.

        The stored name is part of the address, so a replaced file gets a new one (no stale
        copies in caches). Empty without an upload.
        """
        if not self.media:
            return ""
        name = PurePath(self.media.name).name
        return reverse("items:media", args=[self.study_id, self.pk, name])
