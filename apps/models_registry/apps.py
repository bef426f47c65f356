from django.apps import AppConfig


class ModelsRegistryConfig(AppConfig):
    name = "apps.models_registry"
    label = "models_registry"
    verbose_name = "Model registry"
