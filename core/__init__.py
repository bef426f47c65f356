"""Shared web helpers of every app: form habits, safe Markdown, the CSV writer.

The bottom layer of the project: it imports Django and third-party packages only, never
``apps``, ``analytics`` or ``annotate_site``, so every app may use it without a cycle.
"""
