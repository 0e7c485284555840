"""The research environment: a Gymnasium text environment around a set of tools.

One class serves both the offline simulator and the live web; only the tools differ.

**Observations** are strings (members of :class:`envs.spaces.ModelText`):

- ``reset`` returns the first prompt, the system message and the question rendered in
  ChatML (``<|im_start|>system\\n...<|im_end|>\\n<|im_start|>user\\n...<|im_end|>\\n``);
- ``step`` returns the *content* of the user message the environment adds after the turn:
  the tool's output as ``<tool_response>\\n...\\n</tool_response>`` after a tool call, an
  error message after a turn it could not use, and ``""`` once the episode is over.

A text policy appends ``<|im_start|>assistant\\n{action}<|im_end|>\\n<|im_start|>user\\n
{obs}<|im_end|>\\n`` to what it has; :meth:`ResearchEnv.messages` gives the same transcript
as ChatML messages (``env.unwrapped.messages()``, or ``envs.call("messages")`` on a
vector environment).

**Actions** are the model's whole turn; any string at all is accepted (see
:mod:`envs.protocol` for what is understood).

**Episode end.** ``terminated=True`` only on a final ``<answer>``. When the tool-call
budget is spent or the transcript reaches ``max_context_tokens``, the observation asks
for the answer now (as the reference agent does); a turn without an answer after that
ends the episode with ``truncated=True``. So does the ``max_format_errors``-th turn in a
row that holds neither a tool call nor an answer. ``info["termination"]`` says which of
``answer``, ``max_tool_calls``, ``context_limit``, ``format_error`` ended it, or ``judge_error``:
the episode ended with an answer but the judge raised (``info["judge_error"]`` says why; reward
0, ``is_correct`` false: it scores as a wrong answer everywhere, so breaking the judge never pays). A turn with a
``<tool_call>`` block counts against the budget even when the call is malformed or names
no tool (as the reference agent counts its turns); only its first call is run.

**Reward** (:mod:`envs.rewards`) comes on the last step: ``w_format * format +
w_answer * answer``; every other step gives 0.
"""

from __future__ import annotations

import datetime
import os
import time
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
from gymnasium.error import ResetNeeded

from envs import prompts
from envs.context import TokenCounter
from envs.deadline import DeadlineRunner, ToolBusy, ToolTimeout
from envs.judges import Judge, Judgement, make_judge
from envs.protocol import ParsedTurn, Termination, ToolCall, parse_turn
from envs.rewards import check_weights, episode_reward
from envs.spaces import MAX_TEXT_CHARS, ModelText, to_model_text, without_surrogates
from envs.tasks import Task, load_tasks, task_from_dict
from envs.tools.base import Tool, ToolResult

_ERROR_CHARS = 500  # an exception's message in an observation is cut to this
_TOOL_TEXT_CHARS = MAX_TEXT_CHARS - 1024  # room for the <tool_response> wrapper and budget notes
DEFAULT_TOOL_TIMEOUT_S = 300.0
"""Deadline of one tool call unless ``tool_timeout_s`` says otherwise (a live ``visit`` of
5 pages may take 60 s per page)."""
MAX_ABANDONED_TOOL_CALLS = 4
"""Tool calls past their deadline that may still run on (in threads) per environment;
while this many do, further calls are refused with an error observation."""


