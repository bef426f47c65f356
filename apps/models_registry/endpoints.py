"""One HTTP request to a model endpoint and the reading of its answer (issue 28).

No database here: :func:`apps.models_registry.services.model_endpoint_predict_pending` decides
which items to ask about, spends the budget, retries, and stores what :func:`endpoint_request`
returns. Two formats:

- ``json``: ``POST {"item": {"id", "text", "metadata"}, "labels": [keys]}``, answered by
  ``{"label": key, "probabilities": {key: p}}`` (``probabilities`` optional).
- ``openai``: an OpenAI-compatible chat-completions URL, ``POST {"model", "messages",
  "temperature": 0}`` with a prompt naming the question, its label keys and names and the
  item's text; the label is read from ``choices[0].message.content`` (case and surrounding
  whitespace, quotes and a final full stop ignored; a label's key or its name). With
  ``logprobs`` on, the request adds ``"logprobs": true, "top_logprobs": <labels, at most 20>``
  and the label probabilities come from ``choices[0].logprobs.content[0].top_logprobs``
  (:func:`logprob_probabilities`).

Redirects are not followed (a 3xx is an HTTP error), no proxy is used, and at most
:data:`MAX_ANSWER_BYTES` of an answer are read.

Addresses (server-side request forgery): a study manager chooses the URL, so the server refuses
to call link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata), unspecified and
multicast ones always, and private, loopback and other non-public ones unless
:class:`AllowedNetworks` lists them (``MODEL_ENDPOINT_ALLOWED_NETWORKS``). The check runs on
saving (:func:`url_refusal`) and on every call: the name is resolved, every address checked,
the connection made to a checked address (never to the name again, so a rebinding resolver
gains nothing) and the socket's peer address checked once more before the request is sent.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import json
import math
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MAX_ANSWER_BYTES = 1_000_000
#: The most alternatives OpenAI's chat completions return per token (``top_logprobs``).
MAX_TOP_LOGPROBS = 20
#: Probabilities must sum to 1 within this tolerance.
SUM_TOLERANCE = 0.01


@dataclass(frozen=True)
class EndpointItem:
    """What the endpoint is told of an item."""

    external_id: str
    text: str
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class EndpointLabel:
    key: str
    name: str


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: IPv6 prefix of NAT64 gateways, behind which the IPv4 address of the last 32 bits is called.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class RefusedAddressError(OSError):
    """The endpoint's address is one the server may not call (its message says why)."""


@dataclass(frozen=True)
class AllowedNetworks:
    """The non-public networks and host names an endpoint may be called at.

    Link-local, unspecified and multicast addresses are refused even when listed.
    """

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowedNetworks:
        """From entries such as ``"127.0.0.1/32"``, ``"10.0.0.0/8"``, ``"::1"`` or
        ``"models.lab.internal"`` (anything that is not a network is a host name)."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.rstrip(".").casefold())
        return cls(tuple(networks), frozenset(hosts))

    def refusal(self, ip: str, *, host: str) -> str:
        """Why ``ip`` (an address ``host`` resolved to) may not be called; ``""`` if it may."""
        address: IPAddress = ipaddress.ip_address(ip.split("%", 1)[0])  # no IPv6 scope id
        if isinstance(address, ipaddress.IPv6Address):  # the IPv4 address it stands for
            if address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            elif address in _NAT64:
                address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.is_link_local or address.is_unspecified or address.is_multicast:
            return (
                f"{address} is a link-local, unspecified or multicast address "
                "(cloud metadata lives there): it may not be called"
            )
        if address.is_global:
            return ""
        if host.rstrip(".").casefold() in self.hosts or any(
            address in network for network in self.networks
        ):
            return ""
        return (
            f"{address} is a private, loopback or reserved address: it may be called only when "
            "the server's MODEL_ENDPOINT_ALLOWED_NETWORKS lists it"
        )


def resolve_checked(host: str, port: int, *, allowed: AllowedNetworks) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order; :class:`RefusedAddressError` if
    any of them may not be called (``socket.gaierror`` if the name does not resolve)."""
    addresses: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        ip = str(sockaddr[0])
        reason = allowed.refusal(ip, host=host)
        if reason:
            raise RefusedAddressError(reason)
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    return addresses


