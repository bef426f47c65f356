"""WSGI entry point (management and plain-HTTP hosting; the studio itself is served by uvicorn,
:mod:`annotate_site.webserver`)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
application = get_wsgi_application()
