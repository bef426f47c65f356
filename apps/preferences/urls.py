"""Page URLs of pairwise preferences: the annotator's comparisons and the managers' results."""

from django.urls import path

from apps.preferences import views

app_name = "preferences"
urlpatterns = [
    path("studies/<int:study_id>/compare/<slug:question_key>/", views.compare, name="compare"),
    path(
        "studies/<int:study_id>/preferences/<slug:question_key>/",
        views.results,
        name="results",
    ),
    path(
        "studies/<int:study_id>/preferences/<slug:question_key>/scores.csv",
        views.scores_export,
        name="scores_csv",
    ),
    path(
        "studies/<int:study_id>/preferences/<slug:question_key>/judgements.csv",
        views.judgements_export,
        name="judgements_csv",
    ),
]
