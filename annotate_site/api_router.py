"""The one DRF router of the studio; each app registers its ViewSets here."""

from rest_framework.routers import DefaultRouter

router = DefaultRouter()
