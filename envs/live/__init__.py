"""The managed live web: adapters, limiter, cache, retries, fallback, and its tools.

``gym.make("websailor/LiveWeb-v0", tasks=..., config=...)`` builds it (see
:mod:`envs.live.env`); :class:`envs.live.manager.LiveWeb` is the layer itself and
:class:`envs.live.config.LiveConfig` its configuration. Nothing heavy is imported here.
"""

__all__ = ["LiveConfig", "LiveWeb", "make_liveweb_env"]


def __getattr__(name: str):
    if name == "LiveConfig":
        from envs.live.config import LiveConfig

        return LiveConfig
    if name == "LiveWeb":
        from envs.live.manager import LiveWeb

        return LiveWeb
    if name == "make_liveweb_env":
        from envs.live.env import make_liveweb_env

        return make_liveweb_env
    raise AttributeError(f"module 'envs.live' has no attribute {name!r}")
