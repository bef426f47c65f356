"""Settings of the annotation studio, read from environment variables.

Local defaults are safe and need nothing installed: a SQLite file, the in-memory channel layer,
DEBUG off unless ``DJANGO_DEBUG=1``, and a secret key generated once into ``.local/secret_key``.
Production differs only by environment variables:

``DATABASE_URL``   e.g. ``postgres://user@127.0.0.1:5432/studio`` (PostgreSQL via psycopg 3)
``REDIS_URL``      e.g. ``redis://127.0.0.1:6379/0`` (channels-redis layer)
``SECRET_KEY``     required whenever ``DEBUG`` is off and the key file is not wanted
``ALLOWED_HOSTS``  comma-separated host names
``CSRF_TRUSTED_ORIGINS`` comma-separated origins behind a TLS proxy
``MEDIA_ROOT``     where uploaded item files live
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DIR = Path(os.environ.get("STUDIO_LOCAL_DIR", BASE_DIR / ".local"))


def _env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(int(default))).strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str = "") -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


def _local_secret_key() -> str:
    """Return a per-checkout secret key, generated once and kept out of version control."""
    path = LOCAL_DIR / "secret_key"
    if not path.exists():
        LOCAL_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = _env_bool("DJANGO_DEBUG")
SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "template_partials",
    "django_htmx",
    "apps.accounts",
    "apps.studies",
    "apps.items",
    "apps.annotations",
    "apps.preferences",
    "apps.continuous",
    "analytics",
    "apps.models_registry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "annotate_site.urls"
ASGI_APPLICATION = "annotate_site.asgi.application"
WSGI_APPLICATION = "annotate_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{LOCAL_DIR / 'studio.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the single writer; the timeout waits out short write locks.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "studies:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = LOCAL_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", LOCAL_DIR / "media"))
DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the <body hx-headers> attribute instead
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if not DEBUG and _env_bool("SECURE_COOKIES"):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "annotate_site.api_exceptions.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Annotation Studio API",
    "DESCRIPTION": (
        "Studies, questions, items, assignments and append-only annotations. "
        "Authenticate with `Authorization: Token <key>` (POST /api/auth/token/)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "QuestionKindEnum": "apps.studies.models.Question.Kind",
        "ItemKindEnum": "apps.items.models.Item.Kind",
    },
}

# Where quality updates run after a commit: "thread" (default) on one background thread of the
# web process; "inline" in the committing thread itself (the tests use it: deterministic);
# "worker" on channel workers (`manage.py runworker quality-updates`) over Redis, which
# production with several web processes runs beside daphne.
QUALITY_UPDATES = os.environ.get("QUALITY_UPDATES", "thread")
# Live quality dashboard (analytics.publishing): a new snapshot row at most every N seconds
# (the newest row is updated in between); Dawid-Skene refit at most every N seconds (0 = only
# on rebuild and on demand); evidence needed before a flag; pairs sharing fewer items get no
# kappa; annotators with enough evidence before robust z counts (else only the floors); how
# much worse (indicator units) a dismissed flag must get to reopen.
QUALITY_SNAPSHOT_INTERVAL = int(os.environ.get("QUALITY_SNAPSHOT_INTERVAL", "60"))
QUALITY_DS_INTERVAL = int(os.environ.get("QUALITY_DS_INTERVAL", "0"))
QUALITY_MIN_EVIDENCE = int(os.environ.get("QUALITY_MIN_EVIDENCE", "20"))
QUALITY_MIN_REPEATS = int(os.environ.get("QUALITY_MIN_REPEATS", "10"))
QUALITY_MIN_OVERLAP = int(os.environ.get("QUALITY_MIN_OVERLAP", "10"))
QUALITY_MIN_ANNOTATORS = int(os.environ.get("QUALITY_MIN_ANNOTATORS", "5"))
QUALITY_REOPEN_MARGIN = float(os.environ.get("QUALITY_REOPEN_MARGIN", "0.1"))
# A dashboard redraws its plots at most every N seconds (its table on every update).
QUALITY_PLOT_INTERVAL = float(os.environ.get("QUALITY_PLOT_INTERVAL", "5"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
