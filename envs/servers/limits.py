"""The bounds every server keeps (sessions, request sizes, time per call)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerLimits:
    """Bounds of one server; every field must be positive."""

    max_sessions: int = 16
    """Episodes (OpenEnv) open at once; a new session past this is refused with an error."""
    max_concurrent: int = 8
    """Tool calls running at once (MCP); more wait, then are refused as busy."""
    max_request_bytes: int = 1_000_000
    """Largest request body (HTTP) or tool-call arguments (as JSON) accepted."""
    call_timeout_s: float = 300.0
    """Deadline of one tool call or step, in seconds (a late one is abandoned with an error)."""
    max_abandoned_calls: int = 4
    """Calls past their deadline that may still run on in threads before new calls are refused."""
    max_connections: int = 64
    """HTTP connections open at once, websockets included; one more gets 503 and is closed at once."""
    read_timeout_s: float = 30.0
    """Time a connection has to deliver a request's headers and body (else 408 and closed)."""

    def __post_init__(self) -> None:
        if not isinstance(self.read_timeout_s, (int, float)) or isinstance(self.read_timeout_s, bool) or \
                not 0 < self.read_timeout_s <= 3600:
            raise ValueError(f"read_timeout_s must be a number in (0, 3600], got {self.read_timeout_s!r}")
        for name in ("max_sessions", "max_concurrent", "max_request_bytes", "max_abandoned_calls", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.call_timeout_s, (int, float)) or not self.call_timeout_s > 0:
            raise ValueError(f"call_timeout_s must be a number > 0, got {self.call_timeout_s!r}")
