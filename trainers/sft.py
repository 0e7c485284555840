"""SFT cold start (``websailor sft train``): supervised fine-tuning on filtered trajectories.

Read top to bottom: :class:`SFTConfig` (one docstring per field), the learning-rate
schedule, the loss, the model setup, then :func:`train`.

- Input: trajectory JSONL in this project's format or the released ChatML format,
  filtered by rejection sampling (:mod:`trainers.sft_data`).
- Loss: token-level cross-entropy on assistant tokens only (the loss mask of
  :func:`envs.tokens.tokenize_messages`), averaged over all loss tokens of the step.
  ``loss_on="all"`` trains on every token instead: language-model pretraining of a
  randomly initialized model on the transcripts before the SFT proper (a pretrained model
  already copies a question or a URL; a tiny random one learns it faster from every token).
- Schedule (the paper's appendix): AdamW, learning rate 5e-6, linear warmup, cosine decay
  to 1e-10, weight decay 0.1. Those numbers suit a pretrained model; a randomly initialized
  tiny model (:mod:`trainers.tiny_lm`) learns nothing at 5e-6 in a few hundred steps, so
  tests and benchmarks override ``lr=1e-3`` (``--lr 1e-3``) and keep the rest.
- Trained weights: all of them, LoRA adapters (``lora``), or only the top ``train_layers`` decoder
  layers and the final norm (:func:`trainers.layers.trainable_top`: on CPU most of a step is the
  backward pass through the layers below, and the optimizer state shrinks with the trained weights).
- Checkpoints: ``output_dir/checkpoint.pt`` holds model (only the trained weights when some are
  frozen: the rest are the starting model's, loaded again on resume), optimizer, scheduler, every RNG and
  the step (the data position follows from it: the order of each epoch is a seeded
  permutation), so an interrupted run resumes and reproduces the same steps exactly
  (written and read by :mod:`trainers.checkpoint_io`).
- Metrics: ``output_dir/metrics.jsonl`` (``step``, ``loss/sft``, ``train/lr``, ``train/tokens``,
  ...) and TensorBoard event files (:mod:`trainers.metrics_log`, as GRPO's).
- Output: ``output_dir/model`` (``save_pretrained``: LoRA adapters merged) and ``summary.json``.
- Several processes (``torchrun``, ``accelerate launch``): each rank trains on its share of every
  step's batch under DDP or FSDP2 (``parallel``, :mod:`trainers.parallel`); the loss is still the
  mean over the whole batch's loss tokens, so the step equals one process's; rank 0 writes.
"""

from __future__ import annotations

import json
import math
import random
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import torch

from trainers import lora, parallel, precision
from trainers.parallel import Parallel
from trainers.checkpoint_io import (CheckpointWriteError, check_output_dir, load_state, rng_state, save_model,
                                    save_state, set_rng_state)
from trainers.metrics_log import TENSORBOARD_MODES, MetricsLogger, TensorBoardMode
from trainers.interrupt import StopRequest, TrainingInterrupted
from trainers.layers import frozen_checksum, frozen_names, trainable_top
from trainers.progress import StepBar
from trainers.sft_data import Example, FilterConfig, build_examples, collate, fingerprint, read_records
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import write_json_atomic


