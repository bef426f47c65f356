"""Page URLs of the annotations app: the annotator queue, the raw and curated downloads."""

from django.urls import path, re_path

from apps.annotations import views

app_name = "annotations"
urlpatterns = [
    path("studies/<int:study_id>/annotate/", views.queue, name="queue"),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/export/annotations\.(?P<fmt>csv|jsonl|parquet)$",
        views.annotations_export,
        name="export",
    ),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/export/curated\.(?P<fmt>csv|jsonl|parquet)$",
        views.annotations_export,
        {"curated": True},
        name="export_curated",
    ),
    path(
        "studies/<int:study_id>/export/huggingface.zip",
        views.dataset_export,
        name="export_huggingface",
    ),
    path(
        "studies/<int:study_id>/export/curated-provenance.json",
        views.curated_provenance,
        name="export_provenance",
    ),
]
