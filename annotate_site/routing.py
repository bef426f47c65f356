"""Websocket URL routes of every app (the live dashboard adds its consumer here)."""

from django.urls import path

from analytics.consumers import DashboardConsumer

websocket_urlpatterns: list = [
    path("ws/studies/<int:study_id>/quality/", DashboardConsumer.as_asgi()),
]
