"""How the TRL adapter samples: through the ``GRPOTrainer``'s own generation path.

- ``use_vllm=True`` (``vllm_mode`` ``colocate`` or ``server``): :class:`TRLVLLMPolicy` generates with
  the trainer's ``vllm_generation`` (TRL's ``trl/generation/vllm_generation.py``, ``VLLMGeneration.generate``,
  the call ``GRPOTrainer._generate_single_turn`` makes), whose weights TRL syncs before it calls
  ``rollout_func``; the sampled tokens' vLLM log-probabilities go back to TRL for its importance-sampling
  correction.
- otherwise: :func:`transformers_policy` samples with the trainer's model inside TRL's
  ``unwrap_model_for_generation`` (DeepSpeed ZeRO-3 parameters gathered, gradient checkpointing off)
  and its FSDP1 ``summon_full_params``, as TRL's own transformers path does.

With several processes both keep their generation calls paired (:class:`Lockstep`): a multi-turn
rollout makes a different number of calls on each process, and those calls are collective.

Both are :class:`trainers.policies.Policy` objects, so :func:`trainers.rollout.collect` plays the
episodes the same way in either case.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator, Sequence

import torch

from trainers.policies import Generation, TransformersPolicy, check_sampling, cut_at_stop, normalize_stops

VLLM_MISSING = ("GRPOConfig(use_vllm=True) needs vLLM, which is not installed: pip install 'websailor-gym[vllm]' on "
                "a GPU machine, or set use_vllm=False to sample with transformers")


def vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class Lockstep:
    """Keeps the processes' generation calls paired. Under vLLM server mode or tensor parallelism, and
    under ZeRO-3/FSDP for transformers (``synced_gpus``), every generation call is collective: each
    process must make the same calls, with the same number of prompts. Before each call the processes
    agree on the largest prompt count and budget (:meth:`agree`; the caller pads its batch with
    :attr:`filler` prompts), and a process that is done keeps answering (:meth:`drain`) until all are."""

    def __init__(self, accelerator: Any):
        self.accelerator = accelerator
        self.multi = int(getattr(accelerator, "num_processes", 1) or 1) > 1
        self.filler: list[int] = [0]

    def agree(self, prompts: list[list[int]], budget: int) -> tuple[int, int]:
        """The largest prompt count and budget over the processes (a collective call when several)."""
        if prompts and prompts[0]:
            self.filler = list(prompts[0][:1])
        if not self.multi:
            return len(prompts), budget
        mine = torch.tensor([[len(prompts), budget]], dtype=torch.long, device=self.accelerator.device)
        every = self.accelerator.gather(mine).reshape(-1, 2)
        return int(every[:, 0].max()), int(every[:, 1].max())

    def drain(self, call: Any) -> None:
        """With several processes: ``call(filler_prompts, budget)`` for each call the others still make."""
        while self.multi:
            count, budget = self.agree([], 1)
            if count == 0:
                return
            call([list(self.filler)] * count, budget)


class TRLVLLMPolicy:
    """Token policy over a ``GRPOTrainer``'s ``vllm_generation`` (see the module docstring).

    Each call generates one completion per prompt with TRL's sampling settings (``temperature``,
    ``top_p``, ... of the ``GRPOConfig``; asking for others is an error), ``max_new_tokens`` as the
    call's budget and one-token stop sequences as vLLM ``stop_token_ids``; the ids are then cut at the
    first stop sequence. With several processes the calls are kept paired (:class:`Lockstep`); call
    :meth:`finish` when done.
    """

    def __init__(self, trainer: Any, max_total_tokens: int | None = None):
        self.engine = getattr(trainer, "vllm_generation", None)
        if self.engine is None:
            raise ImportError(VLLM_MISSING)
        limit = engine_max_len(self.engine)
        if max_total_tokens is not None and limit is not None and max_total_tokens > limit:
            raise ValueError(f"RolloutConfig.max_total_tokens ({max_total_tokens}) exceeds vLLM's max_model_len "
                             f"({limit}): lower it, or raise GRPOConfig.vllm_max_model_length")
        self.tokenizer = trainer.processing_class
        self.lockstep = Lockstep(trainer.accelerator)

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, stop_ids: Sequence[Sequence[int] | int] = ()) -> list[Generation]:
        check_sampling(max_new_tokens, temperature, top_p)
        for name, asked in (("temperature", temperature), ("top_p", top_p)):
            engine_value = float(getattr(self.engine, name, asked) or asked)
            if not math.isclose(engine_value, float(asked)):
                raise ValueError(f"the rollout asks {name}={asked} but TRL's vLLM samples with {name}={engine_value} "
                                 "(GRPOConfig); set them equal")
        stops = normalize_stops(stop_ids)
        batch = [list(p) for p in prompts]
        count, budget = self.lockstep.agree(batch, max_new_tokens)
        batch += [list(self.lockstep.filler)] * (count - len(batch))
        completion_ids, logprobs = self._engine_generate(batch, budget, stops)
        out = []
        for i in range(len(prompts)):
            ids = list(completion_ids[i])[:max_new_tokens]
            lps = [math.nan if lp is None or lp[0] is None else float(lp[0]) for lp in logprobs[i]][:len(ids)]
            if len(lps) != len(ids):
                raise RuntimeError(f"TRL's vLLM generation returned {len(lps)} log-probs for {len(ids)} ids")
            ids, stopped = cut_at_stop(ids, stops)
            out.append(Generation(ids, lps[:len(ids)], self.tokenizer.decode(ids, skip_special_tokens=False),
                                  "stop" if stopped else "length"))
        return out

    def _engine_generate(self, batch: list[list[int]], budget: int,
                         stops: list[list[int]]) -> tuple[list[list[int]], list[list[list[float | None]]]]:
        engine = self.engine
        saved = engine.max_completion_length, engine.generation_kwargs
        kwargs = dict(saved[1] or {})
        one_token = [s[0] for s in stops if len(s) == 1]
        if one_token and "stop_token_ids" not in kwargs:
            kwargs["stop_token_ids"] = one_token
        engine.max_completion_length, engine.generation_kwargs = budget, kwargs
        try:
            _, completion_ids, logprobs, _ = engine.generate(prompts=batch, images=None, num_generations=1)
        finally:
            engine.max_completion_length, engine.generation_kwargs = saved
        if logprobs is None:
            raise RuntimeError("TRL's vLLM generation returned no log-probs (its VLLMGeneration.logprobs is None)")
        return completion_ids, logprobs

    def finish(self) -> None:
        """With several processes: answer the others' generation calls until every process is done."""
        self.lockstep.drain(lambda batch, budget: self._engine_generate(batch, budget, []))