@dataclass
class SFTConfig:
    """Supervised fine-tuning on trajectory JSONL (rejection-sampled), loss on assistant tokens only."""

    data: list[str] = field(metadata={"nargs": "+"})
    """Trajectory JSONL files (this project's format or the released ChatML format)."""
    model: str
    """A local model directory (config, weights, tokenizer; e.g. written by trainers.tiny_lm.save_tiny_lm) or a
    pretrained model's short name (smollm2-135m, set up by `websailor model fetch`)."""
    output_dir: str
    """Where the checkpoint, metrics.jsonl, summary.json and the trained model (model/) go."""
    require_correct: bool = True
    """Rejection sampling: keep only trajectories whose final answer is correct."""
    unlabelled: Literal["judge", "keep", "drop"] = "judge"
    """Records without an is_correct label (released files): judge the last <answer> against the record's
    reference answers, keep them, or drop them."""
    judge: Literal["em", "f1", "recall"] = "em"
    """Judge for unlabelled records: normalized exact match, token F1 >= threshold, or token recall of the
    reference answer in the final answer >= threshold (released final answers are whole sentences)."""
    threshold: float = 0.5
    """F1 or recall that counts as correct."""
    max_tokens: int = 32768
    """Rejection sampling: drop transcripts longer than this many tokens."""
    min_tool_calls: int = 1
    """Rejection sampling: drop trajectories with fewer tool calls."""
    max_turn_tokens: int = 0
    """Rejection sampling: drop trajectories with an assistant turn longer than this many tokens (set it to
    the policy's per-turn generation limit, which such a turn would run into). 0: no limit."""
    lr: float = 5e-6
    """Peak learning rate (the paper's 5e-6 for a pretrained model; use about 1e-3 for a tiny random model)."""
    min_lr: float = 1e-10
    """Learning rate at the end of the cosine decay."""
    warmup_ratio: float = 0.05
    """Fraction of the steps with linear warmup from 0."""
    weight_decay: float = 0.1
    """AdamW weight decay (on matrices; not on biases and norms)."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0 disables)."""
    batch_size: int = 8
    """Trajectories per optimizer step."""
    micro_batch_size: int = 1
    """Trajectories per forward pass (gradient accumulation over batch_size / micro_batch_size)."""
    epochs: int = 1
    """Passes over the filtered data (ignored when max_steps is set)."""
    max_steps: int | None = None
    """Optimizer steps in all; overrides epochs."""
    seed: int = 0
    """Seed of the data order and of torch, numpy and random."""
    save_every: int = 50
    """Save a checkpoint every this many steps (and at the end)."""
    resume: bool = True
    """Resume from output_dir/checkpoint.pt when it exists."""
    overwrite: bool = False
    """Replace an output_dir/model (or model.tmp) that websailor-gym did not write; without it such a folder
    is an error and nothing is deleted."""
    tensorboard: TensorBoardMode = "auto"
    """TensorBoard event files next to ``metrics.jsonl``: when the package is installed (``auto``; without it one
    line on stderr says so), always (``on``: an error without it), never (``off``). See trainers/metrics_log.py."""
    lora: bool = False
    """Train LoRA adapters (peft; pip install 'websailor-gym[lora]') instead of all weights."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator."""
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Module names that get LoRA adapters."""
    train_layers: int = 0
    """Train only the top N decoder layers and the final norm (0: every weight). On CPU this is most of the
    speed-up of a short SFT run (the main job trains its top 6); the checkpoint then holds only those weights
    and their optimizer state."""
    loss_on: Literal["assistant", "all"] = "assistant"
    """Tokens in the loss: the assistant's (SFT), or all of them (language-model pretraining of a randomly
    initialized model on the same transcripts, before its SFT)."""
    max_nonfinite: int = 10
    """Stop after this many steps in a row with a NaN or infinite loss (each such step is skipped)."""
    progress: bool | None = None
    """Progress bar (steps, loss, tokens/s, ETA) on stderr; default: when stderr is a terminal."""
    device: str = "cpu"
    """Torch device (under torchrun, ``cuda`` is each rank's local GPU)."""
    dtype: precision.ComputeDtype = "float32"
    """Compute dtype: ``bfloat16`` runs forward passes under bf16 autocast with fp32 master weights, gradients and
    AdamW state (trainers/precision.py)."""
    parallel: Parallel = "ddp"
    """Several processes (torchrun): ``ddp`` keeps a replica per rank; ``fsdp`` (FSDP2) shards weights, gradients
    and AdamW state per decoder layer (not with LoRA). One process: ignored."""
    chat_template: Literal["auto", "on", "off"] = "auto"
    """Tokenize with the tokenizer's chat template (``auto``: when it has one; ``on``: required) or the ChatML
    fallback (``off``), as ``websailor grpo`` and ``websailor eval`` do."""

    def __post_init__(self) -> None:
        if self.chat_template not in ("auto", "on", "off"):
            raise ValueError(f"chat_template must be one of ['auto', 'on', 'off'], got {self.chat_template!r}")
        if isinstance(self.data, str):
            self.data = [self.data]
        if not self.data:
            raise ValueError("data: expected at least one trajectory JSONL file, got none")
        positive = {"batch_size": self.batch_size, "micro_batch_size": self.micro_batch_size, "epochs": self.epochs,
                    "save_every": self.save_every, "lora_r": self.lora_r, "max_nonfinite": self.max_nonfinite}
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.batch_size % self.micro_batch_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be divisible by micro_batch_size "
                             f"({self.micro_batch_size})")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if not self.lr > 0 or not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"expected lr > 0 and 0 <= min_lr <= lr, got lr={self.lr}, min_lr={self.min_lr}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError(f"weight_decay and max_grad_norm must be >= 0, got {self.weight_decay}, "
                             f"{self.max_grad_norm}")
        if self.loss_on not in ("assistant", "all"):
            raise ValueError(f"loss_on must be 'assistant' or 'all', got {self.loss_on!r}")
        if self.tensorboard not in TENSORBOARD_MODES:
            raise ValueError(f"tensorboard must be one of {list(TENSORBOARD_MODES)}, got {self.tensorboard!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")
        if isinstance(self.train_layers, bool) or not isinstance(self.train_layers, int) or self.train_layers < 0:
            raise ValueError(f"train_layers must be an integer >= 0, got {self.train_layers!r}")
        if self.train_layers and self.lora:
            raise ValueError("train_layers and lora both choose what trains: use one of them")
        parallel.check_supported(self.parallel, lora=self.lora)
        self.filters()  # validates the filter fields

    def filters(self) -> FilterConfig:
        """The rejection-sampling part of the config."""
        return FilterConfig(require_correct=self.require_correct, unlabelled=self.unlabelled, judge=self.judge,
                            threshold=self.threshold, max_tokens=self.max_tokens,
                            min_tool_calls=self.min_tool_calls, max_turn_tokens=self.max_turn_tokens)


