"""Settings of the annotation studio, read from environment variables.

Local defaults are safe and need nothing installed: a SQLite file, the in-memory channel layer,
DEBUG off unless ``DJANGO_DEBUG=1``, and a secret key generated once into ``.local/secret_key``.
Production differs only by environment variables:

``DATABASE_URL``   e.g. ``postgres://user@127.0.0.1:5432/studio`` (PostgreSQL via psycopg 3)
``REDIS_URL``      e.g. ``redis://127.0.0.1:6379/0`` (channels-redis layer)
``SECRET_KEY``     required in production (else a key generated once into the local directory)
``ALLOWED_HOSTS``  comma-separated host names (required in production)
``CSRF_TRUSTED_ORIGINS`` comma-separated origins behind a TLS proxy
``STUDIO_PRODUCTION`` ``1`` (set by ``annotation-studio prod``): refuse to start without
                   ``SECRET_KEY`` and ``ALLOWED_HOSTS`` or with ``DJANGO_DEBUG``; HTTPS on
``STUDIO_HTTPS``   served through a TLS proxy (default: ``STUDIO_PRODUCTION``): SSL redirect,
                   secure cookies, HSTS (``SECURE_HSTS_SECONDS``), trust ``X-Forwarded-Proto``
``STUDIO_LOCAL_DIR`` SQLite file, generated key, static files (default ``.local/`` of a
                   checkout, ``$XDG_DATA_HOME/annotation-studio`` when installed)
``MEDIA_ROOT``     where uploaded item files live
``MEDIA_ACCEL_REDIRECT`` / ``MEDIA_X_SENDFILE`` let nginx / Apache send the stimuli's bytes
``UPLOAD_MAX_MEDIA_BYTES``, ``UPLOAD_MAX_IMPORT_BYTES``, ``UPLOAD_MAX_MODEL_RUN_BYTES`` size limits
``CSP_MEDIA_SOURCES`` where stimuli named by URL may load from (Content-Security-Policy)
``ANONYMOUS_BODY_MAX_BYTES`` largest request body without a session or token (256 KiB)
``WEB_THREADS``, ``ASYNC_THREADS``, ``DB_POOL_SIZE`` threads and connections per web process
(``WEB_CONCURRENCY``, ``QUALITY_WORKERS``: processes; docs/serving.md)
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(__file__).resolve().parent
# The site-wide templates/ and static/: top-level folders in a checkout, copied inside the
# package by the build (setup.py) when the studio is installed.
SITE_FILES_DIR = PACKAGE_DIR if (PACKAGE_DIR / "templates").is_dir() else BASE_DIR


def _default_local_dir() -> Path:
    """``.local/`` of a checkout; the user's data directory when the studio is installed."""
    if (BASE_DIR / "manage.py").is_file():
        return BASE_DIR / ".local"
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "annotation-studio"


LOCAL_DIR = Path(os.environ.get("STUDIO_LOCAL_DIR") or _default_local_dir())


def _env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(int(default))).strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str = "") -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


def _private_file(path: Path) -> Path:
    """Create ``path`` (empty) and its directory, readable by their owner only, if missing."""
    LOCAL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return path


def _local_secret_key() -> str:
    """Return a per-checkout secret key, generated once and kept out of version control."""
    path = LOCAL_DIR / "secret_key"
    if not path.exists():
        _private_file(path).write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


DEBUG = _env_bool("DJANGO_DEBUG")
# Production refuses to guess: no generated key, no default host names, no debug pages.
PRODUCTION = _env_bool("STUDIO_PRODUCTION")
if PRODUCTION:
    for _name in ("SECRET_KEY", "ALLOWED_HOSTS"):
        if not os.environ.get(_name, "").strip():
            raise ImproperlyConfigured(
                f"STUDIO_PRODUCTION=1 needs {_name} in the environment (docs/deploying.md)."
            )
    if DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_DEBUG=1 shows debug pages: never with STUDIO_PRODUCTION=1."
        )
SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "knox",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "template_partials",
    "django_htmx",
    "apps.accounts",
    "apps.studies",
    "apps.items",
    "apps.annotations",
    "apps.categorical",
    "apps.preferences",
    "apps.arena",
    "apps.continuous",
    "analytics",
    "apps.adjudication",
    "apps.models_registry",
    "apps.recruitment",
    "apps.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its lockout response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "annotate_site.urls"
