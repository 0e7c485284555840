"""Memory and compute of the update: micro-batches by a token budget sized from the memory the process may
use, gradient checkpointing, and a forward pass that computes a prefix the rows share once.

The update's activation memory grows with the padded tokens of a forward pass (rows times the
longest row), not with the number of trajectories: 8 short episodes and one 16k-token episode
differ a thousandfold. :func:`budget_slices` therefore cuts a step's batch into contiguous row
ranges whose padded size stays within a token budget. Log-probabilities and entropies are
computed in chunks (:mod:`trainers.losses`), so the full-vocabulary part stays bounded too.

The budget by default (:func:`update_budget`): the memory the process may use (CPU: ``MemAvailable`` or
what the cgroup leaves, shared by the ranks of the host; GPU: ``torch.cuda.mem_get_info`` plus what
torch holds unused) minus a margin and what the update allocates besides activations (gradients, AdamW
state, the log-probability chunk), divided by an estimate of the bytes one token of a forward and
backward pass holds (:func:`bytes_per_token`, from the model's vocabulary, width, MLP width and depth).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Sequence

import torch


def budget_slices(lengths: Sequence[int], max_rows: int, max_tokens: int = 0) -> list[slice]:
    """Contiguous row ranges covering ``range(len(lengths))``: at most ``max_rows`` rows each (0: any
    number) and, when ``max_tokens > 0``, at most ``max_tokens`` padded tokens (rows x longest row). A
    row longer than ``max_tokens`` on its own is a range of its own (a sequence is never split)."""
    if max_rows < 0 or max_tokens < 0:
        raise ValueError(f"expected max_rows >= 0 and max_tokens >= 0, got {max_rows} and {max_tokens}")
    max_rows = max_rows or max(len(lengths), 1)
    out: list[slice] = []
    start, longest = 0, 0
    for i, n in enumerate(lengths):
        wider = max(longest, int(n))
        rows = i - start + 1
        if i > start and (rows > max_rows or (max_tokens and rows * wider > max_tokens)):
            out.append(slice(start, i))
            start, wider = i, int(n)
        longest = wider
    if len(lengths):
        out.append(slice(start, len(lengths)))
    return out


def batch_slices(batch: Any, max_rows: int, max_tokens: int = 0) -> list[slice]:
    """:func:`budget_slices` over a :class:`trainers.grpo_data.TrainBatch` (row lengths from its attention mask)."""
    return budget_slices(batch.attention_mask.sum(1).tolist(), max_rows, max_tokens)


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute each layer's activations in the backward pass (transformers models; non-reentrant,
    so it works with DDP and with inputs that need no gradient). Training then keeps one layer's
    activations at a time instead of all of them; generation is unaffected (eval mode keeps the KV cache)."""
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5 (the old name is deprecated)
    if callable(enable):
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
        return
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if not callable(enable):
        raise ValueError(f"gradient_checkpointing needs a transformers model with gradient_checkpointing_enable, "
                         f"got {type(model).__name__}")
    enable(gradient_checkpointing_kwargs={"use_reentrant": False})


# ---------------------------------------------------------------------- the token budget

