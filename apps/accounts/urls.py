"""Page URLs of the accounts app: a study's annotators, invitations and the user's API tokens."""

from django.urls import path

from apps.accounts import views

app_name = "accounts"
urlpatterns = [
    path("studies/<int:study_id>/annotators/", views.annotators, name="annotators"),
    path(
        "studies/<int:study_id>/members/<int:user_id>/remove/",
        views.member_remove,
        name="member_remove",
    ),
    path(
        "studies/<int:study_id>/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke_view,
        name="invitation_revoke",
    ),
    path("invite/<str:token>/", views.invitation, name="invitation"),
    path("invitations/accept/", views.invitation_accept_page, name="invitation_accept"),
    path(
        "invitations/<int:invitation_id>/join/",
        views.invitation_join_view,
        name="invitation_join",
    ),
    path("account/tokens/", views.api_tokens, name="api_tokens"),
]