ASGI_APPLICATION = "annotate_site.asgi.application"
WSGI_APPLICATION = "annotate_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [SITE_FILES_DIR / "templates"],
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

# The local SQLite file is created private (SQLite gives its WAL files the same mode).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL")
        or f"sqlite:///{_private_file(LOCAL_DIR / 'studio.sqlite3')}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
        # a kept connection that died with the database is replaced, not reused
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the single writer; the timeout waits out short write locks.
    # The studio's backend queues a process's writers on a lock (annotate_site/sqlite/base.py).
    DATABASES["default"]["ENGINE"] = "annotate_site.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests run on a database in memory (Django's default for SQLite), one per process. Said
    # here because pytest-django knows SQLite by Django's engine name only: for this engine it
    # named each xdist worker's database "test_/abs/path/studio.sqlite3_gw0", which cannot open.
    DATABASES["default"]["TEST"] = {"NAME": ":memory:"}
# Under ASGI every request runs its view code in a thread of its own, and Django's connections
# belong to a thread: without a pool each request opened (and closed) a PostgreSQL connection.
# The threads of a web process that can hold a connection at once are bounded: WEB_THREADS
# requests run their view code together (annotate_site/request_slots.py queues the others in
# the event loop), ASYNC_THREADS run the websockets' renders (the loop's default executor) and
# one runs their thread-sensitive calls. The pool holds that many (DB_POOL_SIZE, if set, is
# the size instead; 0: no pool), so a request never waits for a connection another thread
# could have returned: a pool of 8 under 16 concurrent requests per process answered 503
# (PoolTimeout after 5 s) without any fault.
# On SQLite every write waits for the one write lock, and more threads only contend for the
# GIL while one of them holds it: 2 served 15-60 % more answers per second than 8 at 32
# clients (docs/benchmarks.md). On PostgreSQL 4 served as many as 8 with a shorter tail (the
# page path's p99 at 64 clients lower in all five alternated pairs on two machines: the view
# threads share one GIL with the thread that renders the dashboards). A streaming response
# gives its slot back at its first chunk, so slow downloads do not fill the slots.
_SQLITE = DATABASES["default"]["ENGINE"].endswith("sqlite")
WEB_THREADS = int(os.environ.get("WEB_THREADS", "2" if _SQLITE else "4"))
ASYNC_THREADS = int(os.environ.get("ASYNC_THREADS", "4"))
# On SQLite the same number is how many idle connections a process keeps for the next request
# (annotate_site/sqlite/base.py: opening one costs 0.9 ms of CPU).
DB_POOL_SIZE = int(os.environ.get("DB_POOL_SIZE", str(WEB_THREADS + ASYNC_THREADS + 1)))
if DATABASES["default"]["ENGINE"].endswith("postgresql") and DB_POOL_SIZE:
    # checks a pooled connection only when its socket says the server may have closed it
    # (Django's CONN_HEALTH_CHECKS sends a query on every checkout: annotate_site/postgresql)
    DATABASES["default"].update(ENGINE="annotate_site.postgresql", CONN_HEALTH_CHECKS=False)
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_SIZE,
        # a request waits at most 5 s for a connection; then (the database away) it answers
        # 503 with Retry-After instead of hanging (errors.py)
        "timeout": 5,
    }
