"""The HTTP adapter under every live request: a limiter slot, a total deadline, a capped body,
and (for agent-chosen URLs) connections that refuse internal addresses.

- **Deadline**: a watchdog (one thread per process, :class:`Watchdog`) shuts the request's
  socket down when the request's deadline passes,
  whatever phase it is in (connecting, waiting for headers, a body dribbled a byte at a time);
  a socket timeout alone bounds only each read.
- **Capped body**: the body is read here, before requests or requests-cache can see it, with
  :func:`envs.live.body.read_capped` (``max_page_bytes`` of decompressed bytes at most), so an
  over-size or decompression-bomb reply raises :class:`~envs.live.errors.TooLarge` and never
  reaches the cache. The response handed on carries the decoded body and no
  ``Content-Encoding``.
- **Guarded connections** (:class:`LimitedAdapter` with ``guard=True``): each new connection's
  peer address is checked by :func:`envs.live.netpolicy.check_peer` before anything is sent.

Per-request settings travel in a thread-local :class:`RequestContext` set by
:meth:`envs.live.transport.Transport.request`, so redirect hops that requests follows by
itself keep them.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from envs.live.body import CHUNK, check_declared_length, read_capped
from envs.live.errors import LiveError, Retryable
from envs.live.limiter import RateLimiter
from envs.live.netpolicy import check_peer

# Request headers requests-cache adds for its own bookkeeping; the provider need not see them.
_LOCAL_HEADERS = ("Cache-Control", "X-ACTUAL-NO-CACHE")
_local = threading.local()


@dataclass
class RequestContext:
    """What the adapter needs to know about the request being sent on this thread."""

    source: str = "direct"
    deadline: float = math.inf
    max_bytes: int = 8_000_000
    sockets: list = field(default_factory=list)
    """Sockets this request used (the deadline timer shuts them down)."""
    expired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def expire(self) -> None:
        with self.lock:
            self.expired = True
            sockets = list(self.sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def track(self, sock) -> None:
        if sock is None:
            return
        with self.lock:
            self.sockets.append(sock)
            expired = self.expired
        if expired:
            self.expire()


class Watchdog:
    """Expires request contexts at their deadlines, from one daemon thread per process (a
    timer thread per request would cost a thread start on every network request)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, RequestContext]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._pid: int | None = None

    def watch(self, context: RequestContext) -> int:
        """Expire ``context`` at its deadline unless :meth:`cancel` comes first."""
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child: threads do not survive a fork
                self._pid, self._heap, self._live = os.getpid(), [], set()
                threading.Thread(target=self._run, name="websailor-http-watchdog", daemon=True).start()
            token = next(self._ids)
            heapq.heappush(self._heap, (context.deadline, token, context))
            self._live.add(token)
            self._cond.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._live.discard(token)

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._cond:
                if self._pid != pid:
                    return
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token, context = self._heap[0]
                wait = deadline - time.time()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(token)
            context.expire()


WATCHDOG = Watchdog()


@contextmanager
def request_context(context: RequestContext):
    """Make ``context`` the current request's for this thread."""
    previous = getattr(_local, "context", None)
    _local.context = context
    try:
        yield context
    finally:
        _local.context = previous


def current_context() -> RequestContext | None:
    return getattr(_local, "context", None)


class _TrackedMixin:
    """Registers its socket with the current request (for the deadline timer) and, when
    ``check_peer_address`` is set and no proxy is in between, checks the peer address."""

    check_peer_address = False

    def _new_conn(self):
        sock = super()._new_conn()
        context = current_context()
        if context is not None:
            context.track(sock)
        if self.check_peer_address and getattr(self, "proxy", None) is None:
            try:
                check_peer(sock)
            except LiveError:
                sock.close()
                raise
        return sock

    def request(self, *args, **kwargs):
        context = current_context()
        if context is not None and self.sock is not None:
            context.track(self.sock)
        return super().request(*args, **kwargs)


class _Conn(_TrackedMixin, HTTPConnection):
    pass


class _SConn(_TrackedMixin, HTTPSConnection):
    pass


class _GuardedConn(_Conn):
    check_peer_address = True


class _GuardedSConn(_SConn):
    check_peer_address = True


def _pool(base, conn):
    return type(f"{conn.__name__}Pool", (base,), {"ConnectionCls": conn})


_POOLS = {False: {"http": _pool(HTTPConnectionPool, _Conn), "https": _pool(HTTPSConnectionPool, _SConn)},
          True: {"http": _pool(HTTPConnectionPool, _GuardedConn), "https": _pool(HTTPSConnectionPool, _GuardedSConn)}}


class LimitedAdapter(HTTPAdapter):
    """Sends a request only after the limiter grants its source a slot; enforces the
    request's total deadline and byte cap; ``guard=True`` checks every connection's peer."""

    def __init__(self, limiter: RateLimiter, guard: bool = False, max_bytes: int = 8_000_000):
        self.limiter, self.guard, self.max_bytes = limiter, guard, max_bytes
        super().__init__(max_retries=0)  # retries are ours, counted and bounded by the deadline

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS[self.guard]

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = _POOLS[self.guard]
        return manager

    def send(self, request, **kwargs):
        context = current_context() or RequestContext(max_bytes=self.max_bytes)
        for name in _LOCAL_HEADERS:
            request.headers.pop(name, None)
        self.limiter.acquire(context.source, None if math.isinf(context.deadline) else context.deadline)
        token = None if math.isinf(context.deadline) else WATCHDOG.watch(context)
        try:
            response = super().send(request, **kwargs)
            _read_body(response, context)
            if context.expired:  # the cut socket can look like an orderly end of the headers or body
                response.close()
                raise _past_deadline(context)
            return response
        except LiveError:
            raise
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
            if context.expired:
                raise _past_deadline(context) from None
            if isinstance(error, requests.RequestException):
                raise
            if isinstance(error, (urllib3.exceptions.ReadTimeoutError, TimeoutError, socket.timeout)):
                raise Retryable(context.source, "timed out reading the reply") from None
            raise Retryable(context.source, f"the reply was cut off ({type(error).__name__})") from None
        finally:
            if token is not None:
                WATCHDOG.cancel(token)
            with context.lock:
                context.sockets.clear()


def _past_deadline(context: RequestContext) -> Retryable:
    return Retryable(context.source, "no complete reply before the deadline (the whole request is timed, "
                                     "not each read)")


def _read_body(response: requests.Response, context: RequestContext) -> None:
    """Replace the stream with the capped, decoded body (see the module docstring)."""
    raw = response.raw
    try:
        check_declared_length(context.source, response.headers, context.max_bytes)
        chunks = iter(lambda: raw.read(CHUNK, decode_content=False), b"")
        body = read_capped(context.source, chunks, response.headers.get("Content-Encoding", ""), context.max_bytes)
    except BaseException:
        response.close()  # a half-read connection must not go back to the pool
        raise
    response._content = body
    response._content_consumed = True
    if "Content-Encoding" in response.headers:
        del response.headers["Content-Encoding"]
        response.headers["Content-Length"] = str(len(body))
    raw.release_conn()
