"""A CPU stand-in for a colocated ``vllm.LLM``: vLLM's interface, a real transformers model behind it.

For tests and dry runs where vLLM cannot run (no CUDA): :class:`StandInLLM` keeps its *own* copy of
the model (optionally in bf16, as vLLM serves it), so it generates from whatever weights were pushed
into it and nothing else. It implements what the GRPO loop and :class:`trainers.policies.VLLMPolicy`
use, with vLLM's names and semantics:

- ``generate(prompts, sampling_params, use_tqdm=False)``: prompts are ``{"prompt_token_ids": [...]}``
  (``TokensPrompt``); one ``SamplingParams`` or one per prompt; returns ``RequestOutput``-like objects
  (``prompt_token_ids``, ``outputs[0].token_ids``, ``.logprobs`` as a list of ``{token_id: Logprob}``,
  ``.finish_reason``, ``.text``). Log-probabilities are of the processed distribution (temperature
  and top-p applied), as with ``logprobs_mode="processed_logprobs"``. Stops on ``stop_token_ids``, stop
  strings and the model's EOS; a seeded request samples from its own generator.
- ``sleep(level)``: level 1 keeps the weights, level 2 discards them (they become NaN here, so a missing
  weight push shows up as NaN log-probabilities instead of passing silently); ``wake_up(tags)``; a
  ``generate`` while the weights or the KV cache sleep raises, as a real engine would fail.
- ``llm_engine.model_executor.driver_worker.model_runner.model.load_weights(iterable of (name, tensor))``:
  copies (and casts) each tensor into the parameter of that checkpoint name, an unknown name raises
  ``KeyError``, ``lm_head.weight`` of a tied model is skipped (vLLM does the same).
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch

from trainers.policies import sampling_logprobs


@dataclass
class SamplingParams:
    """The fields of ``vllm.SamplingParams`` that :class:`trainers.policies.VLLMPolicy` sets."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    logprobs: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    stop: list[str] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    seed: int | None = None


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str
    text: str
    index: int = 0


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


def _api() -> types.SimpleNamespace:
    return types.SimpleNamespace(SamplingParams=SamplingParams, inputs=types.SimpleNamespace(TokensPrompt=dict))


class _EngineModel:
    """What ``model_runner.model`` offers the trainer: ``load_weights``."""

    def __init__(self, owner: "StandInLLM"):
        self.owner = owner

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        params = dict(self.owner.model.named_parameters())
        tied = bool(getattr(self.owner.model.config, "tie_word_embeddings", False))
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                if tied and name.startswith("lm_head."):
                    continue
                if name not in params:
                    raise KeyError(f"the engine's model has no parameter {name!r}")
                if params[name].shape != tensor.shape:
                    raise ValueError(f"{name}: expected shape {tuple(params[name].shape)}, got {tuple(tensor.shape)}")
                params[name].copy_(tensor)
                loaded.add(name)
        self.owner.loads += len(loaded)
        return loaded