# PostgreSQL parses and plans each statement it is sent as text: in a 64-client run planning
# took more of its time than executing (4.2 s against 3.4 s; the answer's six-table read of
# the assignment 0.56 ms to plan, 0.16 ms to run). Parameters bound on the server let psycopg
# prepare a statement after DB_PREPARE_THRESHOLD runs on a connection; PostgreSQL then runs it
# from a cached generic plan. PostgreSQL's CPU per answer fell from 4.0 to 2.3 ms. Django
# leaves preparing off for connection poolers: behind PgBouncer in transaction mode older than
# 1.21 (or without max_prepared_statements) set DB_PREPARE_THRESHOLD=0.
DB_PREPARE_THRESHOLD = int(os.environ.get("DB_PREPARE_THRESHOLD", "5"))
if DATABASES["default"]["ENGINE"].endswith("postgresql") and DB_PREPARE_THRESHOLD:
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=DB_PREPARE_THRESHOLD
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    # channels-redis waits for messages with BZPOPMIN, blocking up to 5 s on the server, while
    # redis-py 8 gives every read a 5 s socket timeout by default: an idle worker or websocket
    # died with "Timeout reading from ..." after 5-10 s. Reads here wait 15 s (the 5 s block plus
    # a margin); TCP keepalive and a PING on connections idle for 30 s find dead peers.
    # Options in the URL's query string (?socket_timeout=...) still win over these.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "annotate_site.channel_layer.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 15,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "health_check_interval": 30,
                    }
                ]
            },
        }
    }
else:
    # In memory; the processes of one `serve` share their group messages through the private
    # directory its supervisor names in STUDIO_CHANNEL_PEERS (annotate_site/peer_layer.py).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "annotate_site.peer_layer.PeerChannelLayer",
            "CONFIG": {"peers_dir": os.environ.get("STUDIO_CHANNEL_PEERS", "")},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses any sign-in (web form, admin, API token) from a locked-out
# IP address or account before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend reading signed-in users with SQL built once (core/auth.py)
    "core.auth.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "studies:home"
