from django.apps import AppConfig


class ArenaConfig(AppConfig):
    name = "apps.arena"
    label = "arena"
    verbose_name = "Model arena"
