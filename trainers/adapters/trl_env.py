"""The simulator as a TRL ``environment_factory`` (TRL's recommended multi-turn hook).

TRL (``GRPOTrainer(environment_factory=...)``) makes one instance per rollout with a
no-argument constructor, calls ``reset(**row)`` with the dataset row, offers every public
method as a tool (its schema read from the type hints and the ``Args:`` docstring), parses
the model's tool calls with the tokenizer's chat template and calls ``get_reward()`` when the
rollout ends. :func:`wikisim_environment` returns such a class bound to a simulator:

- tools ``search``, ``visit`` (and ``python`` with ``python=True``): each call is one turn of
  ``gym.make("websailor/WikiSim-v0", ...)`` (through :class:`envs.servers.episode.ToolEpisode`),
  so outputs, budgets and deadlines are the environment's own;
- ``answer``: the final answer (TRL hands ``get_reward`` no completion, so the answer reaches
  the environment as a tool call, as in TRL's Harbor environments);
- ``get_reward()``: the environment's reward for that answer (its judge, ``reward_weights``),
  0.0 when the rollout ended without one.

Usage::

    Env = wikisim_environment(wiki_dir=DIR)
    trainer = GRPOTrainer(model=..., processing_class=tool_calling_tokenizer(tokenizer), args=GRPOConfig(...),
                          train_dataset=environment_dataset(tasks), environment_factory=Env)

The tokenizer needs a chat template that renders tool calls and a response parser
(``trl.chat_template_utils.add_response_schema``: Qwen2.5/Qwen3 templates speak exactly the
environment's ``<tool_call>`` / ``<tool_response>`` protocol). SmolLM2's own template renders no
tools: pass ``processing_class=tool_calling_tokenizer(tokenizer)``, which attaches a tool-calling
template in the same protocol and its parser (:mod:`trainers.adapters.tool_template`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from envs.servers.episode import ENV_ID, ToolEpisode
from trainers.adapters.tool_template import tool_calling_tokenizer  # noqa: F401 (re-exported: the usage above)

TASK_FIELDS = ("id", "question", "answer", "aliases")
SYSTEM_PROMPT = ("You are a deep research assistant. Answer the user's question by searching the web and visiting "
                 "pages with the tools, as many times as you need; then give your final answer with the answer "
                 "tool, as a short phrase.")
_ANSWER_RECORDED = "Your answer was recorded; the episode is over. Stop here."


def task_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The task dict in a dataset row (its ``question``, ``answer``, optional ``id`` and ``aliases``)."""
    task = {k: row[k] for k in TASK_FIELDS if row.get(k) is not None}
    if not isinstance(task.get("question"), str) or "answer" not in task:
        raise ValueError(f"a dataset row needs 'question' and 'answer' fields, got fields {sorted(row)}")
    return task


def environment_dataset(tasks: Sequence[Mapping[str, Any]], system_prompt: str | None = SYSTEM_PROMPT) -> Any:
    """A ``datasets.Dataset`` for ``environment_factory``: a conversational prompt and the task fields per task."""
    from trainers.adapters.trl import _require_trl

    _require_trl()
    from datasets import Dataset

    rows = []
    for i, task in enumerate(tasks):
        row = task_from_row(task)
        row["aliases"] = [str(a) for a in row.get("aliases", [])]
        row["id"] = str(row.get("id", i))
        row["answer"] = str(row["answer"])
        prompt = [{"role": "user", "content": row["question"]}]
        if system_prompt:
            prompt.insert(0, {"role": "system", "content": system_prompt})
        rows.append({"prompt": prompt, **row})
    return Dataset.from_list(rows)


class WikiSimEnvironment:
    """One rollout's environment; made by TRL with no arguments (bind the simulator with
    :func:`wikisim_environment`). Public methods other than ``reset`` and ``get_reward`` are tools."""

    env_id: ClassVar[str] = ENV_ID
    env_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        if not self.env_kwargs.get("wiki_dir"):
            raise ValueError("WikiSimEnvironment needs a simulator: pass wikisim_environment(wiki_dir=DIR) "
                             "as environment_factory")
        self._episode = ToolEpisode(self.env_id, **self.env_kwargs)

    def reset(self, **row: Any) -> str | None:
        """Start the row's task; the question is returned only when the row's prompt lacks it."""
        question = self._episode.reset(task_from_row(row))
        prompt = row.get("prompt")
        if isinstance(prompt, list) and prompt and question in str(prompt[-1].get("content", "")):
            return None
        return question

    def search(self, query: list[str]) -> str:
        """Performs batched web searches: the top 10 results for each query in one call.

        Args:
            query: Array of query strings. Include multiple complementary search queries in a single call.
        """
        return self._episode.call("search", {"query": query}).observation

    def visit(self, url: list[str], goal: str) -> str:
        """Visit webpage(s) and return the summary of the content.

        Args:
            url: The URL(s) of the webpage(s) to visit.
            goal: The specific information goal for visiting webpage(s).
        """
        return self._episode.call("visit", {"url": url, "goal": goal}).observation

    def answer(self, answer: str) -> str:
        """Give the final answer to the question; this ends the episode.

        Args:
            answer: The final answer, as a short phrase.
        """
        if self._episode.done:
            return "Error: the episode is over; an answer was already given or the budget is spent."
        self._episode.answer(answer)
        return _ANSWER_RECORDED

    def get_reward(self) -> float:
        """The environment's reward for the rollout: its judge's score of the answer (0.0 without one)."""
        return float(self._episode.reward) if self._episode.done else 0.0

    @property
    def info(self) -> dict[str, Any]:
        """The environment's ``info`` of the last step (``is_correct``, ``termination``, ...)."""
        return dict(self._episode.last_info)


class WikiSimPythonEnvironment(WikiSimEnvironment):
    """:class:`WikiSimEnvironment` with the sandboxed ``python`` tool."""

    def python(self, code: str) -> str:
        """Execute Python 3 code in an isolated sandbox and return its stdout, stderr and exit status.

        Args:
            code: The Python code to run, as a complete program. Print what you want to see.
        """
        return self._episode.call("python", {"code": code}).observation


def wikisim_environment(wiki_dir: str, *, python: bool = False, env_id: str = ENV_ID, **env_kwargs: Any) -> type:
    """An ``environment_factory`` class over the simulator in ``wiki_dir``.

    ``python=True`` adds the sandboxed ``python`` tool. Other keyword arguments go to ``gym.make``
    (``max_tool_calls``, ``reward_weights``, ``judge``, ``tool_timeout_s``, ...); ``tasks`` is not
    needed (each row is its own task).
    """
    if "tools" in env_kwargs:
        raise ValueError("wikisim_environment sets the tools itself (search, visit, answer; python=True adds python)")
    base = WikiSimPythonEnvironment if python else WikiSimEnvironment
    tools = ["search", "visit", "python"] if python else ["search", "visit"]
    kwargs = {"wiki_dir": str(wiki_dir), "tools": tools, **env_kwargs}
    return type(base.__name__, (base,), {"env_id": env_id, "env_kwargs": kwargs, "__module__": __name__,
                                         "__doc__": base.__doc__})