LOGOUT_REDIRECT_URL = "login"
# Sign-in throttling (django-axes) for the sign-in page, the admin and the API token endpoint:
# LOGIN_FAILURE_LIMIT failures from one IP address (any accounts), or for one account (from any
# addresses), lock that address or account out until LOGIN_COOLOFF_MINUTES have passed since its
# last failure; even the right password is refused meanwhile. The page answers 429 and says why.
# Counts live in the database (`manage.py axes_reset` clears them). Behind the reverse proxy, the
# web processes of `prod` take REMOTE_ADDR from its X-Forwarded-For (docs/deploying.md).
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_LOCKOUT_CALLABLE = "apps.accounts.views.locked_out"
# API tokens (django-rest-knox): only a SHA-512 digest is stored; each token expires
# API_TOKEN_TTL_DAYS after it was made; users list and revoke theirs (page and API).
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=int(os.environ.get("API_TOKEN_TTL_DAYS", "30"))),
    "AUTH_HEADER_PREFIX": "Token",
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = LOCAL_DIR / "staticfiles"
STATICFILES_DIRS = [SITE_FILES_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # whitenoise's compressed copies, made again only for the files that changed
    "staticfiles": {"BACKEND": "annotate_site.static_storage.ChangedOnlyCompressedStorage"},
}
MEDIA_URL = "media/"  # not served as such: apps.items serves each stimulus to members only
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", LOCAL_DIR / "media"))
# Behind a proxy, let it send the stimuli's bytes once the app has checked access: nginx with
# MEDIA_ACCEL_REDIRECT=/protected-media/ (an `internal` location aliased to MEDIA_ROOT), or
# Apache's mod_xsendfile with MEDIA_X_SENDFILE=1.
MEDIA_ACCEL_REDIRECT = os.environ.get("MEDIA_ACCEL_REDIRECT", "")
MEDIA_X_SENDFILE = _env_bool("MEDIA_X_SENDFILE")
# Largest file accepted per upload, in bytes, checked while the body streams in (413 past it):
# a stimulus (image, audio, video), an item file (CSV / JSON Lines), a model-run file (CSV,
# JSON Lines or NPZ; an NPZ's arrays may not hold more than this once uncompressed either).
UPLOAD_MAX_MEDIA_BYTES = int(os.environ.get("UPLOAD_MAX_MEDIA_BYTES", 50 * 1024 * 1024))
UPLOAD_MAX_IMPORT_BYTES = int(os.environ.get("UPLOAD_MAX_IMPORT_BYTES", 50 * 1024 * 1024))
UPLOAD_MAX_MODEL_RUN_BYTES = int(os.environ.get("UPLOAD_MAX_MODEL_RUN_BYTES", 100 * 1024 * 1024))
# Model endpoints (docs/suggestions.md): a study manager chooses the URL the server calls, so
# private, loopback and other non-public addresses are refused unless listed here (CIDRs or
# host names, comma-separated, e.g. "127.0.0.1/32,::1/128" for a model served on this machine,
# "192.168.1.0/24" for the lab's network); link-local (cloud metadata), unspecified and
# multicast addresses are refused even when listed. Public addresses are always allowed.
MODEL_ENDPOINT_ALLOWED_NETWORKS = _env_list("MODEL_ENDPOINT_ALLOWED_NETWORKS")
# Minutes a recruited arrival keeps its place without consenting (apps/recruitment/services.py)
RECRUITMENT_RESERVATION_MINUTES = int(os.environ.get("RECRUITMENT_RESERVATION_MINUTES", 30))
# Repeats (test-retest): at most this many per annotator, and never of a stimulus longer than
# REPEAT_MAX_SECONDS (0: no limit) (apps/annotations/services.py)
STUDY_MAX_REPEATS = int(os.environ.get("STUDY_MAX_REPEATS", 20))
REPEAT_MAX_SECONDS = float(os.environ.get("REPEAT_MAX_SECONDS", 60))
# Labels of one categorical question (core/limits.py; the quality state grows with its square)
QUESTION_MAX_LABELS = int(os.environ.get("QUESTION_MAX_LABELS", 100))
DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024
# Request bodies are refused with 413 before they are read (annotate_site/body_limit.py): from
# Content-Length at once, a chunked body as its bytes arrive. A request without a session cookie
# and without an Authorization header (sign-in, registration, a participant's consent) may send
# ANONYMOUS_BODY_MAX_BYTES; others the largest upload above plus room for the form around it.
ANONYMOUS_BODY_MAX_BYTES = int(os.environ.get("ANONYMOUS_BODY_MAX_BYTES", 256 * 1024))
BODY_MAX_BYTES = max(
    UPLOAD_MAX_MEDIA_BYTES,
    UPLOAD_MAX_IMPORT_BYTES,
    UPLOAD_MAX_MODEL_RUN_BYTES,
    DATA_UPLOAD_MAX_MEMORY_SIZE,
) + int(os.environ.get("BODY_FORM_MARGIN_BYTES", 1024 * 1024))
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Django's database sessions, read with SQL written once (core/sessions.py)
SESSION_ENGINE = "core.sessions"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the <body hx-headers> attribute instead
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy of every response (django-csp): scripts, styles, fonts, fetches and
# websockets come from the studio's own origin only; no inline script or style and no eval
# (templates load static files; htmx runs with allowEval off and without its inline indicator
# styles, see base.html). Stimuli named by a URL may live elsewhere: images, audio and video may
# also load from CSP_MEDIA_SOURCES (comma-separated CSP sources; default "https:", e.g.
# "https://media.example.org" to name the host, or "" for the studio's own uploads only).
# A response that sets its own policy keeps it (uploaded stimuli are served sandboxed).
CSP_MEDIA_SOURCES = _env_list("CSP_MEDIA_SOURCES", "https:")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:", "blob:", *CSP_MEDIA_SOURCES],
        "media-src": [SELF, "blob:", *CSP_MEDIA_SOURCES],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Served through a TLS proxy (docs/deploying.md; on by default in production): plain HTTP is
# redirected, cookies are HTTPS-only, browsers are told to use HTTPS for a year (HSTS), and the
# proxy's X-Forwarded-Proto says whether a request came over HTTPS. The proxy must set that
# header; the web processes listen on 127.0.0.1 only, so no client can send it around the proxy.
HTTPS = _env_bool("STUDIO_HTTPS", PRODUCTION)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "annotate_site.api_pagination.CappedLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "annotate_site.api_parsers.StorableJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "annotate_site.api_exceptions.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Annotation Studio API",
    "DESCRIPTION": (
        "Studies, questions, items, assignments and append-only annotations. "
        "Authenticate with `Authorization: Token <key>` (POST /api/auth/token/). Tokens "
        "expire (30 days by default); list and revoke yours under /api/auth/tokens/."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs page list every operation: signed-in users only (session or
    # token), as most deployments keep them; docs/security.md says so.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # /api/docs/ serves Swagger UI from the drf-spectacular-sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "QuestionKindEnum": "apps.studies.models.Question.Kind",
        "ItemKindEnum": "apps.items.models.Item.Kind",
        "EndpointKindEnum": "apps.models_registry.models.ModelEndpoint.Kind",
        "EndpointCallOutcomeEnum": "apps.models_registry.models.EndpointCall.Outcome",
        "OutcomeEnum": "apps.preferences.models.Judgement.Outcome",
    },
}

