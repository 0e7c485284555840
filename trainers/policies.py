"""Policies: what turns prompts into sampled tokens, behind one small interface.

:class:`Policy` (token in, token out; what training needs):
``generate(prompts, *, max_new_tokens, temperature, top_p, stop_ids) -> list[Generation]``
takes prompts as token ids and returns, per prompt, the sampled ids, their log-probabilities
under the *sampling* distribution (after temperature and top-p, renormalized), the decoded
text, and why generation stopped. ``stop_ids`` is a list of stop sequences (each a list of
ids; a bare int is a one-token sequence): generation of a row stops right after the first
one it samples, and the stop sequence is part of ``token_ids`` (it was sampled).

:class:`TextPolicy` (text only; evaluation): ``generate_text(conversations, ...)`` takes
ChatML message lists and returns generations with empty ``token_ids``/``logprobs``.

Backends: :class:`TransformersPolicy` (``model.generate``, CPU or GPU),
:class:`VLLMPolicy` (``vllm.LLM``, optional extra ``websailor-gym[vllm]``) and
:class:`OpenAIPolicy` (an OpenAI-compatible ``/chat/completions`` endpoint; text only).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Protocol, Sequence, runtime_checkable

import torch
from transformers import LogitsProcessor, StoppingCriteria

from envs.episode import AgentError
from envs.tokens import ends_with_any
from trainers.rollout_options import check_sampling

FinishReason = Literal["stop", "length"]
Engine = Literal["auto", "kv", "generate"]
"""How :class:`TransformersPolicy` decodes: ``kv`` (:mod:`trainers.decode`: lockstep batches, a KV cache
kept across an episode's turns, sampling on the device), ``generate`` (``model.generate`` per call, the
whole prompt re-encoded each time), ``auto`` (``kv`` where the model supports it)."""


def default_cache_bytes(device: torch.device) -> int:
    """How much the kept keys and values may hold: a quarter of the free GPU memory, else 2 GiB."""
    if device.type == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 4)
    return 2 * 1024**3


@dataclass
class Generation:
    """One sampled continuation."""

    token_ids: list[int]
    """The sampled ids, the stop sequence included when one ended the turn ([] for text-only policies)."""
    logprobs: list[float]
    """Per sampled id, its log-probability under the sampling distribution (same length as ``token_ids``)."""
    text: str
    """The decoded continuation (the stop sequence included, as sampled)."""
    finish_reason: FinishReason
    """``stop`` (a stop sequence or EOS was sampled) or ``length`` (``max_new_tokens`` reached)."""


@runtime_checkable
class Policy(Protocol):
    """Token in, token out."""

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 stop_ids: Sequence[Sequence[int] | int] = ()) -> list[Generation]: ...


@runtime_checkable
class TextPolicy(Protocol):
    """Text in, text out (no token ids: evaluation only)."""

    def generate_text(self, conversations: list[list[dict[str, str]]], *, max_new_tokens: int, temperature: float,
                      top_p: float, stop: Sequence[str] = ()) -> list[Generation]: ...


def normalize_stops(stop_ids: Sequence[Sequence[int] | int]) -> list[list[int]]:
    """Stop sequences as lists of ids (an int is a one-token sequence; empty ones dropped)."""
    out = []
    for s in stop_ids:
        seq = [int(s)] if isinstance(s, int) else [int(t) for t in s]
        if seq and seq not in out:
            out.append(seq)
    return out


def cut_at_stop(ids: Sequence[int], stops: Sequence[Sequence[int]]) -> tuple[list[int], bool]:
    """``ids`` up to and including the first stop sequence, and whether one was found."""
    for t in range(len(ids)):
        if ends_with_any(ids[: t + 1], stops):
            return list(ids[: t + 1]), True
    return list(ids), False


def sampling_logprobs(scores: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """``(B, V)`` logits -> ``(B, V)`` log-probabilities of the sampling distribution: divided by
    ``temperature`` (none for 0, greedy), then the top-p nucleus kept and renormalized (the
    smallest set of tokens whose mass reaches ``top_p``; at least one), ``-inf`` elsewhere."""
    scores = scores.float()
    if temperature > 0:
        scores = scores / temperature
    logp = torch.log_softmax(scores, dim=-1)
    if top_p < 1:
        sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_logp.exp(), dim=-1) - sorted_logp.exp()
        drop_sorted = mass_before >= top_p  # the first token is always kept (mass before it is 0)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logp = torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)
    return logp


class _SampleAndRecord:
    """What one ``generate`` call samples from, and what it sampled.

    :meth:`process` (as a logits processor) turns the model's logits into the sampling
    distribution's log-probabilities (:func:`sampling_logprobs`; ``generate`` is given no
    temperature or top-p of its own, so it samples from exactly these); :meth:`stop` (as a
    stopping criterion, called after each sampled token is appended) keeps that token's
    log-probability (``(B,)`` per step: no ``(B, N, V)`` score tensor is ever held) and stops
    the rows that end with a multi-token stop sequence.
    """

    def __init__(self, temperature: float, top_p: float, stops: list[list[int]], prompt_len: int,
                 generators: Sequence[torch.Generator] | None = None, single_stops: Sequence[int] = ()):
        self.temperature, self.top_p, self.stops, self.prompt_len = temperature, top_p, stops, prompt_len
        self.generators, self.single_stops = generators, set(single_stops)
        self._current: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []
        self.finished = [False] * (len(generators) if generators is not None else 0)

    def process(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._current = sampling_logprobs(scores, self.temperature, self.top_p)
        if self.generators is None:
            return self._current
        return self._draw(self._current)

    def _draw(self, logp: torch.Tensor) -> torch.Tensor:
        """Sample each unfinished row from its own generator (one draw per sampled token, so a row's
        stream never depends on its batch neighbours) and return scores that force that choice."""
        forced = torch.full_like(logp, float("-inf"))
        for row, gen in enumerate(self.generators):
            if self.finished[row]:
                forced[row, 0] = 0.0  # replaced by padding in generate(); no draw
                continue
            if self.temperature > 0:
                # Inverse CDF with one uniform per token from the row's generator (float64 sums). Not
                # torch.multinomial: with a fresh generator per row its draws were so correlated across rows
                # that the toy GRPO test stopped learning (0 of 4 seeds reached 0.8; 2 of 2 with this).
                device = "cpu" if gen.device.type == "cpu" else logp.device
                cdf = torch.cumsum(logp[row].to(device, torch.float64).exp(), 0)
                u = torch.rand((), generator=gen, device=device, dtype=torch.float64) * cdf[-1]
                token = min(int(torch.searchsorted(cdf, u, right=True)), cdf.numel() - 1)
                while token > 0 and not math.isfinite(float(logp[row, token])):  # never outside the nucleus
                    token -= 1
            else:
                token = int(logp[row].argmax())
            forced[row, token] = 0.0
        return forced

    def stop(self, input_ids: torch.LongTensor, scores: Any) -> torch.BoolTensor:
        self.steps.append(self._current.gather(-1, input_ids[:, -1:]).squeeze(-1))
        done = [bool(self.stops) and ends_with_any(row[self.prompt_len:].tolist(), self.stops) for row in input_ids]
        for row in range(len(self.finished)):
            self.finished[row] = self.finished[row] or done[row] or int(input_ids[row, -1]) in self.single_stops
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    def logprobs(self) -> torch.Tensor:
        """``(B, N)``: each sampled token's log-probability."""
        return torch.stack(self.steps, dim=1)