# ---------------------------------------------------------------- schedule and loss

def lr_factor(step: int, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based): linear warmup
    over ``warmup_steps``, then cosine decay from 1 to ``min_ratio`` at ``total_steps - 1``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, total_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def masked_token_loss_sum(logits: torch.Tensor, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy over the positions ``loss_mask`` marks.

    ``logits (B, T, V)``, ``input_ids (B, T)``, ``loss_mask (B, T)`` -> scalar. The token at
    position ``t`` is predicted from position ``t - 1``, so ``loss_mask[:, 0]`` never counts.
    """
    targets = input_ids[:, 1:]
    mask = loss_mask[:, 1:].to(logits.dtype)
    nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2).float(), targets, reduction="none")
    return (nll * mask).sum()


# ---------------------------------------------------------------- model setup

def _optimizer(model: Any, config: SFTConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=config.lr)


# ---------------------------------------------------------------- training

@dataclass
class SFTResult:
    """What a run did."""

    steps: int
    final_loss: float | None
    filter_report: dict[str, Any]
    model_dir: str | None
    skipped_steps: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: int = 0
    """The step this call started from (0: a fresh run)."""
    tokens_per_second: float = 0.0
    """Tokens (all of each step's batch) per second of the steps this call ran."""


def epoch_order(num_examples: int, seed: int, epoch: int) -> list[int]:
    """The example order of ``epoch``: a permutation seeded by ``(seed, epoch)`` alone, so the
    data position of a resumed run follows from its step."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(num_examples, generator=gen).tolist()


def step_batch(step: int, num_examples: int, batch_size: int, seed: int) -> list[int]:
    """Example indices of optimizer step ``step`` (0-based); the last batch of an epoch may be short."""
    per_epoch = math.ceil(num_examples / batch_size)
    epoch, pos = divmod(step, per_epoch)
    return epoch_order(num_examples, seed, epoch)[pos * batch_size:(pos + 1) * batch_size]


def train(config: SFTConfig, *, model: Any = None, tokenizer: Any = None,
          on_step: Callable[[dict[str, Any]], None] | None = None) -> SFTResult:
    """Run SFT as ``config`` says; ``model``/``tokenizer`` replace loading ``config.model``.

    ``on_step(metrics)`` is called after each logged step (tests interrupt a run from it).
    """
    from envs.tokens import template_switch
    from trainers.grpo_state import DistInfo
    from trainers.models import load_lm, pad_token_id

    dist = DistInfo.from_env(config.device)
    device = dist.device(config.device)
    out = Path(config.output_dir)
    check_output_dir(out, config.overwrite)  # before the run, not after it
    out.mkdir(parents=True, exist_ok=True)
    if model is None or tokenizer is None:
        model, tokenizer = load_lm(config.model)
    examples, report = build_examples(read_records(config.data), tokenizer, config.filters(),
                                      use_chat_template=template_switch(config.chat_template))
    if not examples:
        raise UserError(f"no trajectory passed the filters ({json.dumps(report.to_dict())}); "
                         "relax --require-correct / --max-tokens / --min-tool-calls")
    if config.loss_on == "all":
        examples = [Example(ex.input_ids, torch.ones_like(ex.loss_mask), ex.source) for ex in examples]
    per_epoch = math.ceil(len(examples) / config.batch_size)
    total = config.max_steps or config.epochs * per_epoch
    warmup = int(config.warmup_ratio * total)
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    np.random.seed(config.seed)
    model = precision.master_weights(model, config.dtype)
    sizes = trainable_top(model, config.train_layers) if config.train_layers else None
    if config.lora:
        model = lora.wrap(model, config.lora_r, config.lora_alpha, config.lora_targets)
    model.to(device)
    model.train()
    wrapped = parallel.wrap(model, dist, config.parallel, config.dtype)
    optimizer = _optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup, total, config.min_lr / config.lr))
    meta = {"fingerprint": fingerprint(examples), "total_steps": total, "batch_size": config.batch_size,
            "seed": config.seed, "lora": config.lora}
    start, counters = _maybe_resume(out / "checkpoint.pt", config, meta, model, optimizer, scheduler)
    if sizes is None:
        sizes = {"parameters": sum(p.numel() for p in model.parameters()),
                 "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}

    frozen = sorted(frozen_names(model)) if not parallel.is_sharded(model) else []

    def checkpoint(step: int) -> bool:
        """Write ``checkpoint.pt`` at ``step``; a write that fails (a full disk) prints one line and training
        goes on from memory (the previous checkpoint, if any, stays): False then."""
        weights = parallel.model_state(model, dist)  # full state dicts: collectives under FSDP
        optim = parallel.optimizer_state(model, optimizer, dist)
        written = True
        if dist.is_main:
            if frozen:  # frozen weights are the starting model's: a resume loads them from there again
                weights = {k: v for k, v in weights.items() if k not in set(frozen)}
            try:
                save_state(out / "checkpoint.pt", {
                    **meta, "step": step, "counters": dict(counters), "model": weights, "optimizer": optim,
                    "scheduler": scheduler.state_dict(), "rng": rng_state(), "config": asdict(config),
                    **({"frozen": frozen, "frozen_checksum": frozen_checksum(model)} if frozen else {})})
            except CheckpointWriteError as exc:
                written = False
                print(f"sft: step {step}: checkpoint not saved: {exc}; training goes on", flush=True)
        dist.barrier()
        return written

    def one_step(step: int) -> dict[str, Any]:
        metrics = _train_step(model, optimizer, scheduler, examples, step, config, pad_id=pad_token_id(tokenizer),
                              counters=counters, wrapped=wrapped, dist=dist, device=device)
        metrics["train/epoch"] = (step + 1) / per_epoch
        return metrics

    history, rate = _run_steps(config, out, start, total, one_step, checkpoint, counters, on_step, dist)
    weights = parallel.model_state(model, dist) if parallel.is_sharded(model) else None
    if dist.is_main:
        save_model(lora.merged(model), tokenizer, out / "model", weights, overwrite=config.overwrite)  # LoRA merged
    dist.barrier()
    final = next((h["loss/sft"] for h in reversed(history) if h.get("loss/sft") is not None), None)
    result = SFTResult(steps=total, final_loss=final, filter_report=report.to_dict(), model_dir=str(out / "model"),
                       skipped_steps=counters["skipped"], history=history, resumed_from=start,
                       tokens_per_second=rate)
    if dist.is_main:
        _write_json(out / "summary.json", {"steps": total, "final_loss": final, "filters": report.to_dict(),
                                           "examples": len(examples), "skipped_steps": counters["skipped"],
                                           "resumed_from": start, "model_dir": result.model_dir,
                                           "parameters": sizes["parameters"], "trainable": sizes["trainable"]})
    return result


def _run_steps(config: SFTConfig, out: Path, start: int, total: int, one_step: Callable[[int], dict[str, Any]],
               checkpoint: Callable[[int], bool], counters: dict[str, int],
               on_step: Callable[[dict[str, Any]], None] | None, dist: Any = None) -> tuple[list[dict[str, Any]], float]:
    """Steps ``start..total-1`` with metrics, checkpoints (every ``save_every``, at the end, and on
    SIGINT/SIGTERM, then :class:`TrainingInterrupted`) and the progress bar; returns the metrics and
    the tokens per second of this call. Under several processes rank 0 logs and every rank stops together."""
    main = dist is None or dist.is_main
    log = MetricsLogger(out, config.tensorboard) if main else None
    if log is not None:
        log.truncate_after(start)  # a resumed run drops the steps it will redo
    bar = StepBar(total, start, "SFT", config.progress if main else False)
    history: list[dict[str, Any]] = []
    try:
        with StopRequest("SFT") as stop:
            for step in range(start, total):
                tokens_before = counters["tokens"]
                metrics = one_step(step)
                if log is not None:
                    log.log(metrics)
                history.append(metrics)
                bar.step(metrics, counters["tokens"] - tokens_before)
                if counters["nonfinite_in_row"] >= config.max_nonfinite:
                    raise RuntimeError(f"{config.max_nonfinite} steps in a row had a non-finite loss "
                                       f"(last: step {step + 1})")
                saved = (step + 1) % config.save_every == 0 or step + 1 == total
                if saved:
                    saved = checkpoint(step + 1)
                if on_step is not None:
                    on_step(metrics)
                requested = stop.requested if dist is None else dist.all_reduce_sum(float(stop.requested)) > 0
                if requested and step + 1 < total:
                    if not saved:
                        saved = checkpoint(step + 1)
                    where = f"checkpoint {out / 'checkpoint.pt'}" if saved else "its checkpoint could not be written"
                    raise TrainingInterrupted(
                        f"SFT interrupted after step {step + 1} of {total}: {where}; "
                        "run the same command again to continue (--resume is the default)", stop.signum)
    finally:
        bar.close()
        if log is not None:
            log.close()
    return history, bar.tokens_per_second


def _maybe_resume(path: Path, config: SFTConfig, meta: dict[str, Any], model: Any, optimizer: Any,
                  scheduler: Any) -> tuple[int, dict[str, int]]:
    counters = {"tokens": 0, "skipped": 0, "nonfinite_in_row": 0}
    if not (config.resume and path.is_file()):
        return 0, counters
    state = load_state(path, ("step", "counters", "model", "optimizer", "scheduler", "rng"))
    for key, value in meta.items():
        if state.get(key) != value:
            raise UserError(f"{path}: the checkpoint was written with {key}={state.get(key)!r}, this run has "
                             f"{value!r}; use another output_dir or --no-resume")
    frozen = state.get("frozen")
    if frozen is None:
        parallel.load_model_state(model, state["model"], strict=True)
    else:  # only the trained weights were saved: the frozen ones must be frozen here too
        now = sorted(frozen_names(model))
        if list(frozen) != now:
            raise UserError(f"{path}: the checkpoint froze {len(frozen)} weights, this run freezes {len(now)} "
                             "(another --train-layers?); use another output_dir or --no-resume")
        if state.get("frozen_checksum") != frozen_checksum(model):
            raise UserError(f"{path}: this run's frozen weights differ from those the checkpoint was trained on "
                             "(another --model?); use another output_dir or --no-resume")
        missing, unexpected = parallel.load_model_state(model, state["model"], strict=False)
        left = sorted(set(missing) - set(frozen))
        if left or unexpected:
            raise UserError(f"{path}: the checkpoint's weights do not fit this model (missing {left[:3]}, "
                             f"unexpected {list(unexpected)[:3]}); use another output_dir or --no-resume")
    parallel.load_optimizer_state(model, optimizer, state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    counters.update(state["counters"])
    return int(state["step"]), counters


def _train_step(model: Any, optimizer: Any, scheduler: Any, examples: list, step: int, config: SFTConfig, *,
                pad_id: int, counters: dict[str, int], wrapped: Any = None, dist: Any = None,
                device: torch.device | None = None) -> dict[str, Any]:
    """One optimizer step over ``batch_size`` examples in micro-batches; skips a non-finite loss.

    Under several processes rank ``r`` of ``W`` takes examples ``r, r+W, ...`` of the step's batch and
    every rank runs the same number of passes (a rank with fewer runs zero-loss ones)."""
    started = time.perf_counter()
    wrapped = model if wrapped is None else wrapped
    device = torch.device(config.device) if device is None else device
    rank, world = (dist.rank, dist.world_size) if dist is not None and dist.active else (0, 1)
    batch = [examples[i] for i in step_batch(step, len(examples), config.batch_size, config.seed)]
    loss_tokens = sum(int(ex.loss_mask[1:].sum()) for ex in batch)
    mine = batch[rank::world]
    lr = optimizer.param_groups[0]["lr"]
    optimizer.zero_grad(set_to_none=True)
    local = math.ceil(len(mine) / config.micro_batch_size)
    passes = parallel.pass_count(wrapped, dist, local, always=True) if world > 1 else local
    total = 0.0
    for k in range(passes):
        part = mine[k * config.micro_batch_size:(k + 1) * config.micro_batch_size]
        if part:
            ids, attn, mask = (t.to(device) for t in collate(part, pad_id))
        else:  # nothing left on this rank: a pass that adds no gradient keeps the ranks in step
            ids = torch.full((1, 2), pad_id, dtype=torch.long, device=device)
            attn, mask = torch.ones_like(ids), torch.zeros_like(ids)
        with parallel.grad_sync(wrapped, dist, last=k == passes - 1), precision.autocast(device, config.dtype):
            logits = wrapped(input_ids=ids, attention_mask=attn).logits
            # DDP and FSDP average gradients over the ranks: scaled by W, the step is the batch's token mean
            loss = masked_token_loss_sum(logits, ids, mask) * world / max(1, loss_tokens)
            loss.backward()
        total += float(loss.detach())
    if world > 1:
        total = dist.all_reduce_sum(total) / world
    counters["tokens"] += sum(ex.input_ids.numel() for ex in batch)
    metrics: dict[str, Any] = {"step": step + 1, "train/lr": lr, "train/tokens": counters["tokens"],
                               "train/loss_tokens": loss_tokens}
    if not math.isfinite(total):
        optimizer.zero_grad(set_to_none=True)
        counters["skipped"] += 1
        counters["nonfinite_in_row"] += 1
        metrics.update({"loss/sft": None, "train/skipped": 1})
    else:
        counters["nonfinite_in_row"] = 0
        params = [p for p in model.parameters() if p.requires_grad]
        norm = parallel.clip_grad_norm(params, config.max_grad_norm if config.max_grad_norm > 0 else math.inf)
        optimizer.step()
        metrics.update({"loss/sft": total, "train/grad_norm": norm, "train/skipped": 0})
    with warnings.catch_warnings():  # a skipped step keeps the schedule on time, without optimizer.step()
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()
    metrics["time/step_s"] = time.perf_counter() - started
    return metrics


def _write_json(path: Path, value: Any) -> None:
    write_json_atomic(path, value, indent=2, ensure_ascii=True)


def sft_summary_line(result: SFTResult) -> str:
    """One line: data kept, steps (resumed, skipped), final loss, speed."""
    report = result.filter_report
    loss = "n/a" if result.final_loss is None else f"{result.final_loss:.4f}"
    resumed = f", resumed at step {result.resumed_from}" if result.resumed_from else ""
    return (f"SFT: {report['kept']}/{report['read']} trajectories kept (dropped: {report['dropped']}); "
            f"{result.steps} steps{resumed}, {result.skipped_steps} skipped (non-finite loss); final loss {loss}; "
            f"{result.tokens_per_second:.0f} tokens/s")


def run_sft(config: SFTConfig) -> dict[str, Any]:
    """CLI entry: train, print a short summary and, last, one line of JSON."""
    result = train(config)
    from trainers.grpo_state import DistInfo

    dist = DistInfo.from_env(config.device)
    if dist.active:
        dist.destroy()
        if not dist.is_main:
            return {}
    summary = {"steps": result.steps, "final_loss": result.final_loss, "skipped_steps": result.skipped_steps,
               "resumed_from": result.resumed_from, "tokens_per_second": round(result.tokens_per_second, 1),
               "filters": result.filter_report, "model_dir": result.model_dir}
    print(sft_summary_line(result))
    print(json.dumps(summary))
    return summary
