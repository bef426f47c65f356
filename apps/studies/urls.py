"""Page URLs of the studies app."""

from django.urls import path  # noqa: F401

app_name = "studies"
urlpatterns: list = []
