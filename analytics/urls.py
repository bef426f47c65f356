"""Page URLs of the analytics app: the quality dashboard of a study and its actions."""

from django.urls import path

from analytics import views

app_name = "analytics"
urlpatterns = [
    path("studies/<int:study_id>/quality/", views.dashboard, name="dashboard"),
    path(
        "studies/<int:study_id>/quality/flags/<int:flag_id>/",
        views.flag_review,
        name="flag_review",
    ),
    path(
        "studies/<int:study_id>/quality/annotators/<int:user_id>/exclusion/",
        views.annotator_exclusion,
        name="annotator_exclusion",
    ),
    path(
        "studies/<int:study_id>/quality/questions/<int:question_id>/competence/",
        views.competence_refresh,
        name="competence",
    ),
]
