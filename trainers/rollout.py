"""Rollouts: a policy over many environment episodes at once, with exact token ids.

``collect(policy, tasks, config, group_size)`` runs ``len(tasks) * group_size`` episodes,
index ``i * group_size + j`` being task ``i`` (a GRPO group is ``group_size`` consecutive
trajectories), on ``config.num_envs`` environments made with ``gym.make(config.env_id,
**config.env_kwargs)``. :func:`iter_collect` yields trajectories as they finish.

**Asynchronous, batched.** Environment resets and steps (the tool calls) run in a thread
pool. The main thread generates one turn for every episode that is waiting for the model,
in one batched ``policy.generate`` call, hands each turn to its environment, and then takes
whatever the pool has finished: episodes whose tool call is slow simply miss a batch, and
a finished episode frees its environment for the next task at once (asynchronous refill).
Text-only policies (:class:`trainers.policies.TextPolicy`, e.g. an OpenAI-compatible
endpoint) run each episode's turn, generation and step together, in the pool.

**Exact ids.** A trajectory's ``token_ids`` are the ids the policy sampled (loss 1, with
their sampling log-probabilities) and the ids of the text the environment added
(:func:`envs.tokens.observation_ids`, loss 0); nothing the policy sampled is ever decoded
and re-encoded for training. The text handed to the environment is the decoded turn, so
``messages`` is what the environment saw. A turn cut off by ``max_new_tokens`` (or ended by
EOS instead of the end-of-turn marker) is closed with the marker's ids (loss 0).

Episodes end as the environment says (``info["termination"]``: ``answer``,
``max_tool_calls``, ``context_limit``, ``format_error``, ``time_limit`` from
:class:`envs.wrappers.EpisodeTimeLimit`), or with ``context_limit`` here when the ids reach
``max_total_tokens``, or ``token_limit`` here when the environment took a final answer from a
turn that ``max_new_tokens`` cut off (``<answer>Par``: the model never finished it, so the episode
is scored as one without an answer: reward 0, not correct, the environment's verdict kept in
``info["cut_answer"]``), or ``env_error`` if the environment raised, or ``policy_error`` if a text
policy's endpoint gave no completion (:class:`trainers.policies.PolicyError`); the run goes on.

**One episode's rules, shared.** Batching generation across environments needs its own
scheduling loop (the single-episode loop of :func:`envs.episode.run_episode` plays one
environment at a time); what an episode's end means comes from :mod:`envs.episode` for both:
the termination and truncation of an ended episode, what an exception makes of it, how a cut
final answer is scored, the transcript, and (:meth:`Trajectory.from_episode`) the record.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from collections import deque
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import gymnasium as gym
import torch

import envs  # noqa: F401  (registers the environment ids)
from envs.episode import Episode, cut_answer, ended_without_answer, failure_info, termination_of, transcript
from envs.tasks import Task, task_from_dict
from envs.tokens import (end_of_turn_ids, ends_with_any, observation_ids, prompt_ids, stop_sequences)
from envs.trajectory import trajectory_record
from envs.wrappers import EpisodeTimeLimit, check_seconds
from trainers.policies import Generation, Policy, TextPolicy
from trainers.rollout_options import SamplingOptions
from wiki_sim.common.errors import UserError


def make_env(env_id: str, kwargs: dict) -> gym.Env:
    """``gym.make(env_id, **kwargs)``; any failure is a ``UserError`` (the id and the keyword arguments
    are the user's; gymnasium's own errors, such as an unknown id, and a factory's ``TypeError`` are
    named with the id), so that the CLI answers with one line."""
    try:
        return gym.make(env_id, **kwargs)
    except UserError:
        raise
    except ValueError as exc:  # the id and keyword arguments are the user's
        raise UserError(str(exc)) from exc
    except Exception as exc:
        raise UserError(f"could not make the environment {env_id!r}: {type(exc).__name__}: {exc}") from exc


@dataclass
class RolloutConfig(SamplingOptions):
    """How episodes are run (``max_new_tokens``, ``temperature``, ``top_p``: :class:`trainers.rollout_options.SamplingOptions`)."""

    env_id: str = "websailor/WikiSim-v0"
    """Registered environment id, made with ``gym.make``."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` (``wiki_dir``, ``max_tool_calls``, ...; ``tasks`` defaults
    to the collected tasks, as every reset names its task anyway)."""
    num_envs: int = 8
    """Episodes running at once (environments made)."""
    tool_workers: int = 8
    """Threads for environment resets and steps (tool calls)."""
    max_total_tokens: int = 32768
    """Prompt plus trajectory ids per episode; reaching it ends the episode (``context_limit``)."""
    max_episode_seconds: float | None = 1800.0
    """Wall-clock limit per episode (:class:`envs.wrappers.EpisodeTimeLimit`); None: none."""
    use_chat_template: bool | None = None
    """None: the tokenizer's chat template when it has one, else the ChatML fallback (:mod:`envs.tokens`)."""
    per_episode_generators: bool = True
    """Sample each episode from its own ``torch.Generator`` (when the policy's ``generate`` takes
    ``generators``): what an episode samples depends on its seed alone, not on its batch neighbours or
    thread timing. False: torch's global generator (seeded by the caller)."""
    policy_name: str = "policy"
    """Written into each trajectory record's ``policy``."""
    seed: int = 0
    """Seeds each episode: its sampling generator and its environment reset both come from
    ``episode_seed(seed, task, j)``, so an episode samples the same whatever runs beside it."""
    min_batch_fraction: float = 0.5
    """async: generate once this share of the running episodes waits for the model ..."""
    max_batch_wait_s: float = 0.25
    """... or once this long has passed with at least one waiting (bigger batches, less GPU time per token)."""
    schedule: Literal["async", "lockstep"] = "async"
    """``async``: generate for whichever episodes are ready; ``lockstep``: wait for every running
    step first, as a synchronous vector environment does (kept for comparison, see
    ``benchmarks/rollout_async.py``)."""

    def __post_init__(self) -> None:
        if self.schedule not in ("async", "lockstep"):
            raise ValueError(f"schedule must be 'async' or 'lockstep', got {self.schedule!r}")
        super().__post_init__()
        for name in ("num_envs", "tool_workers", "max_total_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        check_seconds(self.max_episode_seconds)
        if not 0 <= self.min_batch_fraction <= 1:
            raise ValueError(f"min_batch_fraction must be in [0, 1], got {self.min_batch_fraction!r}")
        if not (isinstance(self.max_batch_wait_s, (int, float)) and 0 <= self.max_batch_wait_s < math.inf):
            raise ValueError(f"max_batch_wait_s must be a finite number >= 0, got {self.max_batch_wait_s!r}")
        if not isinstance(self.env_kwargs, Mapping):
            raise ValueError(f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")


@dataclass
class Trajectory:
    """One finished episode."""

    task: dict[str, Any]
    messages: list[dict[str, str]]
    """The ChatML transcript as the environment kept it."""
    prompt_ids: list[int]
    """System and question, then the generation prompt ([] for text-only policies)."""
    token_ids: list[int]
    """Everything after the prompt: sampled ids and environment-added ids."""
    loss_mask: list[int]
    """1 on sampled ids, 0 on environment-added ids."""
    logprobs: list[float]
    """Sampling log-probabilities of sampled ids; 0.0 where the mask is 0."""
    reward: float
    is_correct: bool
    termination: str
    num_tool_calls: int
    truncated: bool
    """True when the episode ended without a final answer."""
    info: dict[str, Any]
    """The last step's ``info``."""
    index: int = 0
    """Position in the collection: ``task_index * group_size + j``."""
    num_turns: int = 0
    policy: str = "policy"
    last_turn_cut: bool = False
    """True when the last sampled turn was cut off by ``max_new_tokens`` (no stop sequence sampled):
    the trainer treats the episode as truncated, whatever the environment made of the cut text."""

    @classmethod
    def from_episode(cls, episode: Episode, index: int, policy: str) -> "Trajectory":
        """An episode played one at a time by an agent (:func:`envs.episode.run_episode`): no token ids."""
        termination = episode.termination
        return cls(task=episode.task.to_dict(), messages=episode.messages, prompt_ids=[], token_ids=[],
                   loss_mask=[], logprobs=[], reward=episode.reward, is_correct=episode.is_correct,
                   termination=termination, num_tool_calls=episode.num_tool_calls,
                   truncated=ended_without_answer(termination), info=dict(episode.info), index=index,
                   num_turns=episode.turns, policy=policy)

    def to_record(self, timing: bool = True) -> dict[str, Any]:
        """The trajectory JSONL record (``id``, ``task``, ``messages``, ``reward``, ``is_correct``,
        ``termination``, ``num_tool_calls``, ``policy``), plus the token fields and ``info``; ``timing=False``
        leaves out the wall-clock measurements (:data:`WALL_CLOCK_KEYS`), so that the record of a
        reproduced episode is byte-identical."""
        info = dict(self.info, termination=self.termination, is_correct=self.is_correct,
                    num_tool_calls=self.num_tool_calls)
        record = trajectory_record(task_from_dict(self.task), self.messages, self.reward, info, self.policy)
        kept = self.info if timing else {k: v for k, v in self.info.items() if k not in WALL_CLOCK_KEYS}
        record.update(prompt_ids=self.prompt_ids, token_ids=self.token_ids, loss_mask=self.loss_mask,
                      logprobs=self.logprobs, truncated=self.truncated, num_turns=self.num_turns,
                      last_turn_cut=self.last_turn_cut,
                      info=_jsonable(kept))
        return record


WALL_CLOCK_KEYS = ("episode_seconds", "tool_latency_s")
"""``info`` entries that measure time, not what happened."""


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data (anything unknown as its ``str``)."""
    return json.loads(json.dumps(value, default=str))


@dataclass
class _Episode:
    index: int
    task: dict[str, Any]
    slot: int
    messages: list[dict[str, str]] = field(default_factory=list)
    prompt_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    turns: int = 0
    done: bool = False
    seed: int = 0
    generator: torch.Generator | None = None
    """This episode's own sampling generator (seeded from :func:`episode_seed`)."""
    last_cut: bool = False

    def add(self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None = None) -> None:
        self.token_ids += ids
        self.loss_mask += [mask] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)


class _Tokens:
    """The tokenizer-dependent pieces, computed once."""

    def __init__(self, tokenizer: Any, use_chat_template: bool | None):
        self.tokenizer, self.use_chat_template = tokenizer, use_chat_template
        self.stops = stop_sequences(tokenizer, use_chat_template=use_chat_template)
        self.end_of_turn = end_of_turn_ids(tokenizer, use_chat_template=use_chat_template)

    def prompt(self, messages: list[dict[str, str]]) -> list[int]:
        return prompt_ids(messages, self.tokenizer, use_chat_template=self.use_chat_template)

    def observation(self, content: str) -> list[int]:
        return observation_ids(content, self.tokenizer, use_chat_template=self.use_chat_template)

    def action_text(self, ids: list[int]) -> str:
        """The turn's text as the environment gets it: the sampled ids without their stop sequence."""
        for stop in self.stops:
            if ends_with_any(ids, [stop]):
                ids = ids[: len(ids) - len(stop)]
                break
        return self.tokenizer.decode(ids, skip_special_tokens=False)


def _tasks_as_dicts(tasks: Sequence[Mapping[str, Any] | Task]) -> list[dict[str, Any]]:
    out = []
    for i, t in enumerate(tasks):
        out.append(t.to_dict() if isinstance(t, Task) else task_from_dict(t, f"tasks[{i}]").to_dict())
    if not out:
        raise ValueError("tasks is empty: expected at least one task")
    return out


def episode_seed(seed: int, task: Mapping[str, Any], sample: int) -> int:
    """The seed of sample ``sample`` of ``task`` in a run seeded ``seed``: a hash of the three, so an
    episode's randomness depends on nothing else (not the task's position, the batch or the threads)."""
    key = json.dumps([int(seed), str(task.get("id", "")), str(task.get("question", "")), int(sample)])
    return int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:8], "big") >> 1


