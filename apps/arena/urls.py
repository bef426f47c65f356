"""Page URLs of the model arena: the annotator's votes and the managers' ranking."""

from django.urls import path, re_path

from apps.arena import views

app_name = "arena"
urlpatterns = [
    path("studies/<int:study_id>/arena/<slug:question_key>/", views.arena, name="arena"),
    path(
        "studies/<int:study_id>/arena/<slug:question_key>/results/",
        views.results,
        name="results",
    ),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/arena/(?P<question_key>[-\w]+)/"
        r"preferences\.(?P<fmt>csv|jsonl|parquet)$",
        views.preferences_export,
        name="preferences_file",
    ),
]