class _Processor(LogitsProcessor):
    def __init__(self, recorder: _SampleAndRecord):
        self.recorder = recorder

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return self.recorder.process(input_ids, scores)


class _Criterion(StoppingCriteria):
    def __init__(self, recorder: _SampleAndRecord):
        self.recorder = recorder

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        return self.recorder.stop(input_ids, scores)


@contextlib.contextmanager
def _decoding_mode(model: Any) -> Iterator[None]:
    """The model in eval mode while it samples, every module's own mode restored after: a model handed
    over in training mode (a trainer's, TRL's) samples without dropout, and with gradient checkpointing
    on, transformers before 5.2x drops the KV cache in training mode (``use_cache=False``), which the
    KV engine cannot run without."""
    modes = [(m, m.training) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    if any(training for _, training in modes):
        model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


class TransformersPolicy:
    """Sampling with a ``transformers`` causal LM's ``generate`` (CPU or GPU).

    Prompts are left-padded into batches of at most ``max_batch_size``. ``generate`` samples
    from :func:`sampling_logprobs` (temperature, then top-p; top-k off), and each sampled
    token's log-probability is kept as it is sampled, so with ``top_p=1`` they equal
    ``log_softmax(logits / T)`` of a forward pass, the quantity a trainer's importance ratio
    compares against. ``temperature=0`` is greedy (log-probabilities of the raw logits).

    ``generators`` (one ``torch.Generator`` per prompt, e.g. one per episode): each row is sampled
    from its own generator, one draw per sampled token, instead of from torch's global one, so
    what a row samples does not depend on which other rows share its batch or in which order
    batches ran (up to the floating-point effect of batch shape on the logits).
    """

    def __init__(self, model: Any, tokenizer: Any, device: str | torch.device = "cpu", max_batch_size: int = 64,
                 engine: Engine = "auto", cache_bytes: int | None = None):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if engine not in ("auto", "kv", "generate"):
            raise ValueError(f"engine must be 'auto', 'kv' or 'generate', got {engine!r}")
        self.model, self.tokenizer, self.device = model, tokenizer, torch.device(device)
        self.max_batch_size = max_batch_size
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = pad if pad is not None else getattr(tokenizer, "eos_token_id", None) or 0
        self.model.to(self.device)
        from trainers import decode

        if engine == "kv" and not decode.supports(model):
            raise ValueError(f"engine 'kv' needs a decoder with full attention only; {type(model).__name__} is not "
                             "one: use engine='generate'")
        self.engine = "generate" if engine == "generate" or not decode.supports(model) else "kv"
        self.store = decode.KVStore(cache_bytes if cache_bytes is not None else default_cache_bytes(self.device))
        self._decoder: Any = None

    def release(self, keys: Sequence[Any]) -> None:
        """Forget the kept keys and values of these episodes (they ended)."""
        self.store.release(keys)

    def clear_cache(self) -> None:
        """Forget every kept key and value (e.g. at the end of a collection)."""
        self.store.clear()

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                 stop_ids: Sequence[Sequence[int] | int] = (),
                 generators: Sequence[torch.Generator] | None = None,
                 cache_keys: Sequence[Any] | None = None) -> list[Generation]:
        """Sample a continuation of every prompt. ``cache_keys`` (one hashable per prompt, e.g. the
        episode): with the ``kv`` engine, each row's keys and values are kept under its key, so that the
        next call whose prompt extends this one runs only the new tokens (:mod:`trainers.decode`)."""
        check_sampling(max_new_tokens, temperature, top_p)
        if any(not p for p in prompts):
            raise ValueError("every prompt must hold at least one token id")
        if generators is not None and len(generators) != len(prompts):
            raise ValueError(f"expected one generator per prompt ({len(prompts)}), got {len(generators)}")
        # The model's own EOS ends a row inside generate() whatever we pass; cut there too.
        model_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        model_eos = [model_eos] if isinstance(model_eos, int) else list(model_eos or [])
        stops = normalize_stops([*stop_ids, *model_eos])
        if cache_keys is not None and len(cache_keys) != len(prompts):
            raise ValueError(f"expected one cache key per prompt ({len(prompts)}), got {len(cache_keys)}")
        out: list[Generation] = []
        with _decoding_mode(self.model):
            for start in range(0, len(prompts), self.max_batch_size):
                end = start + self.max_batch_size
                gens = None if generators is None else generators[start:end]
                if self.engine == "kv":
                    keys = None if cache_keys is None else cache_keys[start:end]
                    out += self._decode_batch(prompts[start:end], max_new_tokens, temperature, top_p, stops, gens,
                                              keys)
                else:
                    out += self._generate_batch(prompts[start:end], max_new_tokens, temperature, top_p, stops, gens)
        return out

    def _decode_batch(self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float,
                      stops: list[list[int]], generators: Sequence[torch.Generator] | None,
                      keys: Sequence[Any] | None) -> list[Generation]:
        from trainers import decode

        if self._decoder is None or self._decoder.model is not self.model:
            self._decoder = decode.Decoder(self.model, self.device)
        rows = decode.decode(self._decoder, prompts, max_new_tokens=max_new_tokens, temperature=temperature,
                             top_p=top_p, stops=stops, generators=generators, logprobs_fn=sampling_logprobs, keys=keys,
                             store=self.store if keys is not None else None)
        return [Generation(r.token_ids, r.logprobs, self.tokenizer.decode(r.token_ids, skip_special_tokens=False),
                           "stop" if r.stopped else "length") for r in rows]

    def _generate_batch(self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float,
                        stops: list[list[int]], generators: Sequence[torch.Generator] | None) -> list[Generation]:
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + list(p) for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        singles = [s[0] for s in stops if len(s) == 1]
        recorder = _SampleAndRecord(temperature, top_p, [s for s in stops if len(s) > 1], width, generators, singles)
        # With generators the processor has already chosen each row's token: generate() only takes it (greedy).
        config = GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=temperature > 0 and generators is None, temperature=1.0,
            top_p=None, top_k=0,
            pad_token_id=self.pad_id, eos_token_id=singles or None,
            return_dict_in_generate=True)
        # generate() fills every field left unset from model.generation_config (a checkpoint's
        # top_k, repetition_penalty, ...), which would change what is sampled; hide it meanwhile.
        saved = self.model.generation_config
        self.model.generation_config = GenerationConfig()
        try:
            result = self.model.generate(input_ids=ids, attention_mask=attention, generation_config=config,
                                         logits_processor=LogitsProcessorList([_Processor(recorder)]),
                                         stopping_criteria=StoppingCriteriaList([_Criterion(recorder)]))
        finally:
            self.model.generation_config = saved
        new = result.sequences[:, width:]
        logprobs = recorder.logprobs()[:, : new.shape[1]].cpu()  # (B, N)
        out = []
        for row in range(len(prompts)):
            token_ids, stopped = cut_at_stop(new[row].tolist(), stops)
            n = len(token_ids)
            out.append(Generation(token_ids, logprobs[row, :n].tolist(),
                                  self.tokenizer.decode(token_ids, skip_special_tokens=False),
                                  "stop" if stopped else "length"))
        return out


