from django.apps import AppConfig


class StudiesConfig(AppConfig):
    name = "apps.studies"
    label = "studies"