# The question kinds, one line each (docs/adding-a-question-kind.md): dotted paths of their
# apps.studies.kinds.QuestionKind objects, in the order the question form offers them.
QUESTION_KINDS = [
    "apps.categorical.kind.CATEGORICAL",
    "apps.continuous.kind.CONTINUOUS",
    "apps.preferences.kind.PAIRWISE",
    "apps.arena.kind.ARENA",
]

# The quality settings below are read once per use into analytics.config.QualityConfig.
# Where quality updates run after a commit: "thread" (default) on a background thread of a
# single web process (runserver); "inline" in the committing thread itself (the tests use it:
# deterministic); "worker" in quality worker processes (`manage.py quality_worker`), which
# `serve` and `prod` start beside their web processes: they read the outbox of pending answers
# every QUALITY_WORKER_INTERVAL seconds (analytics/worker.py).
QUALITY_UPDATES = os.environ.get("QUALITY_UPDATES", "thread")
QUALITY_WORKER_INTERVAL = float(os.environ.get("QUALITY_WORKER_INTERVAL", "0.25"))
# A worker runs the apps' catch-up hooks (analytics.pipeline.SWEEP_HOOKS: queue orders, model
# runs and endpoints, forecasts, interval refreshes) every N seconds, not on every pass.
QUALITY_WORKER_HOOK_INTERVAL = float(os.environ.get("QUALITY_WORKER_HOOK_INTERVAL", "2"))
# A worker's passes use at most this share of the machine's cores (0.1 of 2 cores: 0.2 of one)
# however a crowd's annotators make them cost, resting after a pass at most N seconds
# (analytics.worker.pass_rest; 0 = passes every QUALITY_WORKER_INTERVAL, back to back if slower).
QUALITY_WORKER_CPU_SHARE = float(os.environ.get("QUALITY_WORKER_CPU_SHARE", "0.1"))
QUALITY_WORKER_LONGEST_REST = float(os.environ.get("QUALITY_WORKER_LONGEST_REST", "1"))
# A thread-mode process sends the questions whose answers still wait for analysis on their way
# at start and then every N seconds (0 = never): the catch-up after it was down
# (analytics.pipeline.quality_sweep).
QUALITY_SWEEP_INTERVAL = float(os.environ.get("QUALITY_SWEEP_INTERVAL", "30"))
# Live quality dashboard (analytics.publishing): a new snapshot row at most every N seconds
# (the newest row is updated in between); Dawid-Skene refit at most every N seconds (0 = only
# on rebuild and on demand); evidence needed before a flag; pairs sharing fewer items get no
# kappa; annotators with enough evidence before robust z counts (else only the floors); how
# much worse (indicator units) a dismissed flag must get to reopen.
QUALITY_SNAPSHOT_INTERVAL = int(os.environ.get("QUALITY_SNAPSHOT_INTERVAL", "60"))
QUALITY_DS_INTERVAL = int(os.environ.get("QUALITY_DS_INTERVAL", "0"))
# The disagreement forecast of a categorical question (apps.adjudication) is retrained at most
# every N seconds while answers arrive (0 = after every quality update): a retrain costs a
# Dawid-Skene aggregation, a cross-validated fit and a write of a row per unanswered item
# (about 300 ms of the quality worker's pass for 2,000 items), which every pass paid.
QUALITY_FORECAST_INTERVAL = float(os.environ.get("QUALITY_FORECAST_INTERVAL", "30"))
# ... and never sooner than the last retraining's CPU time divided by this share (0.1: one
# that took 5 s rests 50 s), so it keeps at most a tenth of a core busy however large the question
# grows (0 = no such rest), as QUALITY_INTERVAL_DUTY does for the intervals.
QUALITY_FORECAST_DUTY = float(os.environ.get("QUALITY_FORECAST_DUTY", "0.1"))
# Confidence intervals of the indicators (bootstrap and analytic, seconds of work on a large
# question): recomputed by the quality processing at most every N seconds per question and
# carried forward in between (0 = never).
QUALITY_INTERVAL_SECONDS = int(os.environ.get("QUALITY_INTERVAL_SECONDS", "120"))
# ... and never sooner than the last computation's CPU time divided by this share (0.1: a set
# that took 4 s rests 40 s), so the intervals keep at most a tenth of a core busy however large the
# question grows (0 = no such rest).
QUALITY_INTERVAL_DUTY = float(os.environ.get("QUALITY_INTERVAL_DUTY", "0.1"))
# Whether the slow work that follows a quality update runs on a thread of its own beside the
# updates: the intervals' bootstraps (a publish that finds them due carries the last set
# meanwhile: analytics.intervals.intervals_request) and the disagreement forecast's retraining
# (apps.adjudication). The quality worker sets it, so seconds of either never hold the other
# questions' live updates and pushes.
QUALITY_SLOW_WORK_APART = False
# The CPU priority of that thread in the quality worker (a Linux nice value, 0-19; 0 = the
# same as the live updates): at 19 the bootstraps and retrainings yield the CPU to the web
# processes and the live updates whenever those can run (issue 22).
QUALITY_SLOW_WORK_NICE = int(os.environ.get("QUALITY_SLOW_WORK_NICE", "19"))
# ... and that thread starts a batch only once the machine has left this many cores idle over a
# second (Linux's /proc/stat; 0 = no wait), or after QUALITY_SLOW_WORK_WAIT seconds of waiting
# for that: at nice 19 alone it still took a quarter of a core from a saturated machine
# (analytics.background.yield_to_busy_machine).
QUALITY_SLOW_WORK_SPARE = float(os.environ.get("QUALITY_SLOW_WORK_SPARE", "0.5"))
QUALITY_SLOW_WORK_WAIT = float(os.environ.get("QUALITY_SLOW_WORK_WAIT", "300"))
# How long a web process reuses an arena question's pooled reads (every vote and prompt, the
# Bradley-Terry fit) to choose annotators' next pairs (apps/arena/selectors.py); 0: never.
ARENA_POOL_SECONDS = float(os.environ.get("ARENA_POOL_SECONDS", "5"))
QUALITY_MIN_EVIDENCE = int(os.environ.get("QUALITY_MIN_EVIDENCE", "20"))
QUALITY_MIN_REPEATS = int(os.environ.get("QUALITY_MIN_REPEATS", "10"))
QUALITY_MIN_OVERLAP = int(os.environ.get("QUALITY_MIN_OVERLAP", "10"))
QUALITY_MIN_ANNOTATORS = int(os.environ.get("QUALITY_MIN_ANNOTATORS", "5"))
QUALITY_REOPEN_MARGIN = float(os.environ.get("QUALITY_REOPEN_MARGIN", "0.1"))
# Evidence before a flag on pairwise transitivity (complete triplets), on continuous kappa_SDA
# with others (traces) and on continuous figures against the truth (gold items).
QUALITY_MIN_TRIPLETS = int(os.environ.get("QUALITY_MIN_TRIPLETS", "10"))
QUALITY_MIN_TRACES = int(os.environ.get("QUALITY_MIN_TRACES", "3"))
QUALITY_MIN_GOLD_ITEMS = int(os.environ.get("QUALITY_MIN_GOLD_ITEMS", "1"))
# A dashboard redraws its plots at most every N seconds (its table on every update).
QUALITY_PLOT_INTERVAL = float(os.environ.get("QUALITY_PLOT_INTERVAL", "5"))
# ... and under a stream of updates renders again no sooner than its last render's CPU time
# divided by this share (0.5: a render of 100 ms rests 100 ms), so one open dashboard keeps
# at most half a core of its web process busy however many annotators it shows (0 = no
# rest). 0.25 halved the CPU again but doubled the push latency at 128 annotators.
QUALITY_PUSH_DUTY = float(os.environ.get("QUALITY_PUSH_DUTY", "0.5"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