class VLLMPolicy:
    """Sampling with vLLM (GPU; ``pip install websailor-gym[vllm]``).

    ``llm`` is a ``vllm.LLM`` or a model path/name (then ``LLM(model=llm, **engine_kwargs)``
    is built with ``logprobs_mode="processed_logprobs"``, so that the returned
    log-probabilities are those of the sampling distribution, temperature and top-p applied,
    as :class:`TransformersPolicy` returns). One-token stop sequences go to
    ``stop_token_ids``; longer ones to ``stop`` as text (then cut here on ids).
    """

    def __init__(self, llm: Any, tokenizer: Any = None, seed: int | None = None, **engine_kwargs: Any):
        # An engine that is not vLLM (trainers.engine_standin, the CPU stand-in) carries the request
        # classes to use (SamplingParams, TokensPrompt) as ``vllm_api``; vLLM itself otherwise.
        self.api = getattr(llm, "vllm_api", None) if not isinstance(llm, str) else None
        if self.api is None:
            vllm = import_vllm()
            import vllm.inputs  # noqa: F401  (a submodule: loaded for self.api.inputs.TokensPrompt)

            self.api = vllm
            if isinstance(llm, str):
                engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
                llm = vllm.LLM(model=llm, **engine_kwargs)
        self.llm = llm
        self.tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()
        self.seed = seed
        self._calls = 0

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                 stop_ids: Sequence[Sequence[int] | int] = (),
                 generators: Sequence[torch.Generator] | None = None) -> list[Generation]:
        """As :meth:`TransformersPolicy.generate`; with ``generators`` each request's vLLM seed is drawn
        from its own generator (one draw per call), so a row's samples do not depend on its batch."""
        SamplingParams, TokensPrompt = self.api.SamplingParams, self.api.inputs.TokensPrompt
        check_sampling(max_new_tokens, temperature, top_p)
        if generators is not None and len(generators) != len(prompts):
            raise ValueError(f"expected one generator per prompt ({len(prompts)}), got {len(generators)}")
        stops = normalize_stops(stop_ids)

        def sampling(seed: int | None) -> Any:
            return SamplingParams(
                n=1, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, logprobs=0,
                stop_token_ids=[s[0] for s in stops if len(s) == 1],
                stop=[self.tokenizer.decode(s) for s in stops if len(s) > 1] or None,
                include_stop_str_in_output=True, skip_special_tokens=False, seed=seed)

        if generators is not None:
            params: Any = [sampling(int(torch.randint(2**31 - 1, (1,), generator=g))) for g in generators]
        else:
            params = sampling(None if self.seed is None else self.seed + self._calls)
        self._calls += 1
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        out = []
        for request in outputs:
            completion = request.outputs[0]
            ids = list(completion.token_ids)
            lps = [entry[tid].logprob for tid, entry in zip(ids, completion.logprobs or [])]
            if len(lps) != len(ids):
                raise RuntimeError(f"vLLM returned {len(lps)} log-probabilities for {len(ids)} tokens")
            ids, stopped = cut_at_stop(ids, stops)
            out.append(Generation(ids, lps[: len(ids)], self.tokenizer.decode(ids, skip_special_tokens=False),
                                  "stop" if stopped or completion.finish_reason == "stop" else "length"))
        return out


