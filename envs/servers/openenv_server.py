"""``websailor/WikiSim-v0`` as an OpenEnv environment server (``openenv-core``, extra ``openenv``).

Each OpenEnv session (one websocket at ``/ws``) gets its own environment instance and so
its own task and episode; the simulator itself is shared (one per process, as ``gym.make``
shares it). Typed messages:

- :class:`WikiSimAction`: exactly one of ``tool`` (+ ``arguments``), ``answer``, or ``turn`` (a
  whole ReAct turn as a text policy writes it, ``<think>..</think><tool_call>..</tool_call>``);
- :class:`WikiSimObservation`: ``text`` (the question on reset, then the tool's output),
  ``reward`` and ``done`` (OpenEnv's fields), and the step's ``info`` in typed fields;
- :class:`WikiSimState`: the episode id, step count, task id and tool calls so far.

``reset(task_index=i)`` or ``reset(task={...})`` picks the task; otherwise it is drawn with
the seed. :class:`WikiSimClient` is the matching OpenEnv ``EnvClient``.
"""

from __future__ import annotations

from typing import Any, Optional

from envs.servers.episode import ToolEpisode

OPENENV_MISSING = "the OpenEnv server needs openenv-core: pip install 'websailor-gym[openenv]'"

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field, model_validator
    from pydantic_core import PydanticCustomError
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(OPENENV_MISSING) from _exc

MAX_TEXT = 200_000
"""Longest ``answer``/``turn``/argument text accepted in one action (characters)."""


class WikiSimAction(Action):
    """One agent move: a tool call, the final answer, or a whole ReAct turn (exactly one)."""

    tool: Optional[str] = Field(default=None, max_length=100, description="tool name: search, visit, python")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's JSON arguments")
    answer: Optional[str] = Field(default=None, max_length=MAX_TEXT, description="the final answer")
    turn: Optional[str] = Field(default=None, max_length=MAX_TEXT,
                                description="a whole model turn in the ReAct text protocol")

    @model_validator(mode="after")
    def _one_kind(self) -> "WikiSimAction":
        given = [k for k in ("tool", "answer", "turn") if getattr(self, k) is not None]
        # PydanticCustomError, not ValueError: OpenEnv puts e.errors() in its JSON reply, and a
        # ValueError there is not JSON-serializable (the reply would be a bare 500).
        if len(given) != 1:
            raise PydanticCustomError("one_kind", "give exactly one of tool (with arguments), answer or turn; got "
                                      "{given}", {"given": ", ".join(given) or "none"})
        if self.tool is None and self.arguments:
            raise PydanticCustomError("arguments", "arguments go with tool; an answer or turn takes none")
        return self


class WikiSimObservation(Observation):
    """What the agent sees after reset or a step; ``reward`` and ``done`` are OpenEnv's own fields."""

    text: str = Field(default="", description="the question (reset) or the tool's output (step)")
    question: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list, description="tool JSON schemas (on reset)")
    tool_name: str = ""
    tool_ok: bool = False
    tool_error: str = ""
    num_tool_calls: int = 0
    is_correct: bool = False
    termination: str = Field(default="", description="answer, max_tool_calls, context_limit, format_error")


class WikiSimState(State):
    """The session's episode: ids and counts."""

    task_id: str = ""
    question: str = ""
    num_tool_calls: int = 0
    done: bool = False


