"""The managed live web: adapters, limiter, cache, retries, fallback.

:class:`envs.live.manager.LiveWeb` is the layer itself and :class:`envs.live.config.LiveConfig` its
configuration; the tools over it are in :mod:`envs.tools`, and ``gym.make("websailor/LiveWeb-v0",
tasks=..., config=...)`` builds the environment (:mod:`envs.liveweb`). Nothing heavy is imported here.
"""

__all__ = ["LiveConfig", "LiveWeb"]


def __getattr__(name: str):
    if name == "LiveConfig":
        from envs.live.config import LiveConfig

        return LiveConfig
    if name == "LiveWeb":
        from envs.live.manager import LiveWeb

        return LiveWeb
    raise AttributeError(f"module 'envs.live' has no attribute {name!r}")