def _takes_generators(policy: Any) -> bool:
    """Whether ``policy.generate`` names a ``generators`` parameter (a policy without one samples as it likes)."""
    try:
        return "generators" in inspect.signature(policy.generate).parameters
    except (TypeError, ValueError):
        return False


def _takes_cache_keys(policy: Any) -> bool:
    """Whether ``policy.generate`` keeps keys and values per episode (``cache_keys``) and can ``release`` them."""
    try:
        takes = "cache_keys" in inspect.signature(policy.generate).parameters
    except (TypeError, ValueError):
        return False
    return takes and callable(getattr(policy, "release", None))


def _policy_kind(policy: Any) -> str:
    if callable(getattr(policy, "generate", None)):
        if getattr(policy, "tokenizer", None) is None:
            raise ValueError("a token policy needs a .tokenizer attribute (the one its ids belong to)")
        return "tokens"
    if callable(getattr(policy, "generate_text", None)):
        return "text"
    raise ValueError(f"expected a Policy (generate) or TextPolicy (generate_text), got {type(policy).__name__}")


def iter_collect(policy: Policy | TextPolicy, tasks: Sequence[Mapping[str, Any] | Task], config: RolloutConfig,
                 group_size: int = 1, progress: bool = True, progress_leave: bool = True) -> Iterator[Trajectory]:
    """Trajectories in the order they finish (see the module docstring). ``progress``: an episode bar on
    stderr (success so far, tool calls, sampled tokens/s, ETA); ``progress_leave=False`` clears it at the end."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    runner = _Runner(policy, _tasks_as_dicts(tasks), config, group_size, progress, progress_leave)
    yield from runner.run()


def collect(policy: Policy | TextPolicy, tasks: Sequence[Mapping[str, Any] | Task], config: RolloutConfig,
            group_size: int = 1, progress: bool = True, progress_leave: bool = True) -> list[Trajectory]:
    """All ``len(tasks) * group_size`` trajectories, ordered by index (group after group)."""
    return sorted(iter_collect(policy, tasks, config, group_size, progress, progress_leave), key=lambda t: t.index)


class _Runner:
    def __init__(self, policy: Any, tasks: list[dict[str, Any]], config: RolloutConfig, group_size: int,
                 progress: bool, progress_leave: bool = True):
        self.policy, self.config = policy, config
        self.kind = _policy_kind(policy)
        self.tokens = _Tokens(policy.tokenizer, config.use_chat_template) if self.kind == "tokens" else None
        self.tasks = tasks
        self.work = deque((i * group_size + j, task) for i, task in enumerate(tasks) for j in range(group_size))
        self.group_size = group_size
        # The same task listed twice (a caller that repeats prompts instead of asking for a group) must not
        # replay the same samples: its k-th listing numbers its samples from k * group_size.
        seen: dict[tuple[str, str], int] = {}
        self.repeat = []
        for task in tasks:
            key = (str(task.get("id", "")), str(task.get("question", "")))
            self.repeat.append(seen.get(key, 0))
            seen[key] = self.repeat[-1] + 1
        self.total = len(self.work)
        self.per_episode_generators = (config.per_episode_generators and self.kind == "tokens"
                                       and _takes_generators(policy))
        # Each episode's keys and values stay with the policy between its turns (released when it ends).
        self.cache_keys = self.kind == "tokens" and _takes_cache_keys(policy)
        self.run_key = object()
        self.progress, self.progress_leave = progress, progress_leave
        self.stats = {"correct": 0, "finished": 0, "tool_calls": 0, "sampled": 0}
        self.started = time.perf_counter()

    def _make_env(self, slot: int) -> gym.Env:
        kwargs = dict(self.config.env_kwargs)
        kwargs.setdefault("tasks", self.tasks)  # every reset names its task; this only satisfies the constructor
        env = make_env(self.config.env_id, kwargs)
        if self.config.max_episode_seconds is not None:
            env = EpisodeTimeLimit(env, self.config.max_episode_seconds)
        return env

    def run(self) -> Iterator[Trajectory]:
        bar = _progress_bar(self.total, self.progress_leave) if self.progress else None
        n_envs = min(self.config.num_envs, self.total)
        envs: list[gym.Env | None] = [None] * n_envs
        free = list(range(n_envs - 1, -1, -1))
        ready: list[_Episode] = []
        running: dict[Future, _Episode] = {}
        pool = ThreadPoolExecutor(self.config.tool_workers, thread_name_prefix="rollout-env")
        try:
            while self.work or ready or running:
                while free and self.work:
                    slot = free.pop()
                    if envs[slot] is None:
                        envs[slot] = self._make_env(slot)
                    index, task = self.work.popleft()
                    i, j = divmod(index, self.group_size)
                    sample = self.repeat[i] * self.group_size + j
                    ep = _Episode(index, task, slot, seed=episode_seed(self.config.seed, task, sample))
                    if self.per_episode_generators:
                        ep.generator = torch.Generator().manual_seed(ep.seed)
                    running[pool.submit(_reset, envs[slot], task, ep.seed)] = ep
                if ready:
                    ready.sort(key=lambda e: e.index)  # the same batches whatever order the steps finished in
                    for ep, text in self._generate(ready):
                        if ep.done:
                            continue
                        running[pool.submit(_step, envs[ep.slot], text)] = ep
                    finished = [ep for ep in ready if ep.done]
                    ready = []
                    for ep in finished:
                        yield from self._finish(ep, envs, free, bar)
                deadline = time.monotonic() + self.config.max_batch_wait_s
                while self._wait_more(ready, running, free, deadline):
                    if self.config.schedule == "lockstep":
                        done, _ = wait(list(running), return_when=ALL_COMPLETED)
                    else:
                        timeout = None if not ready else max(0.0, deadline - time.monotonic())
                        done, _ = wait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
                    for fut in [f for f in running if f in done]:
                        ep = running.pop(fut)
                        if self._advance(ep, fut, envs, pool, running):
                            ready.append(ep)
                        elif ep.done:
                            yield from self._finish(ep, envs, free, bar)
                    if self.config.schedule == "lockstep":
                        break
        finally:
            for fut in running:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            if self.cache_keys:
                self.policy.release([(self.run_key, i) for i in range(self.total)])
            for env in envs:
                if env is not None:
                    env.close()
            if bar is not None:
                bar.close()

    def _wait_more(self, ready: list[_Episode], running: dict, free: list[int], deadline: float) -> bool:
        """Whether to wait for more steps before the next generation."""
        if not running or (free and self.work):
            return False  # nothing to wait for, or new episodes to start first
        if not ready:
            return True
        # Some are ready: wait (up to the deadline) until a large enough share of the active episodes is.
        share = len(ready) / (len(ready) + len(running))
        return share < self.config.min_batch_fraction and time.monotonic() < deadline

    def _advance(self, ep: _Episode, fut: Future, envs: list, pool: ThreadPoolExecutor,
                 running: dict[Future, _Episode]) -> bool:
        """Take a finished reset/step; True when the episode now waits for a batched generation."""
        try:
            kind, payload = fut.result()
        except Exception as exc:  # one broken environment (or policy endpoint) must not end the run
            ep.info = failure_info(ep.info, exc)
            ep.done = True
            try:
                envs[ep.slot].close()
            except Exception:  # closing a broken environment may fail too; it is dropped either way
                pass
            envs[ep.slot] = None  # a fresh one for the next episode
            return False
        if kind == "reset":
            ep.messages = payload
            if self.kind == "tokens":
                ep.prompt_ids = self.tokens.prompt(ep.messages)
                return True
        else:
            obs, reward, terminated, truncated, info, messages = payload
            ep.reward += float(reward)
            ep.info, ep.messages = info, messages
            if terminated or truncated:
                ep.done = True
                if ep.last_cut:
                    ep.reward, ep.info = cut_answer(ep.reward, info)
                return False
            if self.kind == "tokens":
                ep.add(self.tokens.observation(obs), 0)
                return True
        running[pool.submit(self._text_turn, envs[ep.slot], ep)] = ep
        return False

    def _text_turn(self, env: gym.Env, ep: _Episode) -> tuple[str, Any]:
        gen = self.policy.generate_text([ep.messages], max_new_tokens=self.config.max_new_tokens,
                                        temperature=self.config.temperature, top_p=self.config.top_p,
                                        stop=["<tool_response>"])[0]
        ep.turns += 1
        return _step(env, gen.text)

    def _generate(self, ready: list[_Episode]) -> list[tuple[_Episode, str]]:
        """One batched generation over the waiting episodes (grouped by their token budget)."""
        by_budget: dict[int, list[_Episode]] = {}
        for ep in ready:
            left = self.config.max_total_tokens - len(ep.prompt_ids) - len(ep.token_ids)
            if left <= 0:
                ep.info = {**ep.info, "termination": "context_limit", "rollout_limit": "max_total_tokens"}
                ep.done = True
                continue
            by_budget.setdefault(min(self.config.max_new_tokens, left), []).append(ep)
        out = []
        for budget, eps in by_budget.items():
            extra: dict[str, Any] = {"generators": [ep.generator for ep in eps]} if self.per_episode_generators else {}
            if self.cache_keys:
                extra["cache_keys"] = [(self.run_key, ep.index) for ep in eps]
            gens = self.policy.generate([ep.prompt_ids + ep.token_ids for ep in eps], max_new_tokens=budget,
                                        temperature=self.config.temperature, top_p=self.config.top_p,
                                        stop_ids=self.tokens.stops, **extra)
            if len(gens) != len(eps):
                raise RuntimeError(f"the policy returned {len(gens)} generations for {len(eps)} prompts")
            for ep, gen in zip(eps, gens):
                out.append((ep, self._take_turn(ep, gen)))
        return out

    def _take_turn(self, ep: _Episode, gen: Generation) -> str:
        ids = list(gen.token_ids)
        if len(gen.logprobs) != len(ids):
            raise RuntimeError(f"the policy returned {len(gen.logprobs)} log-probabilities for {len(ids)} ids")
        ep.add(ids, 1, gen.logprobs)
        ep.turns += 1
        ep.last_cut = not ends_with_any(ids, self.tokens.stops)
        if not ends_with_any(ids, [self.tokens.end_of_turn]):
            ep.add(self.tokens.end_of_turn, 0)  # close the cut-off turn so the transcript stays ChatML
        return self.tokens.action_text(ids)

    def _show(self, bar: Any, ep: _Episode) -> None:
        """Advance the episode bar: success so far, mean tool calls, sampled tokens/s (ETA is tqdm's)."""
        s = self.stats
        s["finished"] += 1
        s["correct"] += bool(ep.info.get("is_correct", False))
        s["tool_calls"] += int(ep.info.get("num_tool_calls", 0) or 0)
        s["sampled"] += sum(ep.loss_mask)
        postfix = {"success": f"{s['correct']}/{s['finished']}", "calls": f"{s['tool_calls'] / s['finished']:.1f}"}
        if s["sampled"]:
            postfix["tok/s"] = f"{s['sampled'] / max(1e-9, time.perf_counter() - self.started):.0f}"
        bar.set_postfix(postfix, refresh=False)
        bar.update(1)

    def _finish(self, ep: _Episode, envs: list, free: list[int], bar: Any) -> Iterator[Trajectory]:
        free.append(ep.slot)
        if self.cache_keys:
            self.policy.release([(self.run_key, ep.index)])
        if bar is not None:
            self._show(bar, ep)
        termination = termination_of(ep.info)
        yield Trajectory(
            task=ep.task, messages=ep.messages, prompt_ids=ep.prompt_ids, token_ids=ep.token_ids,
            loss_mask=ep.loss_mask, logprobs=ep.logprobs, reward=ep.reward,
            is_correct=bool(ep.info.get("is_correct", False)), termination=termination,
            num_tool_calls=int(ep.info.get("num_tool_calls", 0)), truncated=ended_without_answer(termination),
            info=dict(ep.info), index=ep.index, num_turns=ep.turns, policy=self.config.policy_name,
            last_turn_cut=ep.last_cut)


def _reset(env: gym.Env, task: dict[str, Any], seed: int | None) -> tuple[str, Any]:
    env.reset(seed=seed, options={"task": task})
    return "reset", transcript(env)


def _step(env: gym.Env, text: str) -> tuple[str, Any]:
    obs, reward, terminated, truncated, info = env.step(text)
    return "step", (obs, reward, terminated, truncated, info, transcript(env))


def _progress_bar(total: int, leave: bool = True) -> Any:
    import sys

    from tqdm import tqdm

    from trainers.progress import screen

    return tqdm(total=total, desc="rollouts", unit="episode", file=sys.stderr, leave=leave, mininterval=0.5,
                **screen())


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Namespaced means over trajectories: ``rollout/*`` and ``env/*``."""
    n = len(trajectories)
    if n == 0:
        return {}
    mean: Callable[[Callable[[Trajectory], float]], float] = lambda f: sum(f(t) for t in trajectories) / n
    out = {
        "rollout/reward": mean(lambda t: t.reward),
        "rollout/length": mean(lambda t: len(t.token_ids)),
        "rollout/sampled_tokens": mean(lambda t: sum(t.loss_mask)),
        "rollout/num_turns": mean(lambda t: t.num_turns),
        "rollout/num_tool_calls": mean(lambda t: t.num_tool_calls),
        "rollout/truncated": mean(lambda t: float(t.truncated)),
        "env/accuracy": mean(lambda t: float(t.is_correct)),
        "env/answer_f1": mean(lambda t: float(t.info.get("answer_score", 0.0) or 0.0)),
    }
    for reason in sorted({t.termination for t in trajectories}):
        out[f"termination/{reason}"] = mean(lambda t: float(t.termination == reason))
    return {k: v for k, v in out.items() if math.isfinite(v)}
