from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    label = "analytics"
    verbose_name = "Quality analytics"

    def ready(self) -> None:
        """Register the live quality of pairwise and continuous questions."""
        from analytics import quality_kinds  # noqa: F401  (registers on import)