def url_refusal(url: str, *, allowed: AllowedNetworks) -> str:
    """Why the server may not call ``url`` (an http(s) URL), ``""`` if it may. A name that
    does not resolve now passes: each call checks again."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        resolve_checked(parts.hostname or "", port, allowed=allowed)
    except RefusedAddressError as exc:
        return str(exc)
    except (OSError, ValueError, UnicodeError):
        return ""
    return ""


def _checked_connection(allowed: AllowedNetworks) -> Callable[..., socket.socket]:
    """A ``socket.create_connection`` that resolves the name itself, checks every address,
    connects to a checked address and checks the socket's peer before handing it over."""

    def create_connection(
        address: tuple[str, int],
        timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT,  # type: ignore[attr-defined]
        source_address: tuple[str, int] | None = None,
        **kwargs: Any,
    ) -> socket.socket:
        host, port = address
        failure: OSError | None = None
        for ip in resolve_checked(host, port, allowed=allowed):
            try:
                sock = socket.create_connection((ip, port), timeout, source_address)
            except OSError as exc:  # the next address, as socket.create_connection does
                failure = exc
                continue
            try:
                reason = allowed.refusal(str(sock.getpeername()[0]), host=host)
            except OSError as exc:
                sock.close()
                raise exc
            if reason:
                sock.close()
                raise RefusedAddressError(reason)
            return sock
        raise failure or OSError(f"cannot connect to {host}")

    return create_connection


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, allowed: AllowedNetworks, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _checked_connection(allowed)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    """TLS as usual (the certificate checked against the URL's name) over a checked socket."""

    def __init__(self, *args: Any, allowed: AllowedNetworks, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _checked_connection(allowed)


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, allowed: AllowedNetworks) -> None:
        super().__init__()
        self.allowed = allowed

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_CheckedHTTPConnection, allowed=self.allowed), req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, allowed: AllowedNetworks) -> None:
        super().__init__()
        self.allowed = allowed

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_CheckedHTTPSConnection, allowed=self.allowed)
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class EndpointConfig:
    """The parts of a :class:`~apps.models_registry.models.ModelEndpoint` a request needs."""

    kind: str
    url: str
    model: str
    api_key: str
    timeout: float
    prompt: str
    allowed: AllowedNetworks = field(default_factory=AllowedNetworks)
    logprobs: bool = False


@dataclass(frozen=True)
class EndpointAnswer:
    """One request's outcome: ``outcome`` is an ``EndpointCall.Outcome`` value; on ``ok``,
    ``label`` is one of the question's keys and ``probabilities`` maps every key to its
    probability (or is ``None``)."""

    outcome: str
    seconds: float
    label: str = ""
    probabilities: dict[str, float] | None = None
    http_status: int | None = None
    detail: str = ""

    @property
    def retryable(self) -> bool:
        """A time-out, an unreachable server, a 429 or a 5xx may go better on a second try;
        a 4xx or a malformed answer will not."""
        if self.outcome in ("timeout", "unreachable"):  # never "refused"
            return True
        return self.outcome == "http" and (
            self.http_status == 429 or (self.http_status or 0) >= 500
        )


def resolve_api_key(*, api_key: str, api_key_env: str) -> str:
    """The stored key, else the value of the environment variable it names ("" if neither)."""
    return api_key or (os.environ.get(api_key_env, "") if api_key_env else "")


def request_body(
    config: EndpointConfig, *, item: EndpointItem, labels: Sequence[EndpointLabel]
) -> dict[str, Any]:
    """The JSON body sent for ``item``."""
    if config.kind == "openai":
        choices = "\n".join(f"- {label.key}: {label.name}" for label in labels)
        system = (
            "You label items for an annotation study. Answer with exactly one label key from "
            f"this list and nothing else:\n{choices}"
        )
        user = f"Question: {config.prompt}\n\nItem:\n{item.text}"
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
        }
        if config.logprobs:
            body |= {"logprobs": True, "top_logprobs": min(len(labels), MAX_TOP_LOGPROBS)}
        return body
    return {
        "item": {"id": item.external_id, "text": item.text, "metadata": dict(item.metadata)},
        "labels": [label.key for label in labels],
    }


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


@functools.lru_cache(maxsize=8)
def _opener(allowed: AllowedNetworks) -> urllib.request.OpenerDirector:
    """No proxy (it would be the address checked), no redirect, checked connections; one
    opener per allow-list (building one costs about 0.3 ms)."""
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _NoRedirect,
        _CheckedHTTPHandler(allowed),
        _CheckedHTTPSHandler(allowed),
    )