GIB = 1024**3
DEFAULT_MAX_TOTAL_TOKENS = 32768
"""The rollouts' own limit per episode (``RolloutConfig.max_total_tokens``): the most the budget raises it to."""


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """What the update's memory depends on: the decoder's sizes and the parameters that train."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    kv_width: int
    """Key (and value) width per token: key-value heads x head size."""
    trainable: int
    """Parameters that get gradients and AdamW state."""
    param_bytes: int
    """Bytes per parameter (4 for fp32 master weights)."""


def model_shape(model: Any) -> ModelShape:
    """:class:`ModelShape` of a transformers causal LM (its text config), or ``ValueError`` naming what is missing."""
    config = getattr(model, "config", None)
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    values = {name: getattr(text, name, None) for name in ("vocab_size", "hidden_size", "num_hidden_layers")}
    if any(not isinstance(v, int) or v < 1 for v in values.values()):
        raise ValueError(f"cannot size the update from the model's config (expected positive vocab_size, "
                         f"hidden_size, num_hidden_layers), got {values}")
    hidden = values["hidden_size"]
    # MoE: the experts a token goes through, plus a shared expert where there is one
    experts = getattr(text, "num_experts_per_tok", None) or 0
    moe = (getattr(text, "moe_intermediate_size", None) or 0) * experts
    intermediate = max(int(getattr(text, "intermediate_size", None) or 4 * hidden), moe)
    heads = getattr(text, "num_attention_heads", None) or 1
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    params = [p for p in model.parameters() if p.requires_grad]
    return ModelShape(vocab=values["vocab_size"], hidden=hidden, intermediate=intermediate,
                      layers=values["num_hidden_layers"], kv_width=kv_heads * head_dim,
                      trainable=sum(p.numel() for p in params),
                      param_bytes=max((p.element_size() for p in params), default=4))


def bytes_per_token(shape: ModelShape, dtype: str = "float32", checkpointing: bool = False) -> int:
    """Bytes one padded token holds at the peak of a forward and backward pass (``GRPOTrainer._micro_step``).

    Per layer, what autograd keeps (norm inputs and outputs, queries, keys, values, attention output, the
    MLP's gate, up and product) and the gradients of the backward pass: ``4 x (10 h + 5 I + 4 kv)`` bytes in
    fp32; with gradient checkpointing each layer keeps ``4 x 4 h`` and one layer is recomputed at a time.
    The logits and their gradient: 12 bytes per vocabulary entry in fp32 (8 with bf16 autocast). Measured on
    CPU with SmolLM2-135M's shape (peak growth from 2,048 to 4,096 tokens): 1.46 MiB per token in fp32
    (estimate 2.19 MiB), 0.81 with checkpointing (0.88), 1.29 with bf16 autocast (1.89); whole updates
    (``python -m benchmarks.update_memory --shape smollm2``) peak at 0.65-0.81 of the estimate. It errs on
    the large side: an OOM kill says nothing."""
    h, i, kv = shape.hidden, shape.intermediate, shape.kv_width
    layer = 4 * (10 * h + 5 * i + 4 * kv)
    kept = shape.layers * 4 * 4 * h + layer if checkpointing else shape.layers * layer
    if dtype == "bfloat16":  # CPU autocast keeps many ops in fp32: 0.88x measured; a GPU saves more
        kept = int(kept * 0.93)
    logits = (8 if dtype == "bfloat16" else 12) * shape.vocab
    return int(kept + logits)


def fixed_bytes(shape: ModelShape, dtype: str = "float32", optimizer_ready: bool = False,
                chunk: int | None = None) -> int:
    """What an update allocates whatever its length: gradients, AdamW's two moments (unless ``optimizer_ready``:
    they exist already), bf16 copies of the weights under autocast, and the fp32 work of one log-probability
    chunk (:data:`trainers.losses.LOGPROB_CHUNK` positions over the vocabulary, three tensors at once)."""
    from trainers.losses import LOGPROB_CHUNK

    grads = shape.trainable * shape.param_bytes
    adam = 0 if optimizer_ready else 2 * shape.trainable * 4
    casts = shape.trainable * 2 if dtype == "bfloat16" else 0
    scratch = 3 * (chunk or LOGPROB_CHUNK) * shape.vocab * 4
    return grads + adam + casts + scratch


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_left() -> int | None:
    """Bytes this process's cgroup may still allocate (limit minus usage, reclaimable page cache not counted);
    None without a limit."""
    root = Path("/sys/fs/cgroup")
    for limit_file, usage_file, stat_file, cache_key in (
            ("memory.max", "memory.current", "memory.stat", "inactive_file"),  # cgroup v2
            ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "memory/memory.stat",
             "total_inactive_file")):  # v1
        limit = _read_int(root / limit_file)
        usage = _read_int(root / usage_file)
        if limit is None or usage is None or limit >= 2**60:
            continue
        cache = 0
        try:
            for line in (root / stat_file).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == cache_key and value.strip().isdigit():
                    cache = int(value)
        except OSError:
            pass
        return max(limit - usage + cache, 0)
    return None


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory(device: torch.device | str, local_ranks: int = 1) -> tuple[int, str]:
    """``(bytes, where from)``: what the process may still allocate on ``device``. CPU: the smaller of
    ``MemAvailable`` and what the cgroup leaves, divided among the ``local_ranks`` processes of the host;
    GPU: free device memory plus what torch's allocator holds unused."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + cached), f"free memory of {device}"
    found = [(v, name) for v, name in ((_mem_available(), "MemAvailable"), (_cgroup_left(), "the cgroup's limit"))
             if v is not None]
    if not found:
        return 0, "no /proc/meminfo"
    value, name = min(found)
    share = f", shared by {local_ranks} processes" if local_ranks > 1 else ""
    return value // max(local_ranks, 1), f"{name}{share}"


