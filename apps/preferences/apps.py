from django.apps import AppConfig


class PreferencesConfig(AppConfig):
    name = "apps.preferences"
    label = "preferences"
    verbose_name = "Pairwise preferences"