class ResearchEnv(gym.Env[str, str]):
    """A ReAct research episode: a question, tool calls, a final answer.

    Args:
        tools: the tools the agent may call (objects implementing :class:`envs.tools.base.Tool`).
        tasks: a JSONL path or a list of task dicts (``question``, ``answer``, optional
            ``id``, ``aliases``, metadata).
        max_tool_calls: tool-call budget per episode.
        max_context_tokens: transcript budget, counted with ``tokenizer`` or estimated
            (:mod:`envs.context`).
        tokenizer: anything with ``encode(text)`` (or a callable), for exact counts.
        reward_weights: ``(w_format, w_answer)``; see :mod:`envs.rewards`.
        judge: ``"em_f1"`` (default), ``"f1"``, or a :class:`envs.judges.Judge`.
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the ChatML transcript).
        system_prompt: replaces the generated system prompt verbatim.
        current_date: ``YYYY-MM-DD`` for the system prompt; default today.
        max_format_errors: consecutive turns with neither a tool call nor an answer that
            end the episode (``termination="format_error"``).
        tool_timeout_s: wall-clock deadline of one tool call, in seconds: one number for
            every tool, or a mapping from tool name to seconds (tools not named get
            :data:`DEFAULT_TOOL_TIMEOUT_S`). A call past its deadline is abandoned (see
            :mod:`envs.deadline`): the agent gets an error observation, ``info`` has
            ``tool_timed_out=True``, and the episode goes on.

    ``reset(options=...)`` accepts ``{"task": {...}}`` (a task dict) or
    ``{"task_index": i}``; otherwise it uses :attr:`next_task` when one was set, and
    otherwise draws a task with the environment's random generator, so a seeded reset
    picks the same task every time.

    :attr:`next_task` gives each sub-environment of a vector environment its own task,
    including on autoreset: ``vec.set_attr("next_task", [t0, t0, t1, t1])`` (a GRPO group
    is G sub-environments on one task). It is used by one reset and then cleared.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, tools: Sequence[Tool], tasks: str | os.PathLike | Sequence[dict], *,
                 max_tool_calls: int = 100, max_context_tokens: int = 131072, tokenizer: Any = None,
                 reward_weights: tuple[float, float] = (0.0, 1.0), judge: str | Judge = "em_f1",
                 render_mode: str | None = None, system_prompt: str | None = None,
                 current_date: str | None = None, max_format_errors: int = 3,
                 tool_timeout_s: float | Mapping[str, float] = DEFAULT_TOOL_TIMEOUT_S):
        self._tools = _check_tools(tools)
        self._tools_by_name = {t.name: t for t in self._tools}
        self.tasks: list[Task] = load_tasks(tasks)
        for name, value, low in (("max_tool_calls", max_tool_calls, 1), ("max_context_tokens", max_context_tokens, 1),
                                 ("max_format_errors", max_format_errors, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.max_tool_calls = max_tool_calls
        self.max_context_tokens = max_context_tokens
        self.max_format_errors = max_format_errors
        self.tool_timeouts = _check_timeouts(tool_timeout_s, self._tools_by_name)
        self.reward_weights = check_weights(reward_weights)
        self.judge = make_judge(judge)
        self.render_mode = render_mode
        self.current_date = _check_date(current_date)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be a string, got {type(system_prompt).__name__}")
        self.system_prompt = system_prompt if system_prompt is not None else prompts.system_prompt(
            self._tools, self.current_date)
        self._counter = TokenCounter(tokenizer)
        self._system_tokens = self._counter.message_tokens("system", self.system_prompt)
        self.observation_space = ModelText(MAX_TEXT_CHARS)
        self.action_space = ModelText(MAX_TEXT_CHARS)
        self._closers: list[Callable[[], None]] = []
        self._closed = False
        self._task: Task | None = None
        self.next_task: Task | dict | None = None
        """The task of the next reset that names none (then cleared); see the class docstring."""
        self._messages: list[dict[str, str]] = []
        self._done = False

    # ------------------------------------------------------------------ public API

    @property
    def tools(self) -> list[Tool]:
        """The tools, in the order the system prompt lists them."""
        return list(self._tools)

    @property
    def task(self) -> Task | None:
        """The current episode's task (``None`` before the first reset)."""
        return self._task

    def messages(self) -> list[dict]:
        """The ChatML transcript so far: a fresh list of ``{"role", "content"}`` dicts."""
        return [dict(m) for m in self._messages]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self._pick_task(options)
        question = to_model_text(self._task.question)
        self._messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": question}]
        self._tokens = self._system_tokens + self._counter.message_tokens("user", question)
        self._num_tool_calls = 0
        self._turns = 0
        self._format_errors_in_row = 0
        self._all_strict = True
        self._final_turn: Termination | None = None  # the budget that asked for the answer now
        self._done = False
        obs = to_model_text(prompts.render_chatml(self._messages))
        info = {"task_id": self._task.id, "num_tool_calls": 0, "transcript_tokens": self._tokens,
                "transcript_messages": len(self._messages)}
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise ResetNeeded("call reset() before step()")
        if self._done:
            raise ResetNeeded("the episode has ended (terminated or truncated); call reset() before step()")
        if not isinstance(action, str):
            raise TypeError(f"the action must be a string (the model's turn), got {type(action).__name__}")
        action = without_surrogates(str(action))
        self._turns += 1
        self._add("assistant", action)
        turn = parse_turn(action)
        self._all_strict = self._all_strict and turn.strict
        info = self._base_info(turn)
        if turn.kind == "answer":
            return self._finish_with_answer(turn, info)
        if self._final_turn is not None:
            return self._truncate(self._final_turn, info)
        if turn.kind == "tool_call":
            self._format_errors_in_row = 0
            self._num_tool_calls += 1
            info["num_tool_calls"] = self._num_tool_calls
            # Cut the tool's text, not the wrapped message, so </tool_response> and notes survive.
            content = prompts.tool_response(to_model_text(self._tool_output(turn, info), _TOOL_TEXT_CHARS))
        else:
            self._format_errors_in_row += 1
            if self._format_errors_in_row >= self.max_format_errors:
                return self._truncate("format_error", info)
            content = prompts.format_error_message(turn.problems, self._tools)
        content = self._apply_budgets(content, info)
        content = to_model_text(content)
        self._add("user", content)
        info["transcript_tokens"] = self._tokens
        info["transcript_messages"] = len(self._messages)
        return content, 0.0, False, False, info

    def render(self) -> str | None:
        if self.render_mode is None:
            gym.logger.warn("render() was called without a render_mode; make the environment with render_mode='ansi'")
            return None
        return prompts.render_chatml(self._messages)

    def add_closer(self, fn: Callable[[], None]) -> None:
        """Have :meth:`close` call ``fn()`` (in the order added; once, however often it is added):
        for resources the environment's factory built and the environment now owns."""
        if not callable(fn):
            raise ValueError(f"add_closer: expected a callable, got {type(fn).__name__}")
        if fn not in self._closers:
            self._closers.append(fn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for close in self._closers:
            close()

    # ------------------------------------------------------------------ internals

    def _pick_task(self, options: dict[str, Any] | None) -> Task:
        options = options or {}
        if not isinstance(options, dict):
            raise ValueError(f"options must be a dict, got {type(options).__name__}")
        unknown = set(options) - {"task", "task_index"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'task' or 'task_index'")
        if "task" in options:
            task = options["task"]
            return task if isinstance(task, Task) else task_from_dict(task, "options['task']")
        if "task_index" in options:
            index = options["task_index"]
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.tasks):
                raise ValueError(f"task_index must be an integer in [0, {len(self.tasks)}), got {index!r}")
            return self.tasks[index]
        if self.next_task is not None:
            task, self.next_task = self.next_task, None
            return task if isinstance(task, Task) else task_from_dict(task, "next_task")
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _add(self, role: str, content: str) -> None:
        self._messages.append({"role": role, "content": content})
        self._tokens += self._counter.message_tokens(role, content)

    def _base_info(self, turn: ParsedTurn) -> dict[str, Any]:
        return {
            "task_id": self._task.id, "turn": self._turns, "num_tool_calls": self._num_tool_calls,
            "format_ok": turn.strict, "format_problems": list(turn.problems),
            "tool_name": "", "tool_ok": False, "tool_latency_s": 0.0, "tool_error": "", "tool_metadata": {},
            "tool_data": {},
            "is_correct": False, "answer": "", "answer_score": 0.0, "termination": "", "final_turn": False,
            "transcript_tokens": self._tokens, "transcript_messages": len(self._messages),
        }

    def _finish_with_answer(self, turn: ParsedTurn, info: dict[str, Any]) -> tuple[str, float, bool, bool, dict]:
        answer = turn.answer or ""
        termination: Termination = "answer"
        try:
            judgement = self.judge(self._task.question, answer, self._task.answers)
        except Exception as exc:  # a judge that fails must not take the episode down: the answer scores as
            judgement = Judgement(0.0, False, {})  # wrong (reward 0), marked so that the error rate is reported
            info["judge_error"] = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
            termination = "judge_error"
        score = float(judgement.score)
        format_ok = self._all_strict
        reward = episode_reward(self.reward_weights, format_ok, score) if termination == "answer" else 0.0
        info.update(answer=answer, is_correct=bool(judgement.is_correct), answer_score=score,
                    judge_details=dict(judgement.details), termination=termination, episode_format_ok=format_ok)
        self._done = True
        return "", reward, True, False, info

    def _truncate(self, reason: Termination, info: dict[str, Any]) -> tuple[str, float, bool, bool, dict]:
        info.update(termination=reason, episode_format_ok=False)
        self._done = True
        return "", 0.0, False, True, info

    def _tool_output(self, turn: ParsedTurn, info: dict[str, Any]) -> str:
        if turn.tool_call is None:
            example = prompts.usage_example(self._tools[0]) if self._tools else ""
            return (f"Error: {turn.tool_call_error}. A tool call is one JSON object with a \"name\" and an "
                    f"\"arguments\" object, for example:\n{example}")
        text = self._run_tool(turn.tool_call, info)
        if turn.num_tool_calls > 1:
            text += (f"\n\n(Note: your turn held {turn.num_tool_calls} tool calls; only the first was run. "
                     "Make one tool call per turn.)")
        return text

    def _run_tool(self, call: ToolCall, info: dict[str, Any]) -> str:
        info["tool_name"] = call.name
        info["tool_timed_out"] = False
        tool = self._tools_by_name.get(call.name) or next(
            (t for t in self._tools if call.name in getattr(t, "aliases", ())), None)
        if tool is None:
            names = ", ".join(self._tools_by_name) or "(none)"
            example = prompts.usage_example(self._tools[0]) if self._tools else "<answer>your answer</answer>"
            info["tool_error"] = f"unknown tool {call.name[:100]!r}"
            return f"Error: there is no tool named {call.name[:100]!r}. Available tools: {names}. For example:\n{example}"
        info["tool_name"] = tool.name
        timeout = self.tool_timeouts.get(tool.name, self.tool_timeouts[""])
        runner = self.__dict__.get("_tool_runner")
        if runner is None:  # made on first use: an environment that never calls a tool starts no thread
            runner = self._tool_runner = DeadlineRunner(MAX_ABANDONED_TOOL_CALLS, name=f"tool-call-{id(self):x}")
            self.add_closer(runner.close)
        arguments = dict(call.arguments)
        start = time.perf_counter()
        try:
            result = runner.run(lambda: tool(arguments), timeout)
        except (ToolTimeout, ToolBusy) as exc:
            info["tool_latency_s"] = time.perf_counter() - start
            info["tool_timed_out"] = True
            if isinstance(exc, ToolTimeout):
                info["tool_error"] = f"timeout: the {tool.name} tool did not answer within {timeout:g} s"
                return (f"Error: the {tool.name} tool did not answer within its deadline of {timeout:g} s; the call "
                        "was abandoned. Try again with a smaller request (fewer queries or pages, less work), "
                        "or continue with what you have.")
            info["tool_error"] = f"busy: {exc}"
            return (f"Error: the {tool.name} tool is not answering (earlier calls are still running past their "
                    "deadline); this call was not run. Continue with the information you have.")
        except Exception as exc:  # a failing tool must not end the episode: report it to the model and in info
            info["tool_latency_s"] = time.perf_counter() - start
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
            info["tool_error"] = error
            return (f"Error: the {tool.name} tool failed ({error}). Check the arguments; a correct call looks like:\n"
                    f"{prompts.usage_example(tool)}")
        info["tool_latency_s"] = time.perf_counter() - start
        if isinstance(result, str):
            result = ToolResult(text=result)
        if not isinstance(result, ToolResult):
            info["tool_error"] = f"the tool returned {type(result).__name__}, not a ToolResult"
            return f"Error: the {tool.name} tool returned no usable output."
        info["tool_ok"] = bool(result.ok)
        info["tool_metadata"] = dict(result.metadata or {})
        info["tool_data"] = dict(getattr(result, "data", None) or {})  # structured: hits, visited pages
        if not result.ok:  # say why in info too, not only to the model
            reason = getattr(result, "error", "") or str(result.text).strip().split("\n", 1)[0]
            info["tool_error"] = reason[:_ERROR_CHARS]
        return result.text if isinstance(result.text, str) else str(result.text)

    def _apply_budgets(self, content: str, info: dict[str, Any]) -> str:
        if self._num_tool_calls >= self.max_tool_calls:
            self._final_turn = "max_tool_calls"
            content = f"{content}\n\n{prompts.answer_now_tool_calls(self.max_tool_calls)}"
        tokens_after = self._tokens + self._counter.message_tokens("user", content)
        if tokens_after >= self.max_context_tokens:
            # As the reference agent does: the answer-now request replaces the last observation.
            self._final_turn = "context_limit"
            content = prompts.ANSWER_NOW_CONTEXT
        info["final_turn"] = self._final_turn is not None
        return content


def _check_tools(tools: Sequence[Tool]) -> list[Tool]:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise ValueError(f"tools must be a sequence of Tool objects, got {type(tools).__name__}")
    names: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Tool):
            raise ValueError(f"expected Tool objects (name, description, parameters, __call__), got {type(tool).__name__}")
        if not isinstance(tool.name, str) or not tool.name:
            raise ValueError(f"a tool's name must be a non-empty string, got {tool.name!r}")
        if tool.name in names:
            raise ValueError(f"two tools are named {tool.name!r}")
        if not isinstance(tool.parameters, dict):
            raise ValueError(f"tool {tool.name!r}: parameters must be a JSON-schema dict, got {type(tool.parameters).__name__}")
        names.add(tool.name)
    return list(tools)


def _check_timeouts(value: float | Mapping[str, float], tools: Mapping[str, Tool]) -> dict[str, float]:
    """``{tool name: seconds}`` with the default under ``""``."""
    def seconds(x: Any, what: str) -> float:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= 86400:
            raise ValueError(f"{what} must be seconds in (0, 86400], got {x!r}")
        return float(x)

    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(tools))
        if unknown:
            raise ValueError(f"tool_timeout_s names unknown tools {unknown}; the tools are {sorted(tools)}")
        out = {str(k): seconds(v, f"tool_timeout_s[{k!r}]") for k, v in value.items()}
        return {"": DEFAULT_TOOL_TIMEOUT_S, **out}
    return {"": seconds(value, "tool_timeout_s")}


def _check_date(date: str | None) -> str:
    if date is None:
        return datetime.date.today().isoformat()
    try:
        return datetime.date.fromisoformat(str(date)).isoformat()
    except ValueError:
        raise ValueError(f"current_date must be YYYY-MM-DD, got {date!r}") from None
