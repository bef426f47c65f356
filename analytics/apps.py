from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    label = "analytics"
    verbose_name = "Quality analytics"

    def ready(self) -> None:
        from analytics.pipeline import SWEEP_HOOKS
        from analytics.publishing import snapshots_republish

        # a snapshot left behind its state (its publish failed) is published again
        if snapshots_republish not in SWEEP_HOOKS:
            SWEEP_HOOKS.append(snapshots_republish)
