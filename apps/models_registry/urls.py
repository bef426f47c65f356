"""Page URLs of the model registry: a question's leaderboard, upload and comparison, a run's
page and its deletion (managers)."""

from django.urls import path

from apps.models_registry import views

app_name = "models_registry"
urlpatterns = [
    path("studies/<int:study_id>/models/runs/<int:run_id>/", views.run_detail, name="run"),
    path(
        "studies/<int:study_id>/models/runs/<int:run_id>/delete/",
        views.run_delete,
        name="run_delete",
    ),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/upload/",
        views.run_upload,
        name="upload",
    ),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/endpoint/",
        views.endpoint_save,
        name="endpoint",
    ),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/endpoint/predict/",
        views.endpoint_predict,
        name="endpoint_predict",
    ),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/compare/",
        views.run_compare,
        name="compare",
    ),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/",
        views.question_leaderboard,
        name="leaderboard",
    ),
]
