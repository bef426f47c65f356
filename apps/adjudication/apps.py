from typing import Any

from django.apps import AppConfig


class AdjudicationConfig(AppConfig):
    name = "apps.adjudication"
    label = "adjudication"
    verbose_name = "Adjudication and aggregated labels"

    def ready(self) -> None:
        """Retrain a question's disagreement forecast after its quality updates (off the
        request path; unchanged training data is not retrained)."""
        from analytics.pipeline import AFTER_UPDATE_HOOKS, SWEEP_HOOKS
        from apps.adjudication.services import (
            disagreement_forecast_after_update,
            disagreement_forecasts_sweep,
        )

        AFTER_UPDATE_HOOKS.append(disagreement_forecast_after_update)
        SWEEP_HOOKS.append(disagreement_forecasts_sweep)  # retrains the throttle left behind

        # a rule is read with its question from the questions cache of the answer paths: a
        # rule set, changed or removed raises the study's questions_version
        from django.db.models.signals import post_delete, post_save

        from apps.adjudication.models import OverlapRule

        post_save.connect(_rule_written, sender=OverlapRule, dispatch_uid="questions_version")
        post_delete.connect(_rule_written, sender=OverlapRule, dispatch_uid="questions_version")


def _rule_written(sender: type, instance: Any, **kwargs: Any) -> None:
    from apps.studies.services import study_questions_changed

    study_questions_changed(question_id=instance.question_id)
