"""Page URLs of the annotations app: the annotator queue and the raw downloads."""

from django.urls import path, re_path

from apps.annotations import views

app_name = "annotations"
urlpatterns = [
    path("studies/<int:study_id>/annotate/", views.queue, name="queue"),
    re_path(
        r"^studies/(?P<study_id>[0-9]+)/export/annotations\.(?P<fmt>csv|jsonl)$",
        views.annotations_export,
        name="export",
    ),
]
