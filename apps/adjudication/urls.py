"""Page URLs of adjudication: the page per question, its overlap rule, aggregated labels."""

from django.urls import path, re_path

from apps.adjudication import views

app_name = "adjudication"
urlpatterns = [
    path(
        "studies/<int:study_id>/adjudicate/<slug:question_key>/",
        views.adjudicate,
        name="page",
    ),
    path(
        "studies/<int:study_id>/adjudicate/<slug:question_key>/overlap/",
        views.overlap,
        name="overlap",
    ),
    path(
        "studies/<int:study_id>/adjudicate/<slug:question_key>/predicted-overlap/",
        views.predicted_overlap,
        name="predicted_overlap",
    ),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/export/aggregated\.(?P<fmt>csv|jsonl|parquet)$",
        views.aggregated_export,
        name="export",
    ),
    path(
        "studies/<int:study_id>/export/aggregated-provenance.json",
        views.aggregated_provenance_view,
        name="export_provenance",
    ),
]
