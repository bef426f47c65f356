from django.apps import AppConfig


class CategoricalConfig(AppConfig):
    """Categorical labels: the question kind answered by picking one of the question's labels.

    No models of its own: answers are :class:`apps.annotations.models.Annotation` rows (shared
    with continuous traces) and labels :class:`apps.studies.models.Label`. The app holds the
    kind's behaviour (``kind.py``), its quality statistics and indicators and its dashboard
    cards (``templates/categorical``).
    """

    name = "apps.categorical"
    label = "categorical"
    verbose_name = "Categorical labels"
