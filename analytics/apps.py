from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    label = "analytics"
    verbose_name = "Quality analytics"

    def ready(self) -> None:
        """Refresh intervals left stale when answers stopped (the pipeline's sweep and job
        modes)."""
        from analytics.intervals import INTERVALS_JOB, intervals_refresh_sweep
        from analytics.pipeline import JOBS, SWEEP_HOOKS
        from analytics.publishing import quality_publish

        JOBS[INTERVALS_JOB] = lambda question_id: quality_publish(question_id=question_id)
        SWEEP_HOOKS.append(intervals_refresh_sweep)
