from typing import Any

from django.apps import AppConfig


class StudiesConfig(AppConfig):
    name = "apps.studies"
    label = "studies"

    def ready(self) -> None:
        """Every write of a question or a label raises its study's ``questions_version``
        (the key of the questions cache of the answer paths), whoever writes: the services,
        imports, the demo, factories. A receiver is the one place every save and delete
        (cascades included) passes; the work is the service's."""
        from django.db.models.signals import post_delete, post_save

        from apps.studies.models import Label, Question

        post_save.connect(_question_written, sender=Question, dispatch_uid="questions_version")
        post_delete.connect(_question_written, sender=Question, dispatch_uid="questions_version")
        post_save.connect(_label_written, sender=Label, dispatch_uid="questions_version")
        post_delete.connect(_label_written, sender=Label, dispatch_uid="questions_version")


def _question_written(sender: type, instance: Any, **kwargs: Any) -> None:
    from apps.studies.services import study_questions_changed

    study_questions_changed(study_id=instance.study_id)


def _label_written(sender: type, instance: Any, **kwargs: Any) -> None:
    from apps.studies.services import study_questions_changed

    study_questions_changed(question_id=instance.question_id)
