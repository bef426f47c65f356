"""Site URLs: pages per app, the REST API with its OpenAPI schema, admin, media."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.static import serve
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authtoken.views import obtain_auth_token

from annotate_site.api_router import router

urlpatterns = [
    path("", include("apps.studies.urls")),
    path("", include("apps.annotations.urls")),
    path("", include("apps.preferences.urls")),
    path("", include("apps.continuous.urls")),
    path("", include("apps.items.urls")),
    path("", include("apps.accounts.urls")),
    path("", include("analytics.urls")),
    path("", include("apps.models_registry.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/auth/token/", obtain_auth_token, name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include(router.urls)),
    # Uploaded stimuli. Behind a production proxy, serve MEDIA_ROOT from the proxy instead.
    re_path(r"^media/(?P<path>.*)$", serve, {"document_root": settings.MEDIA_ROOT}),
]