class TRLTransformersPolicy:
    """:class:`TransformersPolicy` whose calls stay paired across processes (:class:`Lockstep`):
    under ZeRO-3 or FSDP, transformers' ``generate`` is collective (``synced_gpus``)."""

    def __init__(self, inner: TransformersPolicy, accelerator: Any):
        self.inner, self.tokenizer = inner, inner.tokenizer
        self.lockstep = Lockstep(accelerator)

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, stop_ids: Sequence[Sequence[int] | int] = (),
                 generators: Sequence[torch.Generator] | None = None) -> list[Generation]:
        count, _ = self.lockstep.agree([list(p) for p in prompts], max_new_tokens)
        pad = count - len(prompts)
        batch = [list(p) for p in prompts] + [list(self.lockstep.filler)] * pad
        gens = None if generators is None else [*generators, *(torch.Generator().manual_seed(0) for _ in range(pad))]
        out = self.inner.generate(batch, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                  stop_ids=stop_ids, generators=gens)
        return out[:len(prompts)]

    def finish(self) -> None:
        """With several processes: answer the others' generation calls until every process is done."""
        self.lockstep.drain(lambda batch, budget: self.inner.generate(batch, max_new_tokens=budget))


def engine_max_len(engine: Any) -> int | None:
    """The longest prompt plus completion TRL's vLLM takes (colocate: the engine's ``max_model_len``, as
    TRL's tool loop reads it; else ``GRPOConfig.vllm_max_model_length``); None when unknown."""
    try:
        return int(engine.llm.llm_engine.model_config.max_model_len)
    except AttributeError:
        value = getattr(engine, "max_model_length", None)
        return int(value) if value else None


@contextlib.contextmanager
def transformers_policy(trainer: Any) -> Iterator[TRLTransformersPolicy]:
    """A :class:`TRLTransformersPolicy` on the trainer's model, unwrapped as TRL unwraps it to generate:
    ``trl.models.unwrap_model_for_generation`` (ZeRO-3 gather per ``ds3_gather_for_generation``,
    gradient checkpointing off meanwhile) and, under FSDP1, ``summon_full_params`` (TRL's
    ``DistributedBackend``; a no-op elsewhere)."""
    from trl.models import unwrap_model_for_generation

    args = trainer.args
    model = getattr(trainer, "model_wrapped", None) or trainer.model
    dist = getattr(trainer, "_dist", None)
    full = dist.summon_full_params(model, recurse=False) if dist is not None else contextlib.nullcontext()
    with unwrap_model_for_generation(model, trainer.accelerator,
                                     gather_deepspeed3_params=getattr(args, "ds3_gather_for_generation", True),
                                     gradient_checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs",
                                                                           None)) as unwrapped, full:
        yield TRLTransformersPolicy(TransformersPolicy(unwrapped, trainer.processing_class,
                                                       device=trainer.accelerator.device), trainer.accelerator)
