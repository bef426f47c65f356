from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "apps.annotations"
    label = "annotations"
