"""Page URLs of recruitment: the link, the participant's phases, the manager's page."""

from django.urls import path

from apps.recruitment import views

app_name = "recruitment"
urlpatterns = [
    path("join/<str:token>/", views.join, name="join"),
    path("studies/<int:study_id>/participate/consent/", views.consent, name="consent"),
    path("studies/<int:study_id>/participate/training/", views.training, name="training"),
    path("studies/<int:study_id>/participate/ready/", views.qualified, name="qualified"),
    path("studies/<int:study_id>/participate/end/", views.end, name="end"),
    path("studies/<int:study_id>/recruitment/", views.manage, name="manage"),
    path("studies/<int:study_id>/recruitment/payments.csv", views.payments, name="payments"),
    path("studies/<int:study_id>/recruitment/gold-signal/", views.gold_signal, name="gold_signal"),
    path("studies/<int:study_id>/recruitment/gold-use/", views.gold_use, name="gold_use"),
]
