"""Page URLs of the accounts app: a study's annotators and invitation links."""

from django.urls import path

from apps.accounts import views

app_name = "accounts"
urlpatterns = [
    path("studies/<int:study_id>/annotators/", views.annotators, name="annotators"),
    path("invite/<str:token>/", views.invitation, name="invitation"),
]
