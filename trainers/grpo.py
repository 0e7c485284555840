"""GRPO over the Gymnasium environments (``websailor grpo``): read it top to bottom.

Each step (on-policy; with ``update_epochs`` > 1 the later updates are clipped against the sampler):

1. draw ``batch_size / group_size`` tasks from the :class:`~trainers.grpo_data.TaskPool`;
2. run ``group_size`` episodes of each through the environment (``gym.make`` inside
   :func:`trainers.rollout.collect`), keeping the sampled ids and their log-probabilities;
3. advantages per group (leave-one-out by default), groups with equal rewards kept,
   dropped or replaced (DUPO), truncated no-answer trajectories out of the loss;
4. ``update_epochs`` optimizer steps (default one) on the token-level clipped loss
   (:mod:`trainers.losses`), tool responses masked, optionally a KL penalty to the initial model;
5. the pool retires tasks that are always or never solved and draws fresh ones;
6. metrics to ``metrics.jsonl`` (and TensorBoard), a checkpoint every ``save_every`` steps.

Runs unchanged under ``torchrun`` (``--device cpu``: gloo; ``cuda``: NCCL for the model, gloo for the step's
CPU-side reductions; DDP or FSDP2, :mod:`trainers.parallel`):
every rank rolls out its share of the groups, the token-mean is over the whole global batch, rank 0 writes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import random
import signal
import time
import warnings
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from trainers import checkpoint_io, grpo_state, lora, memory, mismatch, parallel, precision, rollout_engine
from trainers.parallel import Parallel
from trainers.grpo_data import EqualGroups, Overlong, TaskPool, build_batch, is_error, prepare_step, signal_groups
from trainers.interrupt import StopRequest, TrainingInterrupted
from trainers.rollout_samples import save_rollout_sample
from trainers.progress import StepBar, enabled
from trainers.metrics_log import TENSORBOARD_MODES, MetricsLogger, TensorBoardMode, iter_metrics
from trainers.rollout_options import EnvOptions, EpisodeOptions
from trainers.losses import kl_k3, masked_sum, policy_loss, token_logprobs, token_logprobs_and_entropy, update_sums
from wiki_sim.common.errors import UserError


VLLM_TIS_CAP = 2.0
"""``tis_cap`` by default with ``--rollout-engine vllm``: the cap of TRL's token-level correction when it
introduced it (``vllm_importance_sampling_correction=True``, ``vllm_importance_sampling_cap=2``); TRL 1.6
renamed the cap ``vllm_importance_sampling_clip_max`` (default 3, with sequence-level masking by default)."""


@dataclass
class GRPOConfig(EpisodeOptions, EnvOptions):
    """GRPO on a Gymnasium research environment (on-policy, token-level clipped loss, leave-one-out advantages).
    The environment (``env_id``, ``wiki_dir``, ``env_kwargs``) and sampling (``max_new_tokens``, ``temperature``,
    ``top_p``, ``max_tool_calls``) options are :mod:`trainers.rollout_options`'s, shared with ``websailor eval``."""

    model: str = field(metadata={"positional": True})
    """Starting model: a directory saved with ``save_pretrained`` (e.g. the SFT output) or a short name (smollm2-135m)."""
    tasks: str = field(metadata={"positional": True})
    """Task JSONL the pool draws from (``question``, ``answer``, optional ``id``, ``aliases``)."""
    _: KW_ONLY
    max_new_tokens: int = 512
    max_tool_calls: int = 10
    output_dir: str = "runs/grpo"
    """Where checkpoints, ``metrics.jsonl`` and the final model (``model/``) go."""
    tokenizer: str | None = None
    """Tokenizer directory; default: the model directory."""
    steps: int = 100
    """Optimizer steps (one rollout batch each)."""
    batch_size: int = 64
    """Trajectories per step (all ranks together); a multiple of ``group_size``."""
    group_size: int = 8
    """Rollouts per task (G)."""
    micro_batch_size: int = 0
    """Trajectories per forward/backward pass at most (gradient accumulation over the step's batch; 0: as many
    as ``micro_batch_tokens`` allows)."""
    micro_batch_tokens: int = 0
    """Padded tokens (rows x longest row) per forward/backward pass; a trajectory longer than the cap is a pass
    of its own. 0: sized from the memory the process may use (RAM or GPU memory, less a margin) and the
    model's size when the trainer starts (trainers/memory.py)."""
    max_total_tokens: int = 0
    """Prompt plus trajectory tokens per episode: reaching it ends the episode (``context_limit``, out of the
    loss). 0: the longest trajectory one update pass can hold (see ``micro_batch_tokens``), at most 32768. A
    value the update cannot hold is refused before any rollout."""
    update_memory_gb: float = 0.0
    """Memory the update may use per process, in GiB (0: what is available when the trainer starts)."""
    lora_r: int = 0
    """LoRA rank (peft; 0: train every weight). Only the adapters train; checkpoints resume them; the final
    model is merged."""
    lora_alpha: int = 32
    """LoRA scaling numerator (scale = lora_alpha / lora_r)."""
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Module names that get LoRA adapters."""
    gradient_checkpointing: bool = False
    """Recompute layer activations in the backward pass (less memory, about a third more update time)."""
    learning_rate: float = 1e-6
    """AdamW learning rate after warmup."""
    warmup_steps: int = 0
    """Linear learning-rate warmup."""
    update_epochs: int = 1
    """Optimizer steps on each rollout batch (PPO epochs; TRL's num_iterations, verl's ppo_epochs): the
    first is on-policy, each later one is clipped against the sampler's log-probabilities, so that a
    costly batch of rollouts moves the policy further. Needs tis_cap 0."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping (0 turns it off)."""
    advantage: Literal["loo", "mean"] = "loo"
    """``loo``: reward minus the mean of the other G-1 rewards; ``mean``: reward minus the group mean."""
    scale_std: bool = False
    """Divide advantages by the group's reward standard deviation."""
    clip_low: float = 0.2
    """Lower clip of the importance ratio (1 - clip_low)."""
    clip_high: float = 0.28
    """Upper clip of the importance ratio (1 + clip_high)."""
    kl_beta: float = 0.0
    """Weight of the KL penalty to the initial model (0: off, no reference model kept)."""
    exclude_truncated: bool = True
    """Leave trajectories that ended without an answer (token, turn or context limit) out of the loss."""
    overlong: Overlong = "exclude"
    """An episode whose last turn the token limit cut (``token_limit``): ``exclude`` it from the loss
    with the other cut-off ones (DAPO's overlong filtering), or ``penalize`` it: keep it with its
    reward 0, so that turns running past ``max_new_tokens`` are pushed down."""
    equal_groups: EqualGroups = "keep"
    """Groups whose rewards are all equal: ``keep`` them, ``dupo`` (replace with copies of groups with signal), ``drop``."""
    dynamic_sampling_rounds: int = 1
    """DAPO's dynamic sampling: a step that collected fewer groups with mixed rewards than it has tasks draws
    and plays more tasks, up to this many collection rounds in all (1: off); only groups with signal are
    kept then (``equal_groups`` is taken as ``drop``). The rounds and the groups found are in the metrics
    (``data/sampling_rounds``, ``data/signal_groups``)."""
    pool_size: int = 64
    """Active tasks in the data-policy pool."""
    retire_window: int = 2
    """A task is retired when its last ``retire_window * group_size`` outcomes all pass or all fail (0: never)."""
    task_filter: str | None = None
    """``module:function`` called on each batch of fresh tasks, returning the ones to keep (a synthesis filter)."""
    num_envs: int = 0
    """Episodes run at once per rank (0: the whole batch share)."""
    lockstep_rollouts: bool = False
    """Generate only when every running environment step has finished: reproducible batches, hence the
    same samples on a rerun or after a resume, at the cost of waiting for the slowest tool call each turn."""
    save_every: int = 50
    """Steps between checkpoints (0: only at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (the oldest are removed)."""
    resume: bool = True
    """Continue from the newest checkpoint in ``output_dir`` when there is one."""
    overwrite: bool = False
    """Replace a model/, model.tmp/ or checkpoint-N/ in output_dir that this project did not write
    (refused otherwise, before any rollout)."""
    max_bad_steps: int = 3
    """Stop after this many steps in a row whose loss or gradient is NaN or infinite (each is skipped)."""
    seed: int = 0
    """Seeds sampling, task order and DUPO; the same seed reproduces a run, resumed or not."""
    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu`` or ``cuda``."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Compute dtype: ``bfloat16`` runs rollouts and forward passes under bf16 autocast while the weights,
    gradients and AdamW state stay fp32 (master weights; a bf16 checkpoint is upcast), see trainers/precision.py."""
    parallel: Parallel = "ddp"
    """Several processes (torchrun): ``ddp`` keeps a replica per rank; ``fsdp`` (FSDP2) shards weights, gradients
    and AdamW state per decoder layer (not with LoRA). One process: ignored. See trainers/parallel.py."""
    tensorboard: TensorBoardMode = "auto"
    """TensorBoard event files next to ``metrics.jsonl``: when the package is installed (``auto``; without it one
    line on stderr says so), always (``on``: an error without it), never (``off``). See trainers/metrics_log.py."""
    progress: bool | None = None
    """Progress bars on stderr: steps (loss, reward, sampled tokens/s, ETA) and each step's rollouts;
    default: when stderr is a terminal."""
    chat_template: Literal["auto", "on", "off"] = "auto"
    """Render prompts and observations with the tokenizer's chat template (``auto``: when it has one; ``on``:
    required) or the ChatML fallback (``off``); rollouts always train on exactly the sampled ids."""
    rollout_engine: rollout_engine.RolloutEngine = "hf"
    """``hf``: rollouts sample with transformers ``generate`` on the training model; ``vllm``: with a colocated
    vLLM engine (one GPU; it sleeps during the update and gets the trained weights, LoRA merged, before each
    rollout), whose log-probabilities the loss uses as the old policy's (see trainers/rollout_engine.py). The
    engine computes in ``dtype``."""
    tis_cap: float | None = None
    """Truncated importance sampling (0: off): train against the trainer's own log-probabilities, each token
    weighted by min(p_trainer / p_sampler, tis_cap), correcting the sampler/trainer mismatch (trainers/mismatch.py).
    Default: 2 with ``--rollout-engine vllm`` (TRL's token-level correction, ``vllm_importance_sampling_correction``
    with ``vllm_importance_sampling_cap=2``), 0 with ``hf`` (the sampler is the trainer)."""
    max_logprob_mismatch: float | None = mismatch.DEFAULT_MAX_LOGPROB_MISMATCH
    """First-step check (0 or None: off): after the first step that trains (of each run or resume), the mean
    |trainer - sampler| log-probability of its trained tokens must not exceed this, else the run stops with a
    one-line error naming --dtype, --rollout-engine and --tis-cap (with --tis-cap > 0 a warning instead). bf16
    gives about 0.08, fp32 about 1e-6 (the default's reasons: trainers/mismatch.py). Raised after that step's
    update, before anything is saved."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of the GPU's memory the vLLM engine may take (weights and KV cache) while awake."""
    vllm_max_model_len: int | None = None
    """Longest sequence (prompt and continuation) the vLLM engine serves; default: the model's own limit
    (``max_position_embeddings`` in its config.json). A value above that limit is refused before loading."""
    rollout_samples: int = 4
    """Trajectories of each step written to ``output_dir/rollouts/step-<n>.jsonl`` (one of each group first; 0:
    none), to read what the policy did (``websailor report OUTPUT_DIR``; trainers/rollout_samples.py)."""

    def __post_init__(self) -> None:
        EpisodeOptions.__post_init__(self)
        EnvOptions.__post_init__(self)
        positive = ("steps", "batch_size", "group_size", "pool_size", "keep_checkpoints", "max_bad_steps")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.rollout_engine not in ("hf", "vllm"):
            raise ValueError(f"rollout_engine must be one of ['hf', 'vllm'], got {self.rollout_engine!r}")
        if self.tis_cap is None:  # resolved here, so that checkpoints record the cap a run trained with
            self.tis_cap = VLLM_TIS_CAP if self.rollout_engine == "vllm" else 0.0
        if not (self.tis_cap == 0 or self.tis_cap >= 1):
            raise ValueError(f"tis_cap must be 0 (off) or >= 1, got {self.tis_cap}")
        if self.max_logprob_mismatch is not None and (isinstance(self.max_logprob_mismatch, bool) or not (
                isinstance(self.max_logprob_mismatch, (int, float))
                and 0 <= self.max_logprob_mismatch < math.inf)):
            raise ValueError(f"max_logprob_mismatch must be None or a number >= 0 (0: no check), "
                             f"got {self.max_logprob_mismatch!r}")
        if not (0 < self.vllm_gpu_memory_utilization < 1) or (self.vllm_max_model_len is not None
                                                              and self.vllm_max_model_len < 1):
            raise ValueError(f"expected 0 < vllm_gpu_memory_utilization < 1 and vllm_max_model_len >= 1, got "
                             f"{self.vllm_gpu_memory_utilization} and {self.vllm_max_model_len}")
        if isinstance(self.dynamic_sampling_rounds, bool) or not isinstance(self.dynamic_sampling_rounds, int) \
                or self.dynamic_sampling_rounds < 1:
            raise ValueError(f"dynamic_sampling_rounds must be an integer >= 1 (1: off), got "
                             f"{self.dynamic_sampling_rounds!r}")
        for name in ("warmup_steps", "retire_window", "num_envs", "save_every", "micro_batch_size",
                     "micro_batch_tokens", "max_total_tokens", "update_memory_gb", "lora_r"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if isinstance(self.update_epochs, bool) or not isinstance(self.update_epochs, int) or self.update_epochs < 1:
            raise ValueError(f"update_epochs must be an integer >= 1, got {self.update_epochs!r}")
        if self.update_epochs > 1 and self.tis_cap > 0:
            raise ValueError(f"update_epochs > 1 needs tis_cap 0 (TIS weighs each token by the trainer's own first "
                             f"log-probabilities), got update_epochs {self.update_epochs} and tis_cap {self.tis_cap}")
        if self.batch_size % self.group_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be divisible by group_size ({self.group_size})")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            raise ValueError(f"expected 0 <= clip_low < 1 and clip_high >= 0, got {self.clip_low} and {self.clip_high}")
        if self.kl_beta < 0 or self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError(f"kl_beta ({self.kl_beta}), weight_decay ({self.weight_decay}) and max_grad_norm "
                             f"({self.max_grad_norm}) must be >= 0")
        if not (self.temperature > 0 and 0 < self.top_p <= 1):
            raise ValueError(f"expected temperature > 0 and 0 < top_p <= 1 for on-policy sampling, got "
                             f"{self.temperature} and {self.top_p}")
        if self.top_p != 1.0:
            raise ValueError(f"top_p must be 1 for training, got {self.top_p}: the trainer computes log-probabilities "
                             "under the full distribution, so nucleus-sampled rollouts bias the importance ratio "
                             "(lower the temperature instead)")
        for name, choices in (("advantage", ("loo", "mean")), ("equal_groups", ("keep", "dupo", "drop")),
                              ("dtype", ("float32", "bfloat16")), ("tensorboard", TENSORBOARD_MODES),
                              ("device", ("auto", "cpu", "cuda")), ("chat_template", ("auto", "on", "off")),
                              ("parallel", parallel.PARALLEL_MODES)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {list(choices)}, got {getattr(self, name)!r}")
        parallel.check_supported(self.parallel, lora=self.lora_r > 0)
        if self.task_filter is not None and ":" not in self.task_filter:
            raise ValueError(f"task_filter must look like 'module:function', got {self.task_filter!r}")

    @property
    def tasks_per_step(self) -> int:
        return self.batch_size // self.group_size


class NonFiniteLoss(RuntimeError):
    """Raised when ``max_bad_steps`` steps in a row had a NaN or infinite loss or gradient."""


class GRPOTrainer:
    """The training loop. ``model`` and ``tokenizer`` are a transformers causal LM and its tokenizer;
    ``tasks`` the task dicts the pool draws from. Call :meth:`train`."""

    def __init__(self, config: GRPOConfig, model: Any, tokenizer: Any, tasks: list[dict], *,
                 task_filter: Any = None, env_kwargs: dict | None = None,
                 engine_factory: rollout_engine.EngineFactory | None = None):
        from trainers.models import pad_token_id

        self.config = config
        if config.rollout_engine == "vllm" and engine_factory is None:
            rollout_engine.require_vllm_gpu()  # before the model moves anywhere
        self.dist = grpo_state.DistInfo.from_env(config.device)
        if config.tasks_per_step % self.dist.world_size:
            raise UserError(f"batch_size / group_size ({config.tasks_per_step}) must be divisible by the number "
                             f"of processes ({self.dist.world_size})")
        self.device = self.dist.device(config.device)
        self.tokenizer = tokenizer
        self.model = precision.master_weights(model, config.dtype).to(self.device)
        if config.gradient_checkpointing:
            memory.enable_gradient_checkpointing(self.model)
        self.ref_model = grpo_state.frozen_copy(model) if config.kl_beta > 0 else None
        if config.lora_r:
            self.model = lora.wrap(self.model, config.lora_r, config.lora_alpha, config.lora_targets)
        self.ddp_model = parallel.wrap(self.model, self.dist, config.parallel, config.dtype)
        self.engine = (rollout_engine.build(engine_factory, self.model, seed=config.seed,
                                            world_size=self.dist.world_size,
                                            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
                                            max_model_len=config.vllm_max_model_len, dtype=config.dtype)
                       if config.rollout_engine == "vllm" else None)
        # the update's token budget and the rollouts' length limit, from the memory there is: before any rollout
        self.max_total_tokens, self.capacity = memory.resolve_limits(
            config, self.model, self.device, reference=self.ref_model is not None,
            say=print if self.dist.is_main else (lambda line: None))
        # one forward per backward under DDP/FSDP; a checkpointed layer cannot hold a growing cache
        self.share_prefix = self.ddp_model is self.model and not config.gradient_checkpointing
        self._mismatch_max = 0.0
        self._mismatch_checked = False  # the first-step check (max_logprob_mismatch) ran
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                           lr=config.learning_rate,
                                           weight_decay=config.weight_decay)
        warm = config.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.pool = TaskPool(tasks, pool_size=config.pool_size, window=config.retire_window * config.group_size,
                             min_active=config.tasks_per_step, seed=config.seed, task_filter=task_filter)
        self.env_kwargs = dict(env_kwargs if env_kwargs is not None else config.env_options())
        self.pad_id = pad_token_id(tokenizer)
        self.step = 0
        self.resumed_from = 0
        self.bar: StepBar | None = None
        self.bad_in_row = 0
        self.checkpoint_failures = 0  # checkpoints that could not be written (a full disk); training went on
        self.out = Path(config.output_dir)
        if self.dist.is_main:  # a foreign model/ is refused now, not at the final save
            checkpoint_io.check_output_dir(self.out, config.overwrite)
        self.logger = MetricsLogger(self.out, config.tensorboard) if self.dist.is_main else None

    @property
    def micro_tokens(self) -> int:
        """Padded tokens per forward/backward pass: ``micro_batch_tokens``, or what the memory holds."""
        return self.config.micro_batch_tokens or self.capacity

    # ------------------------------------------------------------------ the loop

    def train(self) -> list[dict]:
        """Run to ``config.steps``; returns the metrics of the steps run in this call."""
        cfg = self.config
        if cfg.resume:
            self.load_latest()
        self.resumed_from = self.step
        if self.logger is not None:
            self.logger.truncate_after(self.step)  # lines of steps after the checkpoint are redone
        history = []
        self.bar = StepBar(cfg.steps, self.step, "GRPO", cfg.progress if self.dist.is_main else False)
        with StopRequest("GRPO") as stop, contextlib.closing(self.bar):
            while self.step < cfg.steps:
                metrics = self.train_step()
                history.append(metrics)
                if self.logger is not None:
                    self.logger.log(metrics)
                self.bar.step(metrics, int(metrics.get("rollout/sampled_tokens", 0)
                                           * metrics.get("rollout/trajectories", 0)))
                saved = bool(cfg.save_every and self.step % cfg.save_every == 0 and self.step < cfg.steps)
                if saved:
                    saved = self.save(strict=False)
                if self.bad_in_row >= cfg.max_bad_steps:
                    self.save(strict=False)
                    raise NonFiniteLoss(f"{self.bad_in_row} steps in a row had a NaN or infinite loss or gradient "
                                        f"(max_bad_steps={cfg.max_bad_steps}); stopped at step {self.step}")
                # Every rank stops at the same step when any of them was signalled.
                if self.dist.all_reduce_sum(float(stop.requested)) > 0 and self.step < cfg.steps:
                    self._stop(saved, stop.signum)
        self.save(strict=False)  # the final model below is what the run is for; it is written either way
        self.dist.barrier()
        weights = parallel.model_state(self.model, self.dist) if parallel.is_sharded(self.model) else None
        if self.dist.is_main:
            checkpoint_io.save_model(lora.merged(self.model), self.tokenizer, self.out / "model", weights,
                                     overwrite=self.config.overwrite)
        self.dist.barrier()  # every rank returns once the model is written (and they leave together)
        if self.logger is not None:
            self.logger.close()
        return history

    def _stop(self, saved: bool, signum: int | None) -> None:
        """Save the finished step (unless just saved) and raise :class:`TrainingInterrupted`."""
        if not saved:
            self.save()
        if self.logger is not None:
            self.logger.close()
        raise TrainingInterrupted(
            f"GRPO interrupted after step {self.step} of {self.config.steps}: checkpoint "
            f"{self.out / f'{checkpoint_io.CHECKPOINT_PREFIX}{self.step}'}; run the same command again to continue "
            "(--resume is the default)", signum or signal.SIGINT)

    def close(self) -> None:
        """Release the DDP wrapper, then the process group. The wrapper goes first: were its reducer the group's
        last owner, freeing it would join gloo's worker threads while holding the GIL, which a thread finishing the
        last collective needs to free its tensors (a hang at exit, one run in a few)."""
        self.ddp_model = self.model
        gc.collect()
        self.dist.destroy()

    def train_step(self) -> dict:
        """One rollout batch and its optimizer step(s); returns the step's metrics."""
        cfg = self.config
        self.step += 1
        grpo_state.seed_step(cfg.seed, self.step, self.dist.rank)
        t0 = time.perf_counter()
        mine, trajectories, rounds, found = self._sample_groups()
        if self.dist.is_main and cfg.rollout_samples > 0:  # what the policy did, for a researcher to read
            save_rollout_sample(self.out, self.step, trajectories, cfg.group_size, cfg.rollout_samples)
        t1 = time.perf_counter()
        rng = random.Random(cfg.seed * 7_919 + self.step * 31 + self.dist.rank)
        chosen, advs, include, gstats = prepare_step(
            trajectories, cfg.group_size, advantage=cfg.advantage, scale_std=cfg.scale_std,
            equal_groups="drop" if cfg.dynamic_sampling_rounds > 1 else cfg.equal_groups,
            exclude_truncated=cfg.exclude_truncated, rng=rng, overlong=cfg.overlong)
        update = self.update(chosen, advs, include)
        if not self._mismatch_checked and "mismatch/abs_mean" in update:  # the first step that trained
            self._mismatch_checked = True
            note = mismatch.check_first_step(update, cfg.max_logprob_mismatch, tis_cap=cfg.tis_cap, dtype=cfg.dtype,
                                             rollout_engine=cfg.rollout_engine)  # raises without TIS
            if note and self.dist.is_main:
                print(f"grpo: step {self.step}: {note}", flush=True)
        t2 = time.perf_counter()
        outcomes = [(i, _outcome(t)) for k, i in enumerate(mine) for t in trajectories[k * cfg.group_size:
                                                                                     (k + 1) * cfg.group_size]
                    if not is_error(t)]  # no verdict: says nothing about the task's difficulty
        all_outcomes = self.dist.all_gather_object(outcomes)
        flat = [o for part in all_outcomes for o in part]
        retired = self.pool.record([i for i, _ in flat], [o for _, o in flat])
        metrics = {"step": self.step}
        metrics.update(grpo_state.rollout_metrics(self.dist.all_gather_object(
            [grpo_state.trajectory_summary(t) for t in trajectories])))
        metrics.update(update)
        gathered = self.dist.all_gather_object(asdict(gstats))
        for key in ("groups", "all_equal", "dropped", "duplicated", "excluded_trajectories", "error_trajectories"):
            metrics[f"groups/{key}"] = sum(g[key] for g in gathered)
        metrics.update({"data/sampling_rounds": rounds, "data/signal_groups": found,
                        "data/retired": retired, "data/active_tasks": len(self.pool.active),
                        "data/fresh_used": self.pool.next_fresh, "time/rollout_s": t1 - t0,
                        "time/update_s": t2 - t1, "optim/lr": self.scheduler.get_last_lr()[0]})
        if self.engine is not None:
            metrics.update(self.engine.metrics())
        return metrics

    def _sample_groups(self) -> tuple[list[int], list[Any], int, int]:
        """This rank's task indices and their trajectories (group after group), the collection rounds, and the
        groups with mixed rewards over all ranks. With ``dynamic_sampling_rounds > 1`` more tasks are drawn and
        played while fewer than ``tasks_per_step`` groups have signal (every rank loops alike: the count is
        global)."""
        cfg = self.config
        mine: list[int] = []
        trajectories: list[Any] = []
        rounds = found = 0
        while rounds < cfg.dynamic_sampling_rounds:
            global_tasks = self.pool.draw(cfg.tasks_per_step)
            share = len(global_tasks) // self.dist.world_size
            drawn = global_tasks[self.dist.rank * share:(self.dist.rank + 1) * share]
            mine += drawn
            trajectories += self.collect([self.pool.task(i) for i in drawn])
            rounds += 1
            found = int(self.dist.all_reduce_sum(float(len(signal_groups(trajectories, cfg.group_size)))))
            if found >= cfg.tasks_per_step:
                break
        return mine, trajectories, rounds, found

    def collect(self, tasks: list[dict]) -> list[Any]:
        """``group_size`` episodes of each task, group after group; each trajectory carries the token ids, loss
        mask and log-probabilities the policy sampled, which the update trains on."""
        from envs.tokens import template_switch
        from trainers.policies import TransformersPolicy
        from trainers.rollout import RolloutConfig, collect

        cfg = self.config
        env_kwargs = dict(self.env_kwargs)
        env_kwargs.setdefault("max_tool_calls", cfg.max_tool_calls)
        rollout_cfg = RolloutConfig(env_id=cfg.env_id, env_kwargs=env_kwargs, max_new_tokens=cfg.max_new_tokens,
                                    temperature=cfg.temperature, top_p=cfg.top_p,
                                    num_envs=cfg.num_envs or len(tasks) * cfg.group_size,
                                    schedule="lockstep" if cfg.lockstep_rollouts else "async",
                                    seed=(cfg.seed * 1_000_003 + self.step * 9_973 + self.dist.rank) % 2**31,
                                    use_chat_template=template_switch(cfg.chat_template),
                                    max_total_tokens=self.max_total_tokens)
        show = enabled(cfg.progress) and self.dist.is_main
        if self.engine is not None:  # wake, push the current weights, sample, sleep for the update
            self.engine.prepare(self.model)
            try:
                return collect(self.engine.policy(self.tokenizer), tasks, rollout_cfg, group_size=cfg.group_size,
                               progress=show, progress_leave=False)
            finally:
                self.engine.sleep()
        policy = TransformersPolicy(self.model, self.tokenizer, device=self.device)
        self.model.eval()
        try:
            with parallel.gathered(self.model), precision.autocast(self.device, cfg.dtype):
                return collect(policy, tasks, rollout_cfg, group_size=cfg.group_size, progress=show,
                               progress_leave=False)
        finally:
            self.model.train()

    def update(self, trajectories: list[Any], advantages: list[float], include: list[bool]) -> dict:
        """``update_epochs`` optimizer steps on the chosen trajectories; returns loss and policy metrics (those of
        the first, on-policy epoch; ``*_last`` of the last)."""
        cfg = self.config
        # rows with no trained token add nothing: not forwarded at all; rows no pass can hold are left out
        trajectories, advantages, too_long = memory.trainable_rows(trajectories, advantages, include, self.capacity)
        if too_long:
            print(f"grpo: step {self.step}: {len(too_long)} trajectories left out of the update (longest "
                  f"{max(too_long)} tokens): one pass holds {self.capacity}; lower --max-total-tokens, or "
                  f"{memory.HOLD_MORE}", flush=True)
        include = [True] * len(trajectories)
        batch = build_batch(trajectories, advantages, include, self.pad_id) if trajectories else None
        local_tokens = batch.num_tokens if batch is not None else 0
        global_tokens = self.dist.all_reduce_sum(float(local_tokens))
        if global_tokens == 0:
            self.bad_in_row = 0
            self._scheduler_step()
            return {"loss/policy": 0.0, "train/tokens": 0, "train/skipped": 1, "train/no_signal": 1, "train/empty": 1,
                    "train/too_long": len(too_long)}
        batch = batch.to(self.device) if batch is not None else _dummy_batch(self.pad_id, self.device)
        normalizer = global_tokens / self.dist.world_size  # DDP averages gradients over ranks
        self.model.train()
        chunks = memory.batch_slices(batch, cfg.micro_batch_size, self.micro_tokens)  # read each step
        passes = parallel.pass_count(self.model, self.dist, len(chunks))  # FSDP: the same on every rank
        stats, grad_norm, finite, no_signal = self._epoch(batch, chunks, passes, normalizer, first=True)
        steps, last = int(finite and not no_signal), stats
        for _ in range(1, cfg.update_epochs if steps else 1):  # later epochs: clipped against the sampler
            last, _, ok, clipped_out = self._epoch(batch, chunks, passes, normalizer, first=False)
            if not ok or clipped_out:  # non-finite, or every token clipped: no step taken
                break
            steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        self._scheduler_step()
        n = max(global_tokens, 1.0)
        out = {"loss/policy": stats["loss"], "policy/entropy": stats["entropy"] / n,
               "train/optimizer_steps": steps, "policy/ratio_mean_last": last["ratio"] / n,
               "policy/clip_frac_last": (last["clip_low"] + last["clip_high"]) / n,
               "policy/ratio_mean": stats["ratio"] / n, "policy/clip_frac_low": stats["clip_low"] / n,
               "policy/clip_frac_high": stats["clip_high"] / n, "grad/norm": grad_norm,
               "train/tokens": int(global_tokens), "train/skipped": int(not finite or no_signal),
               "train/no_signal": int(no_signal), "train/empty": 0, "train/too_long": len(too_long)}
        out.update(mismatch.metrics(stats, n, max(self.dist.all_gather_object(self._mismatch_max)), cfg.tis_cap))
        if cfg.kl_beta > 0:
            out["policy/kl"] = stats["kl"] / n
            out["loss/total"] = stats["loss"] + cfg.kl_beta * stats["kl"] / n
        return out

    def _epoch(self, batch: Any, chunks: list, passes: int, normalizer: float, *, first: bool
               ) -> tuple[dict, float, bool, bool]:
        """One pass over the step's batch and, unless the gradient is non-finite or zero, one optimizer step;
        returns the reduced sums, the gradient norm, whether it was finite, and whether it had no signal.
        ``first``: the on-policy epoch (its failures count toward ``max_bad_steps``)."""
        self.optimizer.zero_grad(set_to_none=True)
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "ratio": 0.0, "clip_low": 0.0, "clip_high": 0.0,
                "mm_abs": 0.0, "mm_k3": 0.0, "tis_weight": 0.0, "tis_capped": 0.0}
        if first:
            self._mismatch_max = 0.0
        for k in range(passes):
            mb = batch.slice(chunks[k]) if k < len(chunks) else _dummy_batch(self.pad_id, self.device)
            with parallel.grad_sync(self.ddp_model, self.dist, last=k == passes - 1):
                self._micro_step(mb, normalizer, sums, record_mismatch=first)
        grad_norm = self._grad_norm()
        stats = self.dist.all_reduce_dict(sums)
        # each rank's loss is its token sum over (global tokens / world size): the sum over ranks is world_size x the loss
        stats["loss"] /= self.dist.world_size
        finite = math.isfinite(grad_norm) and math.isfinite(stats["loss"])
        # No signal (every advantage 0): Adam would still move the weights along its momentum, so don't step.
        no_signal = finite and grad_norm == 0.0
        if finite:
            if not no_signal:
                self.optimizer.step()
            if first:
                self.bad_in_row = 0
        elif first:
            self.bad_in_row += 1
            if self.dist.is_main:
                print(f"grpo: step {self.step}: non-finite loss ({stats['loss']}) or gradient norm ({grad_norm}); "
                      f"step skipped ({self.bad_in_row} in a row)", flush=True)
        elif self.dist.is_main:
            print(f"grpo: step {self.step}: non-finite loss or gradient in a later update epoch; the step's "
                  f"remaining epochs skipped", flush=True)
        self.optimizer.zero_grad(set_to_none=True)
        return stats, grad_norm, finite, no_signal

    def _micro_step(self, mb: Any, normalizer: float, sums: dict, *, record_mismatch: bool = True) -> None:
        cfg = self.config
        ft = mb.first_target
        with precision.autocast(self.device, cfg.dtype):
            logits = memory.update_logits(self.ddp_model, mb.input_ids, mb.attention_mask, ft, self.share_prefix)
        targets = mb.input_ids[:, ft + 1:]
        mask, old = mb.loss_mask[:, ft:], mb.old_logprobs[:, ft:]
        logp, entropy = token_logprobs_and_entropy(logits, targets, cfg.temperature)
        del logits  # the log-probabilities' backward holds them
        if cfg.tis_cap > 0:  # old policy: the trainer's own log-probabilities; tokens weighted by the capped ratio
            loss = mismatch.tis_policy_loss(logp, old, mb.advantages, mask, cfg.tis_cap, cfg.clip_low, cfg.clip_high,
                                            normalizer=normalizer)
        else:  # old policy: the sampler's log-probabilities
            loss = policy_loss(logp, old, mb.advantages, mask, cfg.clip_low, cfg.clip_high, normalizer=normalizer)
        worst = mismatch.accumulate(sums, logp, old, mask, cfg.tis_cap)
        if record_mismatch:  # later epochs differ from the sampler by the update, not by a mismatch
            self._mismatch_max = max(self._mismatch_max, worst)
        total = loss
        if self.ref_model is not None:
            with torch.no_grad(), precision.autocast(self.device, cfg.dtype):
                ref_logits = memory.update_logits(self.ref_model, mb.input_ids, mb.attention_mask, ft,
                                                  self.share_prefix)
                ref = token_logprobs(ref_logits, targets, cfg.temperature)
            kl = masked_sum(kl_k3(logp, ref), mask)
            total = total + cfg.kl_beta * kl / normalizer
            sums["kl"] += float(kl.detach())
        total.backward()
        sums["loss"] += float(loss.detach())
        # the ratio the loss clips: against the sampler's log-probabilities, or the trainer's own with TIS;
        # sums over tokens (counts for the clip), divided by the step's tokens at the end
        base = logp.detach() if cfg.tis_cap > 0 else old
        for key, value in update_sums(logp.detach(), base, mb.advantages, mask, entropy, cfg.clip_low,
                                      cfg.clip_high).items():
            sums[key] += value

    def _scheduler_step(self) -> None:
        # The schedule follows training steps, skipped ones included; torch warns when a step had no optimizer step.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self.scheduler.step()

    def _grad_norm(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
        if not params:
            return 0.0
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        return parallel.clip_grad_norm(params, max_norm)

    # ------------------------------------------------------------------ checkpoints

    def save(self, strict: bool = True) -> bool:
        """Write ``checkpoint-<step>`` (model, optimizer, scheduler, pool, counters) atomically; rank 0 writes
        (full state dicts under FSDP, gathered by every rank), the others wait. A write that fails (a full
        disk) raises :class:`checkpoint_io.CheckpointWriteError` when ``strict``; otherwise it prints one
        line, training goes on from memory, and False is returned (counted in ``checkpoint_failures``)."""
        failed: checkpoint_io.CheckpointWriteError | None = None
        sharded = parallel.is_sharded(self.model)
        weights = parallel.model_state(self.model, self.dist) if sharded else None
        optimizer = parallel.optimizer_state(self.model, self.optimizer, self.dist)
        if self.dist.is_main:
            state = {"step": self.step, "bad_in_row": self.bad_in_row, "pool": self.pool.state_dict(),
                     "optimizer": optimizer, "scheduler": self.scheduler.state_dict(),
                     "config": asdict(self.config)}
            if self.ref_model is not None:
                state["ref_model"] = self.ref_model.state_dict()
            try:
                checkpoint_io.save_checkpoint(self.out, self.step, lora.savable(self.model), self.tokenizer, state,
                                           self.config.keep_checkpoints, weights, overwrite=self.config.overwrite)
            except checkpoint_io.CheckpointWriteError as exc:
                failed = exc
        self.dist.barrier()
        if failed is None:
            return True
        if strict:
            raise failed
        self.checkpoint_failures += 1
        newest = checkpoint_io.latest_checkpoint(self.out)
        print(f"grpo: step {self.step}: checkpoint not saved: {failed}; training goes on (newest checkpoint on disk: "
              f"{newest.name if newest else 'none'})", flush=True)
        return False

    def load_latest(self) -> bool:
        """Restore the newest checkpoint in ``output_dir``; False when there is none."""
        found = checkpoint_io.latest_checkpoint(self.out)
        if found is None:
            return False
        state = checkpoint_io.load_checkpoint(found, lora.savable(self.model), loader=parallel.load_model_state)
        self.step, self.bad_in_row = int(state["step"]), int(state["bad_in_row"])
        self.pool.load_state_dict(state["pool"])
        parallel.load_optimizer_state(self.model, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.ref_model is not None and "ref_model" in state:
            self.ref_model.load_state_dict(state["ref_model"])
        return True


def _outcome(traj: Any) -> float:
    correct = getattr(traj, "is_correct", None)
    return 1.0 if (bool(correct) if correct is not None else float(traj.reward) >= 1.0) else 0.0


def _dummy_batch(pad_id: int, device: torch.device) -> Any:
    """A one-row batch with nothing to train on: keeps a rank with no trajectories in step under DDP."""
    from trainers.grpo_data import TrainBatch

    z = torch.zeros((1, 1), device=device)
    return TrainBatch(torch.full((1, 2), pad_id, dtype=torch.long, device=device),
                      torch.ones((1, 2), dtype=torch.long, device=device), z, z.clone(),
                      torch.zeros(1, device=device), 0)


def run(config: GRPOConfig) -> dict:
    """``websailor grpo``: load the model, tokenizer and tasks, train, return the last step's metrics."""
    grpo_state.resolve_device(config.device)  # --device cuda without CUDA: one line, before loading anything
    if config.rollout_engine == "vllm":  # vLLM, a GPU, a possible length: one line each, before loading anything
        rollout_engine.check_before_loading(config.model, config.vllm_max_model_len)
    config.require_simulator()  # the environment is built from the config's own options: checked before loading
    from envs.tasks import load_tasks
    from trainers.models import load_lm

    # fp32 master weights whatever the compute dtype (a bf16 load would round an fp32 checkpoint first)
    model, tokenizer = load_lm(config.model, config.tokenizer or None, "float32")
    tasks = [t.to_dict() for t in load_tasks(config.tasks)]  # validated as the environment validates them
    task_filter = grpo_state.import_callable(config.task_filter) if config.task_filter else None
    trainer = GRPOTrainer(config, model, tokenizer, tasks, task_filter=task_filter)
    try:
        history = trainer.train()
    finally:
        trainer.close()
    last = history[-1] if history else {"step": trainer.step}
    if trainer.dist.is_main:
        rows = list(iter_metrics(trainer.out / "metrics.jsonl")) if trainer.logger else history
        tokens_per_s = trainer.bar.tokens_per_second if trainer.bar is not None else 0.0
        print(grpo_summary_line(rows, trainer.resumed_from, tokens_per_s))
        print(json.dumps({**{k: v for k, v in last.items()
                             if k in ("step", "reward/mean", "loss/policy", "policy/entropy", "rollout/length")},
                          **step_counts(rows)}))
    return last


def step_counts(rows: list[dict]) -> dict[str, int]:
    """How many steps had signal (an optimizer step), none (every advantage 0: all-equal groups or no
    tokens), or were skipped for a non-finite loss or gradient."""
    no_signal = sum(int(r.get("train/no_signal", 0)) for r in rows)
    skipped = sum(int(r.get("train/skipped", 0)) for r in rows)
    return {"steps": len(rows), "steps_with_signal": len(rows) - skipped, "steps_no_signal": no_signal,
            "steps_nonfinite": skipped - no_signal}


def grpo_summary_line(rows: list[dict], resumed_from: int = 0, tokens_per_s: float = 0.0) -> str:
    """The last line a GRPO run prints: steps, how many had signal, rewards, speed."""
    counts = step_counts(rows)
    rewards = [float(r["reward/mean"]) for r in rows if isinstance(r.get("reward/mean"), (int, float))]
    reward = (f"mean reward {sum(rewards) / len(rewards):.3f} (first {rewards[0]:.3f}, last {rewards[-1]:.3f})"
              if rewards else "no reward recorded")
    resumed = f" (resumed at step {resumed_from})" if resumed_from else ""
    return (f"GRPO: {counts['steps']} steps{resumed}: {counts['steps_with_signal']} with signal (weights updated), "
            f"{counts['steps_no_signal']} without (every group's rewards equal: skipped), "
            f"{counts['steps_nonfinite']} skipped (non-finite); {reward}; {tokens_per_s:.0f} sampled tokens/s")
