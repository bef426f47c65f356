"""Page URLs of the model registry: a question's leaderboard and a run's page (managers)."""

from django.urls import path

from apps.models_registry import views

app_name = "models_registry"
urlpatterns = [
    path("studies/<int:study_id>/models/runs/<int:run_id>/", views.run_detail, name="run"),
    path(
        "studies/<int:study_id>/models/<slug:question_key>/",
        views.question_leaderboard,
        name="leaderboard",
    ),
]
