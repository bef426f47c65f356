"""Page URLs of the items app."""

from django.urls import path

from apps.items import views

app_name = "items"
urlpatterns = [
    path("studies/<int:study_id>/items/import/", views.item_import, name="import"),
    path("studies/<int:study_id>/items/", views.item_list, name="list"),
    path("studies/<int:study_id>/items/<int:item_id>/", views.item_detail, name="detail"),
    path(
        "studies/<int:study_id>/items/<int:item_id>/media/<str:name>",
        views.item_media,
        name="media",
    ),
]
