from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    label = "analytics"
    verbose_name = "Quality analytics"

    def ready(self) -> None:
        """Sweep hooks: intervals left stale when answers stopped, and snapshots left behind
        their state (a publish that failed), are published again."""
        from analytics.intervals import INTERVALS_JOB, intervals_refresh_sweep
        from analytics.pipeline import JOBS, SWEEP_HOOKS
        from analytics.publishing import quality_publish, snapshots_republish

        JOBS[INTERVALS_JOB] = lambda question_id: quality_publish(question_id=question_id)
        for hook in (intervals_refresh_sweep, snapshots_republish):
            if hook not in SWEEP_HOOKS:
                SWEEP_HOOKS.append(hook)
