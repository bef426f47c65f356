"""Page URLs of the studies app: home, study overview, study and question editing."""

from django.urls import path

from apps.studies import views

app_name = "studies"
urlpatterns = [
    path("", views.home, name="home"),
    path("studies/new/", views.study_new, name="create"),
    path("studies/<int:study_id>/", views.study_overview, name="overview"),
    path("studies/<int:study_id>/edit/", views.study_edit, name="edit"),
    path("studies/<int:study_id>/status/", views.study_status, name="status"),
    path("studies/<int:study_id>/questions/new/", views.question_new, name="question_create"),
    path(
        "studies/<int:study_id>/questions/<int:question_id>/edit/",
        views.question_edit,
        name="question_edit",
    ),
]
