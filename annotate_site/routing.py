"""Websocket URL routes of every app (the live dashboard adds its consumer here)."""

websocket_urlpatterns: list = []
