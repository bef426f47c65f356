"""ASGI entry point: HTTP through Django, websockets through Channels.

In front of both: :class:`~annotate_site.body_limit.BodyLimit` (413 before an oversized body is
read) and, for HTTP, :class:`~annotate_site.request_slots.RequestSlots` (``WEB_THREADS``
requests run their view code at once). With ``QUALITY_UPDATES=thread`` (a single process such
as ``uvicorn annotate_site.asgi:application``) the process also runs the quality sweeper
(:func:`analytics.pipeline.quality_sweep`); under ``serve`` and ``prod`` the quality worker
process does that work (``manage.py quality_worker``).
"""

import os

from annotate_site.http_handler import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
django_asgi_app = get_asgi_application()  # the middleware in one thread hop per request

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from analytics import background  # noqa: E402
from analytics.config import quality_config  # noqa: E402
from analytics.pipeline import quality_sweep  # noqa: E402
from annotate_site.body_limit import BodyLimit  # noqa: E402
from annotate_site.origins import SameOriginValidator  # noqa: E402
from annotate_site.request_slots import RequestSlots  # noqa: E402
from annotate_site.routing import websocket_urlpatterns  # noqa: E402

application = BodyLimit(
    ProtocolTypeRouter(
        {
            "http": RequestSlots(django_asgi_app, slots=settings.WEB_THREADS),
            "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)

if quality_config().updates == "thread":
    background.start_sweeper(quality_sweep, interval=quality_config().sweep_interval)
