"""Batched decoding with a KV cache that outlives a turn: the transformers rollout engine.

:func:`decode` samples a continuation for every prompt of a batch in lockstep, one forward pass
per token for all live rows, the sampling done on the model's device, and returns exactly what
:class:`trainers.policies.TransformersPolicy` returns: the sampled ids and their log-probabilities
under the sampling distribution.

Three things make it fast where ``model.generate`` per turn is slow:

- **No re-encoding.** A :class:`KVStore` keeps each episode's keys and values between its turns
  (``cache_keys``): the next turn's prompt is the previous one, the sampled turn and the tool's
  answer, so only the new tokens are run through the model. The long first prompt that every
  episode shares (system prompt, tool schemas) is computed once and kept as a shared prefix, and
  identical prompts in a batch (the ``G`` episodes of one task) are prefilled once.
- **Preallocated cache.** :class:`SlabLayer` writes each step's keys and values into a buffer sized
  for the whole turn, instead of concatenating (``DynamicCache`` copies the whole cache every token).
- **Sampling on the device.** Inverse-CDF sampling of all rows at once, one uniform per row from the
  row's own ``torch.Generator`` (the same draws as the per-row host loop it replaces, so a seed gives
  the same tokens); finished rows leave the batch.

Layout of one row in the cache (``C`` cached columns, ``N`` new columns)::

    [left pad: C - L][cached prefix: L][new prompt ids: n][right pad: N - n][sampled ...]

Pads are masked out of attention and never attend from a query that matters; positions (RoPE) count
real tokens only, so a row's numbers do not depend on its neighbours beyond floating-point effects.
Only decoder-only models whose layers all use full attention with the standard cache are supported
(:func:`supports`); others use ``model.generate``.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

try:  # the layered cache API (transformers >= 4.56); without it every model uses ``model.generate``
    from transformers.cache_utils import Cache, DynamicLayer
except ImportError:  # pragma: no cover - old transformers
    Cache, DynamicLayer = None, object  # type: ignore[assignment,misc]

from envs.tokens import ends_with_any


# ---------------------------------------------------------------------- cache layer


class SlabLayer(DynamicLayer):
    """One layer's keys and values in a preallocated ``(B, H, capacity, D)`` buffer.

    ``update`` writes the new ``(B, H, q, D)`` states at ``[length, length + q)`` and returns views of
    ``[0, length + q)``: no copy of the past per token (``DynamicLayer`` concatenates). The buffer
    doubles when full."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = int(capacity), 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        self.device = key_states.device
        self.keys = key_states.new_zeros((b, h, self.capacity, d))
        self.values = value_states.new_zeros((b, h, self.capacity, value_states.shape[-1]))
        self.is_initialized = True

    def preload(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Take ``(B, H, T, D)`` states as the first ``T`` columns (``T <= capacity``)."""
        t = keys.shape[-2]
        self.capacity = max(self.capacity, t)
        self.lazy_initialization(keys, values)
        self.keys[:, :, :t] = keys
        self.values[:, :, :t] = values
        self.length = t

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.keys.shape[-2]:
            self._grow(end)
        self.keys[:, :, self.length:end] = key_states
        self.values[:, :, self.length:end] = value_states
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def _grow(self, needed: int) -> None:
        size = max(needed, 2 * self.keys.shape[-2])
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:2], size, old.shape[-1]))
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self.keys = self.keys.index_select(0, indices)
            self.values = self.values.index_select(0, indices)

    def row_states(self, row: int, columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(H, len(columns), D)`` copies of one row's keys and values at ``columns``."""
        return self.keys[row].index_select(1, columns), self.values[row].index_select(1, columns)


def slab_cache(num_layers: int, capacity: int) -> Cache:
    """A cache of ``num_layers`` :class:`SlabLayer` s."""
    return Cache(layers=[SlabLayer(capacity) for _ in range(num_layers)])


def supports(model: Any) -> bool:
    """Whether :func:`decode` can run ``model``: a decoder that can be split at a prefix
    (:func:`cache_keyword`), without logit soft-capping, with the layered cache API."""
    config = getattr(model, "config", None)
    if Cache is None or cache_keyword(model) is None or _num_layers(model) <= 0:
        return False
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return not (getattr(text, "final_logit_softcapping", None) or getattr(text, "attn_logit_softcapping", None))


def cache_keyword(model: Any) -> str | None:
    """The keyword ``model.forward`` takes a KV cache by (``cache`` from transformers 5.x on, else
    ``past_key_values``) when the model can run a forward pass from a cached prefix: a decoder whose
    layers all use full attention (no sliding window, no linear attention) and that takes positions;
    None otherwise. The rollout engine and the update's shared prefixes (:mod:`trainers.memory`) use it."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return None
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if any(t != "full_attention" for t in (getattr(text, "layer_types", None) or ())):
        return None
    if getattr(text, "use_sliding_window", False) and getattr(text, "sliding_window", None):
        return None
    params = forward_params(model)
    if "position_ids" not in params:
        return None
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def forward_params(model: Any) -> set[str]:
    """Named parameters of the causal LM's ``forward`` (through DDP and PEFT wrappers to the model)."""
    seen: set[int] = set()
    while model is not None and id(model) not in seen:
        seen.add(id(model))
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            return set()
        names = {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if "input_ids" in names:
            return names
        inner = getattr(model, "get_base_model", None)
        model = inner() if callable(inner) else getattr(model, "module", None)
    return set()


def _num_layers(model: Any) -> int:
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(getattr(text, "num_hidden_layers", 0) or 0)


# ---------------------------------------------------------------------- the store


@dataclass
class Entry:
    """Keys and values of a token sequence: ``ids`` and per layer ``(H, len(ids), D)`` tensors."""

    ids: tuple[int, ...]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class KVStore:
    """Entries kept between ``decode`` calls: one per episode key, and a few shared prefixes.

    Bounded by ``max_bytes`` (least recently used entries go first). Entries are dropped whenever
    the model's parameters change (their in-place version counters move, as an optimizer step
    moves them), since keys and values computed by other weights are wrong."""

    MAX_PREFIXES = 4

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.entries: OrderedDict[Any, Entry] = OrderedDict()
        self.prefixes: OrderedDict[tuple[int, ...], Entry] = OrderedDict()
        self._weights: tuple[int, ...] | None = None
        self.hits = self.reused_tokens = self.prefilled_tokens = 0

    def check_weights(self, model: torch.nn.Module) -> None:
        version = tuple(p._version for p in model.parameters())
        if version != self._weights:
            self.clear()
            self._weights = version

    def clear(self) -> None:
        self.entries.clear()
        self.prefixes.clear()

    def release(self, keys: Sequence[Any]) -> None:
        for key in keys:
            self.entries.pop(key, None)

    def nbytes(self) -> int:
        return sum(e.nbytes for e in (*self.entries.values(), *self.prefixes.values()))

    def lookup(self, key: Any, prompt: Sequence[int]) -> Entry | None:
        """The longest kept entry (this key's, or a shared prefix) that is a strict prefix of ``prompt``."""
        best = None
        own = self.entries.get(key) if key is not None else None
        candidates = ([own] if own is not None else []) + list(self.prefixes.values())
        for entry in candidates:
            n = len(entry.ids)
            if n < len(prompt) and (best is None or n > len(best.ids)) and tuple(prompt[:n]) == entry.ids:
                best = entry
        if best is not None:
            if own is best:
                self.entries.move_to_end(key)
            else:
                self.prefixes.move_to_end(best.ids)
        return best

    def put(self, key: Any, entry: Entry) -> None:
        if entry.nbytes > self.max_bytes:
            return
        self.entries[key] = entry
        self.entries.move_to_end(key)
        self._evict()

    def put_prefix(self, entry: Entry) -> None:
        if entry.nbytes > self.max_bytes:
            return
        self.prefixes[entry.ids] = entry
        while len(self.prefixes) > self.MAX_PREFIXES:
            self.prefixes.popitem(last=False)
        self._evict()

    def _evict(self) -> None:
        total = self.nbytes()
        while total > self.max_bytes and (self.entries or self.prefixes):
            victim = (self.entries if self.entries else self.prefixes).popitem(last=False)[1]
            total -= victim.nbytes


def per_row_logits_to_keep() -> bool:
    """Whether this transformers reads a 2-D integer ``logits_to_keep`` as each row's own positions
    (``modeling_utils.slice_logits_to_keep``, 5.2x on). Before it (5.17, the GPU machines' version, and
    4.x), a tensor is one set of positions kept for every row, and a ``(B, 1)`` one gives ``(B, B, 1, V)``
    logits."""
    from transformers import modeling_utils

    return hasattr(modeling_utils, "slice_logits_to_keep")


# ---------------------------------------------------------------------- sampling


def sample_rows(logp: torch.Tensor, temperature: float, generators: Sequence[torch.Generator] | None) -> torch.Tensor:
    """``(B, V)`` sampling log-probabilities -> ``(B,)`` sampled ids, on ``logp``'s device.

    Greedy for ``temperature == 0``. With ``generators`` (one per row): inverse-CDF sampling with one
    float64 uniform per row from the row's generator, the cumulative sums in float64, never a token
    outside the nucleus; without: ``torch.multinomial`` on torch's global generator."""
    if temperature <= 0:
        return logp.argmax(dim=-1)
    if generators is None:
        return torch.multinomial(logp.float().exp(), 1).squeeze(-1)
    # One draw per row from its own generator, on the generator's device; one transfer for the batch.
    uniforms = [torch.rand((), generator=gen, device=gen.device, dtype=torch.float64) for gen in generators]
    same = all(x.device == uniforms[0].device for x in uniforms)
    u = (torch.stack(uniforms) if same else torch.stack([x.cpu() for x in uniforms])).to(logp.device)
    cdf = torch.cumsum(logp.to(torch.float64).exp(), dim=-1)
    u = u * cdf[:, -1]
    tokens = torch.searchsorted(cdf, u.unsqueeze(-1), right=True).squeeze(-1).clamp_(max=logp.shape[-1] - 1)
    outside = ~torch.isfinite(logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
    if bool(outside.any()):  # u landed on the very end of the cdf: step back into the nucleus
        for row in outside.nonzero().flatten().tolist():
            token = int(tokens[row])
            while token > 0 and not torch.isfinite(logp[row, token]):
                token -= 1
            tokens[row] = token
    return tokens


# ---------------------------------------------------------------------- decoding


@dataclass
class Decoded:
    """One row's continuation: ids, their sampling log-probabilities, and whether a stop sequence ended it."""

    token_ids: list[int]
    logprobs: list[float]
    stopped: bool


@dataclass
class _Plan:
    """The unique prompts of a batch, what each reuses, and which unique prompt each row is."""

    prompts: list[list[int]]
    reused: list[Entry | None]
    row_of: list[int]


def _plan(prompts: list[list[int]], keys: Sequence[Any] | None, store: KVStore | None) -> _Plan:
    """Find what each row reuses (its own kept turn, or a shared prefix) and merge identical
    (prompt, reuse) rows."""
    reused: list[Entry | None] = [None] * len(prompts)
    if store is not None:
        reused = [store.lookup(None if keys is None else keys[i], p) for i, p in enumerate(prompts)]
    unique: dict[tuple, int] = {}
    plan = _Plan([], [], [])
    for prompt, entry in zip(prompts, reused):
        sig = (id(entry), tuple(prompt))
        if sig not in unique:
            unique[sig] = len(plan.prompts)
            plan.prompts.append(list(prompt))
            plan.reused.append(entry)
        plan.row_of.append(unique[sig])
    return plan


def _common_prefix(seqs: list[list[int]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        i = 0
        while i < n and s[i] == first[i]:
            i += 1
        n = i
    return n


def _entry_from(cache: Cache, row: int, columns: torch.Tensor, ids: Sequence[int]) -> Entry:
    keys, values = [], []
    for layer in cache.layers:
        k, v = layer.row_states(row, columns)
        keys.append(k)
        values.append(v)
    return Entry(tuple(int(t) for t in ids), keys, values)


class Decoder:
    """:func:`decode`'s state: the model, its layer count, and how it takes ``logits_to_keep``."""

    def __init__(self, model: Any, device: torch.device, prefill_tokens: int = 8192, min_shared_prefix: int = 32):
        self.model, self.device = model, device
        self.layers = _num_layers(model)
        self.prefill_tokens, self.min_shared = prefill_tokens, min_shared_prefix
        params = forward_params(model)
        self.cache_arg = cache_keyword(model)
        self.keep_arg = "logits_to_keep" if "logits_to_keep" in params else None
        self.per_row_keep = per_row_logits_to_keep()

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Cache,
                 keep: torch.Tensor | None) -> torch.Tensor:
        """Logits ``(B, V)`` at ``keep`` (``(B, 1)`` column indices into ``ids``; None: the last column)."""
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                                  self.cache_arg: cache, "use_cache": True}
        index = None  # (B, 1) columns of the returned logits to gather, when the model could not pick them per row
        if self.keep_arg is None:
            index = keep if keep is not None else torch.full((ids.shape[0], 1), ids.shape[1] - 1, device=ids.device)
        elif keep is None:
            kwargs[self.keep_arg] = 1
        elif self.per_row_keep:
            kwargs[self.keep_arg] = keep
        else:  # a tensor is one set of columns for every row: the rows' distinct columns, then each row's own
            columns, index = torch.unique(keep, return_inverse=True)
            kwargs[self.keep_arg] = columns
        logits = self.model(**kwargs).logits
        if index is not None:
            logits = logits.gather(1, index.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        return logits[:, -1, :]

    def shared_prefix(self, plan: _Plan, store: KVStore | None) -> None:
        """Compute once the long prefix that rows reusing nothing have in common (the system prompt)."""
        fresh = [i for i, e in enumerate(plan.reused) if e is None]
        if len(fresh) < 2:
            return
        n = _common_prefix([plan.prompts[i] for i in fresh])
        n = min(n, min(len(plan.prompts[i]) for i in fresh) - 1)
        if n < self.min_shared:
            return
        ids = plan.prompts[fresh[0]][:n]
        cache = slab_cache(self.layers, n)
        tensor = torch.tensor([ids], device=self.device)
        self._forward(tensor, torch.ones_like(tensor), torch.arange(n, device=self.device)[None], cache, None)
        entry = _entry_from(cache, 0, torch.arange(n, device=self.device), ids)
        if store is not None:
            store.put_prefix(entry)
            store.prefilled_tokens += n
        for i in fresh:
            plan.reused[i] = entry

    def prefill(self, plan: _Plan, extra: int, store: KVStore | None) -> tuple[Cache, torch.Tensor, torch.Tensor,
                                                                              torch.Tensor]:
        """Run every unique prompt's new ids; returns the cache (rows = unique prompts), the attention
        mask ``(U, width + extra)``, the next position per row ``(U,)`` and the last logits ``(U, V)``."""
        lens = [len(e.ids) if e is not None else 0 for e in plan.reused]
        news = [p[n:] for p, n in zip(plan.prompts, lens)]
        u, c, width_new = len(news), max(lens), max(len(x) for x in news)
        width = c + width_new
        mask = torch.zeros((u, width + extra), dtype=torch.long, device=self.device)
        cache = slab_cache(self.layers, width + extra)
        self._preload(cache, plan.reused, lens, c, u)
        for layer in cache.layers:
            layer.length = c
        logits: list[torch.Tensor | None] = [None] * u
        order = sorted(range(u), key=lambda i: -len(news[i]))
        start = 0
        while start < u:
            n_chunk = len(news[order[start]])
            rows = max(1, self.prefill_tokens // max(1, n_chunk + c // 4))
            chunk = order[start:start + rows]
            start += len(chunk)
            if len(chunk) == u:
                chunk = list(range(u))
            self._prefill_chunk(cache, mask, chunk, news, lens, c, n_chunk, logits)
        for layer in cache.layers:
            layer.length = width
        if store is not None:
            store.reused_tokens += sum(lens)
            store.prefilled_tokens += sum(len(x) for x in news)
        positions = torch.tensor([n + len(x) for n, x in zip(lens, news)], device=self.device)
        return cache, mask, positions, torch.stack(logits)

    def _preload(self, cache: Cache, reused: list[Entry | None], lens: list[int], c: int, u: int) -> None:
        """Each row's reused states, right-aligned at column ``c`` of a buffer already sized for the call."""
        template = next((e for e in reused if e is not None), None)
        if template is None:
            return
        for li, layer in enumerate(cache.layers):
            k0, v0 = template.keys[li], template.values[li]
            layer.keys = k0.new_zeros((u, k0.shape[0], layer.capacity, k0.shape[-1]))
            layer.values = v0.new_zeros((u, v0.shape[0], layer.capacity, v0.shape[-1]))
            layer.device, layer.is_initialized = k0.device, True
            for row, entry in enumerate(reused):
                if entry is not None:
                    layer.keys[row, :, c - lens[row]:c] = entry.keys[li]
                    layer.values[row, :, c - lens[row]:c] = entry.values[li]

    def _prefill_chunk(self, cache: Cache, mask: torch.Tensor, chunk: list[int], news: list[list[int]],
                       lens: list[int], c: int, n_chunk: int, logits: list) -> None:
        """One forward pass over the rows ``chunk`` (right-padded to ``n_chunk``) into their cache rows."""
        pad = news[chunk[0]][0] if news[chunk[0]] else 0
        ids = torch.tensor([x + [pad] * (n_chunk - len(x)) for x in (news[i] for i in chunk)], device=self.device)
        rows = torch.tensor(chunk, device=self.device)
        for i in chunk:
            mask[i, c - lens[i]:c] = 1
            mask[i, c:c + len(news[i])] = 1
        positions = torch.tensor([[lens[i] + j for j in range(n_chunk)] for i in chunk], device=self.device)
        keep = torch.tensor([[len(news[i]) - 1] for i in chunk], device=self.device)
        if chunk == list(range(mask.shape[0])):  # every row at once: straight into the cache
            out = self._forward(ids, mask[:, : c + n_chunk], positions, cache, keep)
        else:
            sub = _RowView(cache, rows, c, mask.shape[0])
            out = self._forward(ids, mask.index_select(0, rows)[:, : c + n_chunk], positions, sub.cache, keep)
            sub.write_back()
        for row, i in enumerate(chunk):
            logits[i] = out[row]


class _RowView:
    """A cache over some rows of a larger one, starting at column ``c``: the forward writes here, then
    :meth:`write_back` copies the new columns into the big cache's rows."""

    def __init__(self, big: Cache, rows: torch.Tensor, c: int, batch: int):
        self.big, self.rows, self.c, self.batch = big, rows, c, batch
        self.cache = slab_cache(len(big.layers), 0)
        for small, layer in zip(self.cache.layers, big.layers):
            if layer.is_initialized:
                small.preload(layer.keys.index_select(0, rows)[:, :, :c], layer.values.index_select(0, rows)[:, :, :c])

    def write_back(self) -> None:
        for small, layer in zip(self.cache.layers, self.big.layers):
            if not layer.is_initialized:
                layer.lazy_initialization(small.keys.new_zeros((self.batch, *small.keys.shape[1:])),
                                          small.values.new_zeros((self.batch, *small.values.shape[1:])))
            end = small.length
            if end > layer.keys.shape[-2]:
                layer._grow(end)
            layer.keys[self.rows, :, self.c:end] = small.keys[:, :, self.c:end]
            layer.values[self.rows, :, self.c:end] = small.values[:, :, self.c:end]


def decode(decoder: Decoder, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
           stops: list[list[int]], generators: Sequence[torch.Generator] | None = None,
           logprobs_fn: Callable[[torch.Tensor, float, float], torch.Tensor],
           keys: Sequence[Any] | None = None, store: KVStore | None = None) -> list[Decoded]:
    """Sample up to ``max_new_tokens`` for every prompt (see the module docstring).

    ``stops``: stop sequences (lists of ids); a row ends right after sampling one. ``keys`` (one per
    prompt, with ``store``): each row's keys and values are kept under its key for its next turn.
    ``logprobs_fn(logits, temperature, top_p)``: the sampling distribution's ``(B, V)`` log-probabilities."""
    if store is not None:
        store.check_weights(decoder.model)
    plan = _plan(prompts, keys, store)
    decoder.shared_prefix(plan, store)
    cache, mask, positions, logits = decoder.prefill(plan, max_new_tokens, store)
    rows = torch.tensor(plan.row_of, device=decoder.device)
    if len(plan.prompts) < len(prompts) or plan.row_of != list(range(len(prompts))):
        cache.batch_select_indices(rows)
        mask, positions, logits = mask.index_select(0, rows), positions.index_select(0, rows), logits.index_select(0, rows)
    out = [Decoded([], [], False) for _ in prompts]
    slots = list(range(len(prompts)))  # per cache row: its prompt's index, or -1 once the row is finished
    width = mask.shape[1] - max_new_tokens
    max_stop = max((len(s) for s in stops), default=0)
    for step in range(max_new_tokens):
        alive = [r for r, i in enumerate(slots) if i >= 0]
        if len(alive) < len(slots):
            logits = logits.index_select(0, torch.tensor(alive, device=logits.device))
        logp = logprobs_fn(logits, temperature, top_p)
        gens = None if generators is None else [generators[slots[r]] for r in alive]
        sampled = sample_rows(logp, temperature, gens)
        chosen = logp.gather(-1, sampled.unsqueeze(-1)).squeeze(-1).float().tolist()
        ids = sampled.tolist()
        for k, row in enumerate(alive):
            i = slots[row]
            rec = out[i]
            rec.token_ids.append(ids[k])
            rec.logprobs.append(chosen[k])
            rec.stopped = bool(max_stop) and ends_with_any(rec.token_ids[-max_stop:], stops)
            if rec.stopped or step == max_new_tokens - 1:
                if store is not None and keys is not None:
                    columns = mask[row, : width + step].nonzero().flatten()
                    store.put(keys[i], _entry_from(cache, row, columns, prompts[i] + rec.token_ids[:-1]))
                slots[row] = -1
        if all(i < 0 for i in slots):
            break
        tokens = torch.zeros(len(slots), dtype=torch.long, device=decoder.device)
        tokens[torch.tensor(alive, device=decoder.device)] = sampled
        dead = sum(i < 0 for i in slots)
        # Drop finished rows once carrying them for the steps left could cost more than copying the cache.
        if dead and dead * (max_new_tokens - step) >= 2 * len(slots):
            keep = torch.tensor([r for r, i in enumerate(slots) if i >= 0], device=decoder.device)
            cache.batch_select_indices(keep)
            mask, positions, tokens = mask.index_select(0, keep), positions.index_select(0, keep), tokens[keep]
            slots = [i for i in slots if i >= 0]
        mask[:, width + step] = 1
        logits = decoder._forward(tokens.unsqueeze(-1), mask[:, : width + step + 1], positions.unsqueeze(-1),
                                  cache, None)
        positions = positions + 1
    return out
