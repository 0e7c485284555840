"""What GRPO does with rollouts between the environment and the loss: the batch it trains
on (which trajectories and groups count, as tensors) and the pool of tasks it draws from.

Pure bookkeeping, no model: every function here is tested on hand-made trajectories.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

import torch

from envs.protocol import CUT_OFF_TERMINATIONS
from trainers.losses import group_advantages

EqualGroups = Literal["keep", "dupo", "drop"]


@dataclass
class GroupStats:
    """How the groups of one step were treated."""

    groups: int = 0
    """Groups collected."""
    all_equal: int = 0
    """Groups whose rewards were all equal (no signal)."""
    dropped: int = 0
    """All-equal groups left out (``drop`` and ``dupo``)."""
    duplicated: int = 0
    """Groups with signal added again to fill the batch (``dupo``)."""
    excluded_trajectories: int = 0
    """Trajectories left out of the loss: cut off by a limit without an answer (``exclude_truncated``)."""
    error_trajectories: int = 0
    """Trajectories without a verdict (policy or environment error): always out of the loss, their
    reward replaced by the mean of their group's scored ones in the advantage baseline. An answer the
    judge could not grade is not one of them: it scores as wrong (reward 0) and stays in the loss."""


def select_groups(rewards: Sequence[float], group_size: int, mode: EqualGroups,
                  rng: random.Random) -> tuple[list[int], GroupStats]:
    """Which groups to train on, as group indices (a group may appear twice under ``dupo``).

    ``keep``: every group (all-equal ones have zero advantage and add nothing to the
    gradient, but count in the token mean). ``drop``: only groups with signal. ``dupo``
    (WebSailor's duplicating sampling policy): the groups with signal, then copies of them,
    drawn with ``rng``, until there are as many groups as were collected; when no group has
    signal the batch is empty.
    """
    n = len(rewards) // group_size
    signal = [g for g in range(n) if len(set(rewards[g * group_size:(g + 1) * group_size])) > 1]
    stats = GroupStats(groups=n, all_equal=n - len(signal))
    if mode == "keep":
        return list(range(n)), stats
    stats.dropped = n - len(signal)
    if mode == "drop" or not signal:
        return signal, stats
    extra = [rng.choice(signal) for _ in range(n - len(signal))]
    stats.duplicated = len(extra)
    return signal + extra, stats


@dataclass
class TrainBatch:
    """Padded tensors for one training step (right padding; ``L`` = longest prompt + continuation)."""

    input_ids: torch.Tensor
    """``(B, L)`` int64: prompt ids then the continuation (sampled and environment-added ids), then padding."""
    attention_mask: torch.Tensor
    """``(B, L)`` int64: 1 on real tokens."""
    loss_mask: torch.Tensor
    """``(B, L-1)`` float: 1 where position ``t+1`` holds a sampled id that is trained on (aligned with
    the model's prediction at ``t``); 0 on prompts, tool responses, padding and excluded trajectories."""
    old_logprobs: torch.Tensor
    """``(B, L-1)`` float: sampling log-probabilities, aligned as ``loss_mask`` (0 where it is 0)."""
    advantages: torch.Tensor
    """``(B,)`` float: one advantage per trajectory."""
    first_target: int
    """Smallest prompt length minus one: predictions before it are never trained on, so the
    LM head can skip them (``logits_to_keep``)."""

    def to(self, device: torch.device | str) -> "TrainBatch":
        return TrainBatch(self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device),
                          self.old_logprobs.to(device), self.advantages.to(device), self.first_target)

    def slice(self, rows: slice) -> "TrainBatch":
        """A micro-batch of rows (trailing all-padding columns removed)."""
        width = int(self.attention_mask[rows].sum(1).max().item()) if self.input_ids[rows].numel() else 1
        return TrainBatch(self.input_ids[rows, :width], self.attention_mask[rows, :width],
                          self.loss_mask[rows, :width - 1], self.old_logprobs[rows, :width - 1],
                          self.advantages[rows], min(self.first_target, max(width - 2, 0)))

    @property
    def num_tokens(self) -> int:
        """Trained tokens in the batch."""
        return int(self.loss_mask.sum().item())


def build_batch(trajectories: Sequence[Any], advantages: Sequence[float], include: Sequence[bool],
                pad_id: int) -> TrainBatch:
    """Tensors from trajectories (each has ``prompt_ids``, ``token_ids``, ``loss_mask`` and ``logprobs``:
    the ids the policy sampled and their log-probabilities, :class:`trainers.rollout.Trajectory`).

    ``include[i]`` False keeps trajectory ``i`` in the batch (so its group's layout stays) but
    zeroes its loss mask: it contributes no token and no gradient.
    """
    rows = []
    for traj, inc in zip(trajectories, include):
        prompt, cont = list(traj.prompt_ids), list(traj.token_ids)
        mask, lps = list(traj.loss_mask), list(traj.logprobs)
        if not (len(cont) == len(mask) == len(lps)):
            raise ValueError(f"trajectory token_ids ({len(cont)}), loss_mask ({len(mask)}) and logprobs "
                             f"({len(lps)}) must have the same length")
        if not prompt:
            raise ValueError("a trajectory must have at least one prompt id")
        m = [0] * (len(prompt) - 1) + [int(x) if inc else 0 for x in mask]
        lp = [0.0] * (len(prompt) - 1) + [float(x) if mk else 0.0 for x, mk in zip(lps, mask)]
        rows.append((prompt + cont, m, lp))
    width = max(len(r[0]) for r in rows)
    b = len(rows)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    att = torch.zeros((b, width), dtype=torch.long)
    lmask = torch.zeros((b, width - 1), dtype=torch.float32)
    old = torch.zeros((b, width - 1), dtype=torch.float32)
    for i, (seq, m, lp) in enumerate(rows):
        ids[i, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        att[i, :len(seq)] = 1
        lmask[i, :len(m)] = torch.tensor(m, dtype=torch.float32)
        old[i, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
    first = min(len(t.prompt_ids) for t in trajectories) - 1
    return TrainBatch(ids, att, lmask, old, torch.tensor(list(advantages), dtype=torch.float32), first)


Overlong = Literal["exclude", "penalize"]


def is_cut_off(traj: Any, overlong: Overlong = "exclude") -> bool:
    """True when the episode was cut off by a limit before a finished answer: the tool-call (turn)
    budget, the context, the wall clock, or the token limit of its last turn (``last_turn_cut``, set
    by the rollout; an answer the token limit cut, ``<answer>Par``, is ``token_limit``: truncated,
    not answered).

    An episode that ended on its own malformed turns (``format_error``) is *not* cut off, whatever
    token its last turn ended on (the end-of-turn marker or EOS): it stays in the loss with its
    reward, so that bad format is pushed down. Leaving it out would bias the update towards
    malformed turns (well-formed wrong answers get negative advantages, malformed ones would get
    none). Records without ``last_turn_cut`` (other producers) fall back to the loss mask: a last
    turn closed with ids the policy did not sample (mask 0) was cut.

    ``overlong="penalize"``: a last turn the token limit cut (``token_limit``) is the policy's own
    doing, not a budget the environment set, so such an episode is *not* cut off: it stays in the
    loss with its reward (0), which pushes down turns that run past the limit instead of ending
    (left out, as DAPO's overlong filtering does, they are never pushed down, while the end-of-turn
    marker of every wrong answer is)."""
    termination = str(getattr(traj, "termination", ""))
    if overlong == "penalize" and (termination == "token_limit" or
                                   (termination not in CUT_OFF_TERMINATIONS and getattr(traj, "last_turn_cut", None))):
        return False
    if termination in CUT_OFF_TERMINATIONS:
        return True
    cut = getattr(traj, "last_turn_cut", None)
    if cut is not None:
        return bool(cut)
    if termination == "answer":
        return False
    mask = list(getattr(traj, "loss_mask", []) or [])
    return bool(mask) and mask[-1] == 0


def is_error(traj: Any) -> bool:
    """True when the episode ended without a verdict (:data:`envs.protocol.ERROR_TERMINATIONS`):
    its reward says nothing about the policy, so it never feeds the loss."""
    from envs.protocol import ERROR_TERMINATIONS

    return str(getattr(traj, "termination", "")) in ERROR_TERMINATIONS


def impute_error_rewards(trajectories: Sequence[Any], group_size: int) -> list[float]:
    """Rewards with each error trajectory's (:func:`is_error`) replaced by the mean reward of the
    scored trajectories of its group (0 when none is scored), so that a failing policy endpoint or
    environment neither lowers the baseline of the others nor makes a group look as if it had signal."""
    rewards = [float(t.reward) for t in trajectories]
    for start in range(0, len(rewards), group_size):
        idx = range(start, min(start + group_size, len(rewards)))
        scored = [rewards[i] for i in idx if not is_error(trajectories[i])]
        fill = sum(scored) / len(scored) if scored else 0.0
        for i in idx:
            if is_error(trajectories[i]):
                rewards[i] = fill
    return rewards


def signal_groups(trajectories: Sequence[Any], group_size: int) -> list[int]:
    """The groups (indices) whose rewards, as :func:`prepare_step` sees them, are not all equal: the only ones
    with a gradient."""
    rewards = impute_error_rewards(trajectories, group_size)
    return [g for g in range(len(rewards) // group_size)
            if len(set(rewards[g * group_size:(g + 1) * group_size])) > 1]


def prepare_step(trajectories: Sequence[Any], group_size: int, *, advantage: Literal["loo", "mean"],
                 scale_std: bool, equal_groups: EqualGroups, exclude_truncated: bool,
                 rng: random.Random, overlong: Overlong = "exclude",
                 ) -> tuple[list[Any], list[float], list[bool], GroupStats]:
    """Choose groups, compute advantages and which trajectories feed the loss.

    Advantages are computed over the whole group, truncated trajectories included (their
    reward, usually 0, is part of the baseline; an error trajectory's reward is imputed,
    :func:`impute_error_rewards`, and it never feeds the loss); ``exclude_truncated`` then only takes the
    cut-off ones (:func:`is_cut_off`, with ``overlong``) out of the loss. Returns trajectories, advantages
    and ``include`` flags in training order, and the group statistics.
    """
    rewards = impute_error_rewards(trajectories, group_size)
    groups, stats = select_groups(rewards, group_size, equal_groups, rng)
    adv_all = group_advantages(torch.tensor(rewards, dtype=torch.float64), group_size, advantage, scale_std)
    out_t, out_a, out_inc = [], [], []
    for g in groups:
        for i in range(g * group_size, (g + 1) * group_size):
            t = trajectories[i]
            error = is_error(t)
            inc = not error and not (exclude_truncated and is_cut_off(t, overlong))
            stats.error_trajectories += int(error)
            stats.excluded_trajectories += 0 if inc or error else 1
            out_t.append(t)
            out_a.append(float(adv_all[i]))
            out_inc.append(inc)
    return out_t, out_a, out_inc, stats


TaskFilter = Callable[[list[dict]], list[dict]]


@dataclass
class TaskPool:
    """The tasks GRPO trains on, kept at a useful difficulty (the data-policy loop).

    ``active`` tasks are drawn in a shuffled round robin. After each step the outcomes of
    every rollout are recorded per task; a task whose last ``window`` outcomes are all
    failures or all successes is retired and replaced by the next fresh task from
    ``source`` (passed through ``task_filter`` first, when one is set: a synthesis
    filter that keeps tasks of useful difficulty). When ``source`` runs dry the pool
    shrinks, but never below ``min_active`` (the last tasks stay).
    """

    source: list[dict]
    """Every task available, in order; ``next_fresh`` points at the first not yet used."""
    pool_size: int
    """Active tasks to keep."""
    window: int
    """Outcomes per task that decide retirement (0 turns the data policy off)."""
    min_active: int = 1
    """Never retire below this many active tasks."""
    seed: int = 0
    """Shuffles the draw order."""
    task_filter: TaskFilter | None = None
    """Applied to each batch of fresh tasks before they join; returns the tasks to keep (possibly rewritten)."""
    accepted: list[dict] = field(default_factory=list)
    """Tasks that passed the filter, in order of acceptance; ``active`` indexes into it."""
    active: list[int] = field(default_factory=list)
    """Indices into ``accepted`` of the active tasks."""
    history: dict[int, list[float]] = field(default_factory=dict)
    """Per active task: its recent outcomes (1.0 correct, 0.0 not), newest last."""
    next_fresh: int = 0
    order: list[int] = field(default_factory=list)
    cursor: int = 0
    draws: int = 0
    retired: int = 0

    def __post_init__(self) -> None:
        if not self.source:
            raise ValueError("the task pool needs at least one task, got none")
        if not self.active:
            self.active = self._fresh(self.pool_size)
        if not self.active:
            raise ValueError(f"the task filter kept none of the {len(self.source)} tasks")

    def task(self, index: int) -> dict:
        return self.accepted[index]

    def _fresh(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n and self.next_fresh < len(self.source):
            stop = min(len(self.source), self.next_fresh + n - len(out))
            batch = [dict(t) for t in self.source[self.next_fresh:stop]]
            self.next_fresh = stop
            if self.task_filter is not None:
                batch = list(self.task_filter(batch))
            for t in batch:
                self.accepted.append(t)
                out.append(len(self.accepted) - 1)
        return out

    def draw(self, n: int) -> list[int]:
        """``n`` task indices for the next step (a shuffled round robin over the active tasks). Fewer than
        ``pool_size`` active tasks while ``source`` still has fresh ones (a resumed run whose ``source`` grew)
        are topped up first, and the round starts again with them."""
        if len(self.active) < self.pool_size and self.next_fresh < len(self.source):
            added = self._fresh(self.pool_size - len(self.active))
            if added:
                self.active += added
                self.order, self.cursor = [], 0
        picked = []
        for _ in range(n):
            if self.cursor >= len(self.order):
                self.order = list(self.active)
                random.Random(self.seed * 1_000_003 + self.draws).shuffle(self.order)
                self.draws += 1
                self.cursor = 0
            picked.append(self.order[self.cursor])
            self.cursor += 1
        return picked

    def record(self, task_indices: Iterable[int], outcomes: Iterable[float]) -> int:
        """Record outcomes, retire tasks whose recent pass rate is 0 or 1, refill; returns how many retired."""
        for i, o in zip(task_indices, outcomes):
            if i in self.active:
                self.history.setdefault(i, []).append(float(o))
                self.history[i] = self.history[i][-max(self.window, 1):]
        if self.window <= 0:
            return 0
        done = [i for i in self.active
                if len(self.history.get(i, [])) >= self.window and len(set(self.history[i])) == 1]
        if not done:
            return 0
        fresh = self._fresh(len(done))
        done = done[:len(fresh) + max(len(self.active) - self.min_active, 0)]
        self.active = [i for i in self.active if i not in done] + fresh
        for i in done:
            self.history.pop(i, None)
        self.order = [i for i in self.order[self.cursor:] if i in self.active]
        self.cursor = 0
        self.retired += len(done)
        return len(done)

    def state_dict(self) -> dict:
        return {"accepted": list(self.accepted), "active": list(self.active),
                "history": {str(k): v for k, v in self.history.items()}, "next_fresh": self.next_fresh,
                "order": list(self.order), "cursor": self.cursor, "draws": self.draws, "retired": self.retired}

    def load_state_dict(self, state: dict) -> None:
        self.accepted = [dict(t) for t in state["accepted"]]
        self.active = [int(i) for i in state["active"]]
        self.history = {int(k): [float(x) for x in v] for k, v in state["history"].items()}
        self.next_fresh, self.cursor = int(state["next_fresh"]), int(state["cursor"])
        self.order = [int(i) for i in state["order"]]
        self.draws, self.retired = int(state["draws"]), int(state["retired"])


def iter_chunks(n: int, size: int) -> Iterator[slice]:
    """Slices ``[0, size), [size, 2 size), ...`` covering ``range(n)``."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))
