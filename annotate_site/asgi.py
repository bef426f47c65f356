"""ASGI entry point: HTTP through Django, websockets through Channels (served by daphne), and
the ``quality-updates`` worker channel (``manage.py runworker quality-updates``). Both kinds of
process start the quality sweeper here (:func:`analytics.pipeline.quality_sweep`)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from analytics import background  # noqa: E402
from analytics.config import quality_config  # noqa: E402
from analytics.consumers import QualityWorker  # noqa: E402
from analytics.pipeline import UPDATE_CHANNEL, quality_sweep  # noqa: E402
from annotate_site.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
        "channel": ChannelNameRouter({UPDATE_CHANNEL: QualityWorker.as_asgi()}),
    }
)

background.start_sweeper(quality_sweep, interval=quality_config().sweep_interval)
