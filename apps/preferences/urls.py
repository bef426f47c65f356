"""Page URLs of pairwise preferences: the annotator's comparisons and the managers' results."""

from django.urls import path, re_path

from apps.preferences import views

app_name = "preferences"
urlpatterns = [
    path("studies/<int:study_id>/compare/<slug:question_key>/", views.compare, name="compare"),
    path("studies/<int:study_id>/compare/<slug:question_key>/undo/", views.undo, name="undo"),
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
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/preferences/(?P<question_key>[-\w]+)/"
        r"scores\.(?P<fmt>jsonl|parquet)$",
        views.scores_export,
        name="scores_file",
    ),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/preferences/(?P<question_key>[-\w]+)/"
        r"judgements\.(?P<fmt>jsonl|parquet)$",
        views.judgements_export,
        name="judgements_file",
    ),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/preferences/(?P<question_key>[-\w]+)/"
        r"preferences\.(?P<fmt>jsonl|parquet)$",
        views.preferences_export,
        name="preferences_file",
    ),
]
