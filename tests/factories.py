"""factory_boy factories for the studio's models, and a ready-made running study."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import study_creation_permission
from apps.studies.services import membership_add, question_create, study_set_status

PASSWORD = "correct-horse-battery"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def manager(self, create: bool, extracted: bool, **kwargs: object) -> None:
        """``UserFactory(manager=True)`` may create studies."""
        if extracted:
            self.user_permissions.add(study_creation_permission())
        self.save()


class StudyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Study
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Study {n}")
    instructions = "Label each sentence by the emotion it expresses."
    created_by = factory.SubFactory(UserFactory, manager=True)

    @factory.post_generation
    def managed(self, create: bool, extracted: bool, **kwargs: object) -> None:
        Membership.objects.get_or_create(
            study=self, user=self.created_by, defaults={"role": Membership.Role.MANAGER}
        )


class ItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Item

    study = factory.SubFactory(StudyFactory)
    external_id = factory.Sequence(lambda n: f"item-{n}")
    text = factory.Sequence(lambda n: f"Sentence number {n}.")
    position = factory.Sequence(int)


SENTIMENT_LABELS = [
    {"key": "negative", "name": "Negative", "shortcut": "1", "valence": -1.0, "arousal": 0.0},
    {"key": "neutral", "name": "Neutral", "shortcut": "2", "valence": 0.0, "arousal": 0.0},
    {"key": "positive", "name": "Positive", "shortcut": "3", "valence": 1.0, "arousal": 0.0},
]


def categorical_question(study: Study, *, key: str = "sentiment") -> Question:
    return question_create(
        study=study, key=key, prompt="What is the sentiment?", ordered=True, labels=SENTIMENT_LABELS
    )


def running_study(*, n_items: int = 6, n_annotators: int = 3, **study_fields: object):
    """A running study with one ordered categorical question; returns (study, annotators)."""
    study = StudyFactory(**study_fields)
    categorical_question(study)
    ItemFactory.create_batch(n_items, study=study)
    annotators = [UserFactory() for _ in range(n_annotators)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return study, annotators
