from django.apps import AppConfig


class ContinuousConfig(AppConfig):
    name = "apps.continuous"
    label = "continuous"
    verbose_name = "Continuous traces"