def endpoint_request(
    config: EndpointConfig, *, item: EndpointItem, labels: Sequence[EndpointLabel]
) -> EndpointAnswer:
    """POST one item to the endpoint and read its label; never raises for the endpoint's
    faults (they are the answer's ``outcome``)."""
    body = json.dumps(request_body(config, item=item, labels=labels)).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(config.url, data=body, headers=headers, method="POST")
    started = time.monotonic()

    def answer(outcome: str, **fields: Any) -> EndpointAnswer:
        return EndpointAnswer(outcome=outcome, seconds=time.monotonic() - started, **fields)

    try:
        with _opener(config.allowed).open(request, timeout=config.timeout) as response:
            raw = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        return answer("http", http_status=exc.code, detail=f"HTTP {exc.code} {exc.reason}"[:300])
    except RefusedAddressError as exc:
        return answer("refused", detail=str(exc)[:300])
    except TimeoutError:
        return answer("timeout", detail=f"no answer within {config.timeout:g} s")
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, RefusedAddressError):
            return answer("refused", detail=str(exc.reason)[:300])
        if isinstance(exc.reason, TimeoutError):
            return answer("timeout", detail=f"no answer within {config.timeout:g} s")
        return answer("unreachable", detail=str(exc.reason)[:300])
    except (OSError, ValueError) as exc:  # connection reset, a bad status line...
        return answer("unreachable", detail=str(exc)[:300] or type(exc).__name__)
    if len(raw) > MAX_ANSWER_BYTES:
        return answer("malformed", detail=f"answer longer than {MAX_ANSWER_BYTES} bytes")
    try:
        label, probabilities = read_answer(config.kind, raw, labels=labels)
    except ValueError as exc:
        return answer("malformed", detail=str(exc)[:300])
    return answer("ok", label=label, probabilities=probabilities)


def _named(text: str, labels: Sequence[EndpointLabel]) -> str | None:
    """The key of the label ``text`` names (its key or its name, any case, surrounding
    whitespace, quotes and a final full stop ignored); ``None`` if none."""
    wanted = text.strip().strip("\"'`").strip().rstrip(".").strip().casefold()
    for label in labels:
        if wanted in (label.key.casefold(), label.name.strip().casefold()):
            return label.key
    return None


def _match(text: str, labels: Sequence[EndpointLabel]) -> str:
    """:func:`_named`, or ``ValueError`` naming the unknown label."""
    key = _named(text, labels)
    if key is None:
        raise ValueError(f"unknown label {text.strip()[:60]!r}")
    return key


def logprob_probabilities(
    top_logprobs: Any, labels: Sequence[EndpointLabel]
) -> dict[str, float] | None:
    r"""Label probabilities from the alternatives of the answer's first token.

    Each alternative ``{"token", "logprob"}`` whose token names a label (as the answer's
    content does: key or name, any case, whitespace, quotes and a final full stop ignored)
    adds :math:`e^{\text{logprob}}` to that label; the sums are renormalised over the labels
    found,

    .. math:: p_k = \frac{\sum_{t \to k} e^{\ell_t}}{\sum_{t \to \text{any label}} e^{\ell_t}},

    and the labels not found get 0. ``None`` when no alternative names a label (labels whose
    key and name span several tokens are never found). ``ValueError`` when an alternative is
    not a token with a log-probability <= 0.
    """
    if not isinstance(top_logprobs, list):
        raise ValueError("logprobs.content[0].top_logprobs is not a list")
    mass = dict.fromkeys((label.key for label in labels), 0.0)
    for alternative in top_logprobs:
        token = alternative.get("token") if isinstance(alternative, dict) else None
        logprob = alternative.get("logprob") if isinstance(alternative, dict) else None
        if (
            not isinstance(token, str)
            or isinstance(logprob, bool)
            or not isinstance(logprob, int | float)
            or math.isnan(logprob)
            or logprob > 1e-6
        ):
            raise ValueError("a top_logprobs entry is not a token with a logprob <= 0")
        key = _named(token, labels)
        if key is not None:
            mass[key] += math.exp(min(logprob, 0.0))
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {key: value / total for key, value in mass.items()}


def read_answer(
    kind: str, raw: bytes, *, labels: Sequence[EndpointLabel]
) -> tuple[str, dict[str, float] | None]:
    """``(label key, probabilities or None)`` from an answer's bytes; ``ValueError`` saying
    what is wrong when the answer is not what the format promises."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if kind == "openai":
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError("no choices[0].message.content") from exc
        if not isinstance(content, str):
            raise ValueError("choices[0].message.content is not text")
        label = _match(content, labels)
        try:
            top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            return label, None  # not asked for, or not given
        return label, logprob_probabilities(top, labels)
    if not isinstance(data, dict) or not isinstance(data.get("label"), str):
        raise ValueError('no "label" in the answer')
    label = _match(data["label"], labels)
    return label, _probabilities(data.get("probabilities"), labels)


def _probabilities(raw: Any, labels: Sequence[EndpointLabel]) -> dict[str, float] | None:
    """Every label key's probability (keys the answer leaves out get 0); ``None`` if absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError('"probabilities" is not an object')
    keys = {label.key for label in labels}
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise ValueError(f"probabilities of unknown labels {', '.join(unknown)[:100]}")
    out = {}
    for key in (label.key for label in labels):
        p = raw.get(key, 0.0)
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise ValueError(f"probability of {key} is not a number in [0, 1]")
        out[key] = float(p)
    if not math.isclose(sum(out.values()), 1.0, abs_tol=SUM_TOLERANCE):
        raise ValueError(f"probabilities sum to {sum(out.values()):.3f}, not 1")
    return out
