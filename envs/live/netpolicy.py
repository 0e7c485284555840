"""Network policy for agent-chosen URLs: only http(s), only public addresses.

A URL the agent names (``visit``) is checked before anything is fetched, and again on every
redirect hop (:class:`envs.live.adapters.reader.DirectReader` follows redirects itself):

- the scheme is ``http`` or ``https`` and there is a host;
- the host is resolved (``getaddrinfo``, which reads every spelling the HTTP client would:
  ``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``) and every
  address it resolves to must be public: loopback, private, link-local, multicast, reserved,
  unspecified and other non-global addresses are refused, for IPv4, IPv6, and IPv4 embedded
  in IPv6 (mapped, 6to4, NAT64, Teredo).

The connection itself is checked once more when it is made (:func:`check_peer`, used by the
transport's guarded connections), so a name that resolves to a public address for the check
and to an internal one a moment later (DNS rebinding) is refused too.

``LiveConfig(allow_private_urls=True)`` turns the address checks off (tests reach their
loopback servers that way); the scheme check always applies. Provider base URLs are
configuration, not agent input, and are never checked.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
import time
from urllib.parse import urlsplit

from envs.live.errors import Blocked, Unreachable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# getaddrinfo has no timeout of its own; a resolver that hangs (no network) must not hold a
# tool call, so lookups run on these threads and are waited for with a deadline.
_RESOLVER = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="websailor-dns")


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, Teredo client), if any."""
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_kind(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be visited (``'loopback'``, ``'private'``, ...), or None when public."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        kind = address_kind(inner)
        return f"{kind} (inside {ip})" if kind else None
    for kind in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    if not ip.is_global:
        return "non-public"
    return None


def parse_ip(text: str) -> IPAddress:
    """An address as getaddrinfo returns it (an IPv6 zone ``%eth0`` is dropped)."""
    return ipaddress.ip_address(text.split("%", 1)[0])


def resolve(host: str, port: int, timeout: float) -> list[str]:
    """Every address ``host`` resolves to; :class:`Unreachable` when it does not resolve in
    ``timeout`` seconds (no retry: a name that does not resolve now will not in a second)."""
    future = _RESOLVER.submit(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=max(0.01, timeout))
    except concurrent.futures.TimeoutError:
        raise Unreachable("policy", f"the name {host!r} did not resolve within {timeout:.1f}s") from None
    except (socket.gaierror, UnicodeError, OSError) as e:
        raise Unreachable("policy", f"the name {host!r} does not resolve ({_gai_reason(e)})") from None
    return [info[4][0] for info in infos]


def _gai_reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or type(error).__name__


def check_url(url: str, *, allow_private: bool, timeout: float = 5.0, source: str = "policy") -> None:
    """Raise :class:`Blocked` unless ``url`` is http(s) and (unless ``allow_private``) every
    address its host resolves to is public; :class:`Unreachable` when the host does not resolve."""
    shown = url if len(url) <= 200 else url[:200] + "..."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise Blocked(source, f"refused {shown!r}: not a valid URL ({e})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise Blocked(source, f"refused {shown!r}: only http:// and https:// URLs may be visited")
    host = parts.hostname
    if not host:
        raise Blocked(source, f"refused {shown!r}: the URL has no host")
    if allow_private:
        return
    port = port or (443 if parts.scheme.lower() == "https" else 80)
    start = time.time()
    addresses = resolve(host, port, timeout)
    for text in addresses:
        try:
            ip = parse_ip(text)
        except ValueError:
            raise Blocked(source, f"refused {shown!r}: the host resolves to {text!r}, not an IP address") from None
        kind = address_kind(ip)
        if kind:
            raise Blocked(source, f"refused {shown!r}: the host {host!r} is a {kind} address ({ip}); "
                                  "only public web addresses may be visited")
    if not addresses:
        raise Unreachable(source, f"the name {host!r} resolves to no address ({time.time() - start:.1f}s)")


def check_peer(sock: socket.socket) -> None:
    """Raise :class:`Blocked` when the socket is connected to a non-public address."""
    try:
        peer = sock.getpeername()[0]
    except (OSError, IndexError, TypeError):
        return  # not an IP socket (a proxy's unix socket, say): nothing to check
    try:
        ip = parse_ip(str(peer))
    except ValueError:
        return
    kind = address_kind(ip)
    if kind:
        raise Blocked("policy", f"refused: the connection went to a {kind} address ({ip}); "
                                "only public web addresses may be visited")
