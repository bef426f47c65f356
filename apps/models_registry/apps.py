from django.apps import AppConfig


class ModelsRegistryConfig(AppConfig):
    name = "apps.models_registry"
    label = "models_registry"
    verbose_name = "Model registry"

    def ready(self) -> None:
        """Re-evaluate a question's model runs when its answers change (throttled there)."""
        from analytics.pipeline import AFTER_UPDATE_HOOKS
        from apps.models_registry.services import model_runs_recompute

        AFTER_UPDATE_HOOKS.append(lambda question_id: model_runs_recompute(question_id=question_id))