def import_vllm() -> Any:
    """The ``vllm`` module, or ``ImportError`` saying what to install."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError("the vLLM backend needs vLLM (a GPU machine): pip install 'websailor-gym[vllm]'") from exc
    return vllm


MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The policy endpoint's replies are refused above this size."""


class PolicyError(AgentError):
    """A policy endpoint gave no usable completion (down, too slow, HTTP error, not a completion).

    The rollout ends such an episode with ``termination="policy_error"``: it says nothing about
    the policy's skill, so evaluation and training count it apart and leave it out of their
    metrics and loss."""


@dataclass
class OpenAIPolicy:
    """A model behind an OpenAI-compatible ``POST <base_url>/chat/completions`` (text only,
    so evaluation only: it returns no token ids). Requests for a batch run one after another;
    the rollout calls it from several threads at once when asked (``text_workers``)."""

    base_url: str
    """API root including the version prefix, e.g. ``http://127.0.0.1:8000/v1``."""
    model: str
    """Model name sent with each request."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token (never shown in errors or ``repr``)."""
    timeout: float = 300.0
    """Deadline in seconds of one whole request (connect, send, the complete reply)."""
    max_retries: int = 2
    """Retries of connection errors, timeouts, HTTP 429 and 5xx (backoff 1 s, doubling)."""

    def __post_init__(self) -> None:
        from wiki_sim.common.chat import check_url

        check_url(self.base_url)
        if not self.model:
            raise ValueError("model must be a non-empty model name")
        if not self.timeout > 0 or self.max_retries < 0:
            raise ValueError(f"expected timeout > 0 and max_retries >= 0, got {self.timeout} and {self.max_retries}")

    def generate_text(self, conversations: list[list[dict[str, str]]], *, max_new_tokens: int,
                      temperature: float = 1.0, top_p: float = 1.0, stop: Sequence[str] = ()) -> list[Generation]:
        check_sampling(max_new_tokens, temperature, top_p)
        return [self._one(messages, max_new_tokens, temperature, top_p, list(stop)) for messages in conversations]

    def _one(self, messages: list[dict[str, str]], max_tokens: int, temperature: float, top_p: float,
             stop: list[str]) -> Generation:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                                "temperature": temperature, "top_p": top_p}
        if stop:
            body["stop"] = stop[:4]  # the OpenAI API takes up to 4
        reply = self._post(body)
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] or ""
            finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise PolicyError(f"{self._url}: the reply is not a chat completion") from None
        reason: FinishReason = "length" if finish == "length" else "stop"
        return Generation([], [], str(text), reason)

    @property
    def _url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        from wiki_sim.common.chat import ChatError, post_json

        delay = 1.0
        for attempt in range(self.max_retries + 1):
            try:  # one whole request within ``timeout``, the reply capped, no key sent to another origin
                reply = post_json(self._url, body, api_key=self.api_key, timeout=self.timeout,
                                  max_bytes=MAX_REPLY_BYTES)
            except ChatError as exc:
                if not exc.retryable or attempt == self.max_retries:
                    raise PolicyError(self._redact(f"no completion after {attempt + 1} attempt(s): {exc}")) from None
                time.sleep(delay)
                delay *= 2
                continue
            if not isinstance(reply, dict):
                raise PolicyError(f"{self._url}: the reply is not a chat completion")
            return reply
        raise AssertionError("unreachable")

    def _redact(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text
