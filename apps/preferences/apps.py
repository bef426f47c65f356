from django.apps import AppConfig


class PreferencesConfig(AppConfig):
    name = "apps.preferences"
    label = "preferences"
    verbose_name = "Pairwise preferences"

    def ready(self) -> None:
        """Refit a batched question's stored pooled ranking, which its next batch draws read,
        after its quality updates (off the request path; only when due)."""
        from analytics.pipeline import AFTER_UPDATE_HOOKS
        from apps.preferences.services import pair_pool_after_update

        AFTER_UPDATE_HOOKS.append(pair_pool_after_update)
