"""Site URLs: pages per app, the REST API with its OpenAPI schema, admin.

Uploaded stimuli have no route of their own: ``items:media`` serves each to its study's members.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotate_site.api_router import router
from apps.accounts.api.views import TokenLoginView, TokenLogoutAllView, TokenLogoutView

urlpatterns = [
    # The API first: Django tries the patterns in order and lists, for every include it
    # descends into without a match, all it tried. Behind the 11 page includes, each API
    # request walked them all (tests/annotate_site/test_urls.py). No page route starts
    # with "api/", so the order changes no match.
    path("api/auth/token/", TokenLoginView.as_view(), name="api-token"),
    path("api/auth/logout/", TokenLogoutView.as_view(), name="api-logout"),
    path("api/auth/logoutall/", TokenLogoutAllView.as_view(), name="api-logout-all"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI from the sidecar package; its start-up script is a file, not inline (CSP).
    # Signed-in users only, like the schema (SERVE_PERMISSIONS): others go to the sign-in page.
    path(
        "api/docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path("api/", include(router.urls)),
    # Then the annotator's pages, then the manager's (no two page routes match one path).
    path("", include("apps.annotations.urls")),
    path("", include("apps.preferences.urls")),
    path("", include("apps.arena.urls")),
    path("", include("apps.continuous.urls")),
    path("", include("apps.studies.urls")),
    path("", include("apps.items.urls")),
    path("", include("apps.accounts.urls")),
    path("", include("analytics.urls")),
    path("", include("apps.adjudication.urls")),
    path("", include("apps.models_registry.urls")),
    path("", include("apps.recruitment.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # Pages link the icon; this answers clients that ask for /favicon.ico without looking
    # (resolved per request: the static manifest need not exist when the URLs are imported).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("img/favicon.svg"))),
]

# A database that cannot be reached answers 503 with Retry-After, not the generic 500 page.
handler500 = "annotate_site.errors.server_error"