@dataclasses.dataclass(frozen=True)
class UpdateBudget:
    """The longest padded token count one forward/backward pass may hold, and how it was found."""

    tokens: int
    """Padded tokens per pass (rows x longest row): also the longest trajectory an update can take."""
    usable_bytes: int
    """Memory the update may use for activations (after the margin and the fixed part)."""
    per_token: int
    """Estimated bytes per padded token (:func:`bytes_per_token`)."""
    source: str
    """Where the memory figure came from, for messages."""

    def describe(self) -> str:
        return (f"{self.tokens} tokens per forward/backward pass ({self.usable_bytes / GIB:.1f} GiB for activations "
                f"at about {self.per_token / 2**20:.2f} MiB per token; memory from {self.source})")


def update_budget(model: Any, device: torch.device | str, dtype: str = "float32", checkpointing: bool = False,
                  memory_gb: float = 0.0, local_ranks: int = 1, optimizer_ready: bool = False,
                  reference: bool = False) -> UpdateBudget:
    """:class:`UpdateBudget` for ``model`` on ``device``: the memory the process may use (``memory_gb`` when
    > 0, else :func:`available_memory`) minus a margin (10%, at least 1 GiB: tool output, the allocator's
    slack) and :func:`fixed_bytes`, over :func:`bytes_per_token` (plus a reference model's fp32 logits when
    ``reference``: the KL penalty)."""
    shape = model_shape(model)
    if memory_gb > 0:
        total, source = int(memory_gb * GIB), "--update-memory-gb"
    else:
        total, source = available_memory(device, local_ranks)
    margin = max(GIB, total // 10)
    usable = max(total - margin - fixed_bytes(shape, dtype, optimizer_ready), 0)
    per_token = bytes_per_token(shape, dtype, checkpointing) + (4 * shape.vocab if reference else 0)
    return UpdateBudget(tokens=usable // per_token, usable_bytes=usable, per_token=per_token,
                        source=f"{source}: {total / GIB:.1f} GiB")


def local_ranks() -> int:
    """Processes of this job on this host (``LOCAL_WORLD_SIZE`` under torchrun), which share its RAM."""
    try:
        return max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


# ---------------------------------------------------------------------- a shared prefix computed once


def cache_keyword(model: Any) -> str | None:
    """The keyword ``model.forward`` takes a KV cache by, when a forward pass can start from a shared
    prefix's keys and values and keep only the logits it needs (:func:`trainers.decode.cache_keyword`,
    plus ``logits_to_keep``); None otherwise."""
    from trainers import decode

    keyword = decode.cache_keyword(model)
    return keyword if keyword is not None and "logits_to_keep" in decode.forward_params(model) else None


@dataclasses.dataclass
class PrefixLevel:
    """One forward pass over the distinct prefixes of a batch up to ``end``."""

    end: int
    rows: torch.Tensor
    """Representative batch row of each distinct prefix (``(U,)``)."""
    parent: torch.Tensor | None
    """For each of them, its row in the previous level's cache (None for the first level)."""


def _distinct(prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first row of each distinct row of prefix, index of each row's distinct row)``."""
    _, inverse = torch.unique(prefix, dim=0, return_inverse=True)
    n = int(inverse.max()) + 1
    first = torch.full((n,), prefix.shape[0], dtype=torch.long, device=prefix.device)
    first.scatter_reduce_(0, inverse, torch.arange(prefix.shape[0], device=prefix.device), reduce="amin")
    return first, inverse


def _common_prefix(ids: torch.Tensor, limit: int) -> int:
    same = (ids[:, :limit] == ids[:1, :limit]).all(0)
    diff = (~same).nonzero()
    return int(diff[0]) if len(diff) else limit


def prefix_plan(ids: torch.Tensor, first_target: int, call_cost: int = 64,
                min_prefix: int = 16) -> tuple[list[PrefixLevel], torch.Tensor] | None:
    """How to forward ``ids`` ``(B, L)`` (right-padded; every row real up to ``first_target``) with its shared
    prefixes computed once: the batch's common prefix (the system prompt) once, then each distinct prompt
    once (the G rollouts of a task share theirs), then every row from there. Returns the levels and each
    row's index into the last level's cache, or None when splitting saves nothing: it is chosen by the token
    positions each plan computes, each extra forward call counted as ``call_cost`` positions."""
    b, width = ids.shape
    if b < 2 or first_target < min_prefix:
        return None
    common = min(_common_prefix(ids, first_target), first_target)
    ends = sorted({e for e in (common, first_target) if e >= min_prefix})
    if not ends:
        return None
    distinct = {e: _distinct(ids[:, :e]) for e in ends}
    best, best_cost = None, b * width
    for plan in ([ends[-1]], ends) if len(ends) > 1 else ([ends[0]],):
        cost, start = 0, 0
        for e in plan:
            cost += len(distinct[e][0]) * (e - start) + call_cost
            start = e
        cost += b * (width - start)
        if cost < best_cost:
            best, best_cost = plan, cost
    if best is None:
        return None
    levels, previous = [], None
    for e in best:
        rows, _ = distinct[e]
        parent = None if previous is None else distinct[previous][1][rows]
        levels.append(PrefixLevel(e, rows, parent))
        previous = e
    return levels, distinct[previous][1]


def update_logits(model: Any, ids: torch.Tensor, attention_mask: torch.Tensor, first_target: int,
                  share_prefix: bool = True) -> torch.Tensor:
    """Logits ``(B, L - 1 - first_target, V)`` of positions ``first_target .. L - 2`` (the predictions of
    tokens ``first_target + 1 ..``), contiguous, for a right-padded batch.

    With ``share_prefix`` and a model that takes a cache (:func:`cache_keyword`), the prefixes rows share
    (:func:`prefix_plan`) are computed once and their keys and values repeated for the rows: the same
    function of the weights (gradients flow through the shared keys and values), on fewer positions (a
    group of G rollouts computes its prompt once instead of G times). Gradient checkpointing or a wrapper
    that needs one forward per backward (DDP, FSDP) should pass ``share_prefix=False``."""
    width = ids.shape[1]
    keep = torch.arange(first_target, width - 1, device=ids.device)
    keyword = cache_keyword(model) if share_prefix else None
    found = prefix_plan(ids, first_target) if keyword is not None else None
    if found is None:
        return model(input_ids=ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False).logits
    levels, rows = found
    cache, start = None, 0
    for level in levels:
        if level.parent is not None:
            cache.batch_select_indices(level.parent)
        part = ids[level.rows, start:level.end]
        positions = torch.arange(start, level.end, device=ids.device).expand(len(level.rows), -1)
        out = model(input_ids=part, attention_mask=torch.ones((len(level.rows), level.end), dtype=attention_mask.dtype,
                                                              device=ids.device),
                    position_ids=positions, use_cache=True, logits_to_keep=1, **{keyword: cache})
        cache, start = _cache_of(out), level.end
    cache.batch_select_indices(rows)
    positions = torch.arange(start, width, device=ids.device).expand(ids.shape[0], -1)
    return model(input_ids=ids[:, start:], attention_mask=attention_mask, position_ids=positions,
                 logits_to_keep=keep - start, use_cache=True, **{keyword: cache}).logits


def _cache_of(output: Any) -> Any:
    """The cache a forward pass returned (``cache`` from transformers 5.x on, ``past_key_values`` before)."""
    found = output.get("cache") if hasattr(output, "get") else None
    return found if found is not None else output["past_key_values"]


# ---------------------------------------------------------------------- the trainer's limits

HOLD_MORE = "--gradient-checkpointing, --dtype bfloat16 or --lora-r 16 hold longer ones"


def resolve_limits(config: Any, model: Any, device: torch.device, *, reference: bool = False,
                   say: Any = print) -> tuple[int, int]:
    """``(max_total_tokens, capacity)`` for a GRPO run, before any rollout: the rollouts' limit
    (``config.max_total_tokens``, or the memory budget up to 32768) and the longest trajectory one pass can
    hold (the default pass budget; 0: unknown). A
    ``max_total_tokens`` the memory cannot hold, or a budget below one turn, is a one-line :class:`UserError`
    naming the options to change; a budget below 32768 is said in one line (``say``)."""
    from wiki_sim.common.errors import UserError

    try:
        budget = update_budget(model, device, config.dtype, config.gradient_checkpointing, config.update_memory_gb,
                               local_ranks() if torch.device(device).type == "cpu" else 1, reference=reference)
    except ValueError as exc:
        say(f"grpo: {exc}: no token budget for the update (set --micro-batch-tokens and --max-total-tokens)")
        return config.max_total_tokens or DEFAULT_MAX_TOTAL_TOKENS, 0
    capacity = budget.tokens
    if config.max_total_tokens > capacity:
        raise UserError(f"--max-total-tokens {config.max_total_tokens}: a trajectory that long does not fit one "
                        f"update pass, which holds {budget.describe()}; lower --max-total-tokens, or "
                        f"{HOLD_MORE} (--update-memory-gb overrides the memory figure)")
    floor = config.max_new_tokens + 1024
    if not config.max_total_tokens and capacity < floor:
        raise UserError(f"the update holds only {budget.describe()}: less than a prompt and one turn of "
                        f"--max-new-tokens {config.max_new_tokens}; {HOLD_MORE}, or free memory "
                        f"(--update-memory-gb overrides the memory figure)")
    max_total = config.max_total_tokens or min(capacity, DEFAULT_MAX_TOTAL_TOKENS)
    if not config.max_total_tokens and capacity < DEFAULT_MAX_TOTAL_TOKENS:
        say(f"grpo: the update holds {budget.describe()}: episodes end at {max_total} tokens "
            f"(--max-total-tokens); {HOLD_MORE}")
    return max_total, capacity


def trainable_rows(trajectories: Sequence[Any], advantages: Sequence[float], include: Sequence[bool],
                   capacity: int = 0) -> tuple[list[Any], list[float], list[int]]:
    """The trajectories an update forwards, their advantages, and the lengths of those left out for being
    longer than ``capacity`` tokens (0: no limit). A trajectory left out of the loss (``include`` False) or
    with no sampled token trains nothing (its loss mask is all zero), so it is not forwarded either."""
    rows, advs, too_long = [], [], []
    for traj, adv, inc in zip(trajectories, advantages, include):
        if not inc or not any(traj.loss_mask):
            continue
        length = len(traj.prompt_ids) + len(traj.token_ids)
        if capacity and length > capacity:
            too_long.append(length)
            continue
        rows.append(traj)
        advs.append(adv)
    return rows, advs, too_long
