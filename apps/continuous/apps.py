from django.apps import AppConfig


class ContinuousConfig(AppConfig):
    name = "apps.continuous"
    label = "continuous"
    verbose_name = "Continuous traces"

    def ready(self) -> None:
        """Register how continuous settings and answers (trace pointers) are validated."""
        from apps.annotations.values import VALUE_CLEANERS
        from apps.continuous.config import clean_trace_settings
        from apps.continuous.values import clean_trace_pointer
        from apps.studies.kinds import SETTINGS_CLEANERS
        from apps.studies.models import Question

        SETTINGS_CLEANERS[Question.Kind.CONTINUOUS] = clean_trace_settings
        VALUE_CLEANERS[Question.Kind.CONTINUOUS] = clean_trace_pointer
