from django.apps import AppConfig


class AdjudicationConfig(AppConfig):
    name = "apps.adjudication"
    label = "adjudication"
    verbose_name = "Adjudication and aggregated labels"

    def ready(self) -> None:
        """Retrain a question's disagreement forecast after its quality updates (off the
        request path; unchanged training data is not retrained)."""
        from analytics.pipeline import AFTER_UPDATE_HOOKS
        from apps.adjudication.services import disagreement_forecast_after_update

        AFTER_UPDATE_HOOKS.append(disagreement_forecast_after_update)