class StandInLLM:
    """``vllm.LLM``'s interface over a copy of a transformers causal LM (CPU; see the module docstring).

    ``model`` is a transformers model (copied) or a folder (loaded); ``dtype`` the engine's weight dtype
    (``torch.bfloat16`` makes its log-probabilities differ from an fp32 trainer's, as vLLM's do);
    ``record_weights`` keeps a copy of the weights at the first ``generate`` call after each wake-up of the
    weights in ``weights_at_generate`` (one per rollout in the GRPO loop)."""

    vllm_api = _api()

    def __init__(self, model: Any, tokenizer: Any = None, *, dtype: torch.dtype = torch.float32, seed: int = 0,
                 record_weights: bool = False, device: str = "cpu"):
        if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(str(model))
            model = AutoModelForCausalLM.from_pretrained(str(model))
        else:
            model = copy.deepcopy(model)
        self.model = model.to(device=device, dtype=dtype).eval()
        self.tokenizer, self.seed, self.device = tokenizer, seed, torch.device(device)
        self.record_weights = record_weights
        self.weights_at_generate: list[dict[str, torch.Tensor]] = []
        self.weights_awake = self.kv_awake = True
        self.loads = self.requests = self.sleeps = self.weight_wakes = 0
        self._recorded_wake = -1
        self.events: list[str] = []
        runner = types.SimpleNamespace(model=_EngineModel(self))
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))
        eos = getattr(self.model.generation_config, "eos_token_id", None) or getattr(self.model.config,
                                                                                     "eos_token_id", None)
        import inspect

        # transformers >= 5.2x names the KV cache argument ``cache`` (``past_key_values`` before)
        self._cache_arg = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or [])

    # ------------------------------------------------------------------ sleep mode

    def sleep(self, level: int = 1) -> None:
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        if level == 2:
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan"))  # discarded: only a fresh weight push brings them back
        self.weights_awake = self.kv_awake = False
        self.sleeps += 1
        self.events.append(f"sleep{level}")

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        tags = list(tags) if tags is not None else ["weights", "kv_cache"]
        unknown = set(tags) - {"weights", "kv_cache"}
        if unknown:
            raise ValueError(f"unknown wake_up tags {sorted(unknown)}")
        self.weight_wakes += int("weights" in tags and not self.weights_awake)
        self.weights_awake = self.weights_awake or "weights" in tags
        self.kv_awake = self.kv_awake or "kv_cache" in tags
        self.events.append("wake:" + "+".join(tags))

    def reset_prefix_cache(self) -> bool:
        self.events.append("reset_prefix_cache")
        return True

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    # ------------------------------------------------------------------ generation

    @torch.no_grad()
    def generate(self, prompts: Sequence[dict], sampling_params: Any = None,
                 use_tqdm: bool = False) -> list[RequestOutput]:
        if not (self.weights_awake and self.kv_awake):
            raise RuntimeError("generate() on a sleeping engine: call wake_up() first")
        params = sampling_params if sampling_params is not None else SamplingParams()
        params = list(params) if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"expected one SamplingParams per prompt ({len(prompts)}), got {len(params)}")
        if self.record_weights and self._recorded_wake != self.weight_wakes:
            self._recorded_wake = self.weight_wakes
            self.weights_at_generate.append({n: p.detach().clone() for n, p in self.model.named_parameters()})
        self.events.append("generate")
        out = []
        for prompt, sp in zip(prompts, params):
            gen = torch.Generator().manual_seed(int(sp.seed) if sp.seed is not None else self.seed + self.requests)
            self.requests += 1
            out.append(self._one(list(prompt["prompt_token_ids"]), sp, gen))
        return out

    def _one(self, prompt: list[int], sp: Any, gen: torch.Generator) -> RequestOutput:
        ids = torch.tensor([prompt], device=self.device)
        stop_ids = set(sp.stop_token_ids or []) | self.eos_ids
        stops = list(sp.stop or [])
        tokens: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        past, finish = None, "length"
        for _ in range(sp.max_tokens):
            result = self.model(input_ids=ids, use_cache=True, **{self._cache_arg: past})
            past = getattr(result, "cache", None) if self._cache_arg == "cache" else result.past_key_values
            logp = sampling_logprobs(result.logits[:, -1].float(), sp.temperature, sp.top_p)[0]
            if sp.temperature > 0:
                token = int(torch.multinomial(logp.exp().cpu(), 1, generator=gen))
            else:
                token = int(logp.argmax())
            tokens.append(token)
            logprobs.append({token: Logprob(float(logp[token]))})
            ids = torch.tensor([[token]], device=self.device)
            if token in stop_ids:
                finish = "stop"
                break
            if stops and self.tokenizer is not None:
                text = self.tokenizer.decode(tokens, skip_special_tokens=False)
                if any(s in text for s in stops):
                    finish = "stop"
                    break
        text = self.tokenizer.decode(tokens, skip_special_tokens=False) if self.tokenizer is not None else ""
        return RequestOutput(prompt, [CompletionOutput(tokens, logprobs if sp.logprobs is not None else None,
                                                       finish, text)])


def standin_factory(dtype: torch.dtype | None = None, record_weights: bool = False, tokenizer: Any = None) -> Any:
    """An ``engine_factory`` for :class:`trainers.grpo.GRPOTrainer` that builds a :class:`StandInLLM`
    from the trainer's model (``model_dir`` ignored when a model object is given), asleep like
    :func:`trainers.rollout_engine.make_vllm` leaves a real engine. Its weights are in ``dtype``, or, when
    None, in the dtype the trainer asks the engine for (its ``--dtype``, as :func:`make_vllm` gets it)."""
    fixed = dtype  # the factory's own ``dtype`` argument is the trainer's

    def factory(model_dir: Any, *, seed: int = 0, model: Any = None, dtype: str = "float32", **_: Any) -> StandInLLM:
        from trainers import lora

        if model is not None and lora.is_lora(model):
            model = lora.merged(model)  # a dense model, as the engine loads the starting folder
        llm = StandInLLM(model if model is not None else model_dir, tokenizer,
                         dtype=fixed if fixed is not None else getattr(torch, dtype), seed=seed,
                         record_weights=record_weights)
        llm.sleep(level=2)
        return llm

    return factory
