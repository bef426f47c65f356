"""Page URLs of the items app."""

from django.urls import path  # noqa: F401

app_name = "items"
urlpatterns: list = []