class WikiSimOpenEnv(Environment[WikiSimAction, WikiSimObservation, WikiSimState]):
    """One session's environment over ``gym.make("websailor/WikiSim-v0", **env_kwargs)``.

    Making one is cheap: the ``gym`` environment is built on the first ``reset`` (which OpenEnv
    runs in a worker thread), so ``/state``, ``/metadata`` and a session that never plays build
    nothing, and nothing heavy runs on the server's event loop."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, **env_kwargs: Any):
        super().__init__()
        self._env_kwargs = env_kwargs
        self._built: ToolEpisode | None = None
        self._state = WikiSimState()

    @property
    def _episode(self) -> ToolEpisode:
        if self._built is None:
            self._built = ToolEpisode(**self._env_kwargs)
        return self._built

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_index: Optional[int] = None, task: Optional[dict] = None, **kwargs: Any) -> WikiSimObservation:
        if kwargs:
            raise ValueError(f"unknown reset arguments {sorted(kwargs)}; expected seed, episode_id, task_index, task")
        if task_index is not None and task is not None:
            raise ValueError("give task_index or task, not both")
        env = self._episode.env
        if task_index is not None:
            env.reset(seed=seed, options={"task_index": task_index})
            self._episode.reset(env.unwrapped.task.to_dict())
        else:
            self._episode.reset(task, seed=seed)
        import uuid

        current = env.unwrapped.task
        self._state = WikiSimState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=current.id,
                                   question=current.question)
        from envs.tools import tool_schema

        return WikiSimObservation(text=current.question, question=current.question, done=False, reward=None,
                                  tools=[tool_schema(t) for t in env.unwrapped.tools])

    def step(self, action: WikiSimAction, timeout_s: Optional[float] = None, **kwargs: Any) -> WikiSimObservation:
        if not isinstance(action, WikiSimAction):
            raise ValueError(f"expected a WikiSimAction, got {type(action).__name__}")
        if not self._state.question:
            raise ValueError("call reset before step (HTTP /step has no session: play episodes over the "
                             "websocket /ws, e.g. with WikiSimClient)")
        if action.tool is not None:
            result = self._episode.call(action.tool, action.arguments)
        elif action.answer is not None:
            result = self._episode.answer(action.answer)
        else:
            result = self._episode.turn(action.turn)
        info = result.info
        self._state.step_count += 1
        self._state.num_tool_calls = int(info.get("num_tool_calls", self._state.num_tool_calls))
        self._state.done = result.done
        return WikiSimObservation(
            text=result.observation, question=self._state.question, done=result.done,
            reward=result.reward if result.done else 0.0, tool_name=str(info.get("tool_name", "")),
            tool_ok=bool(info.get("tool_ok", False)), tool_error=str(info.get("tool_error", ""))[:500],
            num_tool_calls=self._state.num_tool_calls, is_correct=bool(info.get("is_correct", False)),
            termination=str(info.get("termination", "")))

    @property
    def state(self) -> WikiSimState:
        return self._state

    def close(self) -> None:
        if self._built is not None:
            self._built.close()


class WikiSimClient(EnvClient[WikiSimAction, WikiSimObservation, WikiSimState]):
    """The OpenEnv client of this server: ``async with WikiSimClient(base_url=URL) as env``."""

    def _step_payload(self, action: WikiSimAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"}, exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WikiSimObservation]:
        obs = WikiSimObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                 reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> WikiSimState:
        return WikiSimState(**payload)


def build_app(max_sessions: int, session_idle_s: float | None = None, **env_kwargs: Any) -> Any:
    """The OpenEnv FastAPI app: ``/ws`` sessions (at most ``max_sessions``; one idle for
    ``session_idle_s`` is closed), ``/health``, ``/schema``...

    A task file is read once, here; every session shares the tasks. A session lives exactly as
    long as its websocket: OpenEnv's HTTP ``/mcp`` (whose ``openenv/session/create`` makes a
    session without any connection, which idle clients could use to fill every slot) is not
    served, and this environment has no MCP tools for it anyway."""
    import os

    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.types import ConcurrencyConfig

    from envs.tasks import read_jsonl_tasks

    if isinstance(env_kwargs.get("tasks"), (str, os.PathLike)):
        env_kwargs["tasks"] = read_jsonl_tasks(env_kwargs["tasks"])
    ToolEpisode(**env_kwargs).close()  # fail at start (bad wiki or tasks), not in the first session

    def factory() -> WikiSimOpenEnv:
        return WikiSimOpenEnv(**env_kwargs)

    concurrency = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_idle_s)
    app = create_fastapi_app(factory, WikiSimAction, WikiSimObservation, concurrency_config=concurrency)

    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute

    app.router.routes = [r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path == "/mcp")]

    @app.post("/mcp")
    async def no_http_sessions() -> Any:
        return JSONResponse({"error": "sessions live on a websocket: play episodes over /ws (WikiSimClient); "
                                      "HTTP /mcp is not served"}, status_code=404)

    async def bad_request(request: Any, exc: Exception) -> Any:  # a clear 400, not a bare 500
        return JSONResponse({"error": str(exc)[:1000]}, status_code=400)

    app.add_exception_handler(ValueError, bad_request)
    return app
