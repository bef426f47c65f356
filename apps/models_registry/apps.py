from django.apps import AppConfig


class ModelsRegistryConfig(AppConfig):
    name = "apps.models_registry"
    label = "models_registry"
    verbose_name = "Model registry"

    def ready(self) -> None:
        """Evaluate runs and call model endpoints off the request (the quality pipeline's job
        modes and sweep), and re-evaluate a question's runs when its answers change (throttled
        there)."""
        from analytics.pipeline import AFTER_UPDATE_HOOKS, JOBS, SWEEP_HOOKS
        from apps.models_registry.services import (
            ENDPOINT_JOB,
            EVALUATION_JOB,
            model_endpoint_predict_pending,
            model_endpoints_sweep,
            model_runs_evaluate_pending,
            model_runs_recompute,
            model_runs_sweep,
        )

        JOBS[EVALUATION_JOB] = lambda question_id: model_runs_evaluate_pending(
            question_id=question_id
        )
        JOBS[ENDPOINT_JOB] = lambda endpoint_id: model_endpoint_predict_pending(
            endpoint_id=endpoint_id
        )
        SWEEP_HOOKS.append(model_runs_sweep)
        SWEEP_HOOKS.append(model_endpoints_sweep)

        def after_update(question_id: int) -> None:
            model_runs_recompute(question_id=question_id)

        AFTER_UPDATE_HOOKS.append(after_update)
