from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    label = "analytics"
    verbose_name = "Quality analytics"
