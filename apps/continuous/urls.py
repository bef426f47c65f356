"""Page URLs of continuous traces: the recorder and the managers' trace overview."""

from django.urls import path

from apps.continuous import views

app_name = "continuous"
urlpatterns = [
    path("studies/<int:study_id>/traces/<slug:question_key>/", views.traces, name="traces"),
    path(
        "studies/<int:study_id>/traces/<slug:question_key>/record/",
        views.record_next,
        name="record_next",
    ),
    path(
        "studies/<int:study_id>/traces/<slug:question_key>/record/<int:assignment_id>/",
        views.record,
        name="record",
    ),
]
