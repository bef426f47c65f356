from django.apps import AppConfig


class PreferencesConfig(AppConfig):
    name = "apps.preferences"
    label = "preferences"
    verbose_name = "Pairwise preferences"

    def ready(self) -> None:
        """Register how a pairwise question's settings are validated."""
        from apps.preferences.models import clean_pairwise_settings
        from apps.studies.kinds import SETTINGS_CLEANERS
        from apps.studies.models import Question

        SETTINGS_CLEANERS[Question.Kind.PAIRWISE] = lambda raw: clean_pairwise_settings(
            raw
        ).as_dict()
