"""Dense retrieval without a model hub: static token embeddings distilled from a local model.

The embedding model follows the Model2Vec recipe over a local causal LM (SmolLM2-135M,
converted at setup): a token's vector is its row of the input-embedding table
(``recipe="input"``, the default: no forward pass), or the hidden state of one layer when
the token is run through the model alone, after the BOS token that takes the attention sink
(``recipe="hidden"``; it measured worse). The vectors are centred and reduced by PCA to ``dim`` dimensions, then
each row is weighted by SIF (``a / (a + p(token))``, token frequencies counted over the
simulator's titles and leads), so that frequent tokens count little in a mean. ``recipe="static"``
takes instead the table of a static embedding model trained for sentence similarity, shipped in
a PyPI wheel (:mod:`wiki_sim.static_model`: WordLlama), as it is.

A text's vector is the L2-normalized sum of its tokens' rows; a page's text is its title and
lead. Up to :data:`EXACT_PAGES` pages, search is an exact scan of the page matrix (one
matrix-vector product; 10k pages x 256 float32 is 10 MB). Above it, a scan of the pages' sign
bits (:func:`sketch`: one bit per dimension, 32 bytes a page at 256 dimensions, so 100k pages
are 3 MB) by Hamming distance to the query's picks :func:`candidates` (2% of the pages, at least
:data:`SKETCH_CANDIDATES`), and only those are scored exactly: at 100k pages 0.8 ms against 3-4
ms, keeping 0.985 of the exact top 10 (benchmarks/README.md#retrieval-at-100k-pages).
Everything lives in ``<simulator>/vectors/``:

- ``tokens.npy`` (vocabulary x dim, float32, weights applied), ``tokenizer.json`` (the
  model's tokenizer, copied), ``pages.npy`` (pages x dim, float32, in index document order),
  ``bits.npy`` (the pages' sign bits, words x pages, uint64: :func:`sketch`);
- ``meta.json``, written last: the recipe, the model's identity, the build it belongs to
  (its fingerprint) and every file's size and sha256.

Opening checks sizes and checksums and loads the arrays with ``np.load(mmap_mode="r",
allow_pickle=False)``: a damaged, foreign or pickled file is refused in one line, and
processes opening one simulator share the pages through the page cache.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

import numpy as np

from wiki_sim.errors import WikiSimError

VECTORS_DIR = "vectors"
VECTORS_FORMAT = 2
VECTOR_FILES = ("tokens.npy", "tokenizer.json", "pages.npy", "bits.npy")
Recipe = Literal["hidden", "input", "static"]
Retriever = Literal["bm25", "dense", "hybrid"]
RETRIEVERS = ("bm25", "dense", "hybrid")
RECIPES = ("hidden", "input", "static")
DEFAULT_DIM = 256
DEFAULT_RECIPE = "input"
"""For a causal LM: the input-embedding table, the better of its two recipes (benchmarks/README.md#retrieval),
and no forward pass. ``websailor wiki embed`` defaults to ``static``, which measured better still."""
DEFAULT_LAYER = 8
"""``recipe="hidden"``: the layer whose hidden state is a token's vector (of SmolLM2-135M's 30)."""
SIF_A = 1e-3
LEAD_CHARS = 2000
"""Characters of a page's lead embedded with its title."""
EXACT_PAGES = 32768
"""Up to this many pages a search scans the whole page matrix; above, the sign bits pick the candidates."""
SKETCH_CANDIDATES = 2000
"""Candidates scored exactly after the sign-bit scan, at least (and at least 2% of the pages): at 100k
pages 2000 kept 0.985 of the exact top 10 and 0.957 of the top 30 (300 + 300 held-out description and
first-sentence queries), 1000 kept 0.965 and 0.913."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- the embedding model --------------------------------------------------------------

def model_vectors(model_dir: str | Path, recipe: Recipe = DEFAULT_RECIPE, layer: int = DEFAULT_LAYER,
                  batch: int = 1024, progress: bool = False) -> np.ndarray:
    """One vector per vocabulary token of the causal LM in ``model_dir``: (V, hidden) float32.

    ``hidden``: the hidden state after ``layer`` decoder layers of ``[BOS, token]`` at the
    token's position (only the first ``layer`` layers run); ``input``: the input-embedding
    table."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:
        raise WikiSimError(f"making token embeddings needs torch and transformers ({exc.name} is missing): "
                           "pip install 'websailor-gym[train]'") from None
    if recipe not in ("hidden", "input"):
        raise ValueError(f"recipe must be hidden or input for a causal LM, got {recipe!r}")
    config = AutoConfig.from_pretrained(model_dir)
    if recipe == "hidden" and not 1 <= layer <= config.num_hidden_layers:
        raise ValueError(f"layer must be in 1..{config.num_hidden_layers}, got {layer!r}")
    if recipe == "input":
        stored = stored_input_table(Path(model_dir), config.vocab_size, config.hidden_size)
        if stored is not None:
            return stored
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    table = model.get_input_embeddings().weight.detach().float().numpy()
    if recipe == "input":
        return np.ascontiguousarray(table)
    base = model.base_model
    base.layers = base.layers[:layer]  # later layers are never read
    bos = config.bos_token_id if config.bos_token_id is not None else 0
    vocab = table.shape[0]
    out = np.empty((vocab, config.hidden_size), dtype=np.float32)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, vocab, batch):
            ids = torch.arange(start, min(vocab, start + batch))
            pairs = torch.stack([torch.full_like(ids, bos), ids], 1)
            states = base(input_ids=pairs, output_hidden_states=True).hidden_states
            out[start:start + len(ids)] = states[layer][:, 1].float().numpy()
            if progress:
                print(f"\rtokens {start + len(ids)}/{vocab} ({time.perf_counter() - started:.0f} s)", end="",
                      flush=True, file=sys.stderr)
    if progress:
        print(file=sys.stderr)
    return out


INPUT_TABLE_NAMES = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight")
"""How causal LMs name their input-embedding table in a checkpoint (Llama/Qwen, GPT-2, BLOOM)."""


def stored_input_table(model_dir: Path, vocab: int, hidden: int) -> np.ndarray | None:
    """The input-embedding table read alone from a one-file ``model.safetensors`` (V, hidden)
    float32, without building the model (its other weights are never read); ``None`` when the
    checkpoint is sharded, names no single such table, or stores another shape or dtype."""
    path = model_dir / "model.safetensors"
    if not path.is_file():
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(path), "np") as f:
            names = [k for k in f.keys() if k.endswith(INPUT_TABLE_NAMES)]
            if len(names) != 1:
                return None
            header = f.get_slice(names[0])  # shape and dtype checked before anything is read
            if list(header.get_shape()) != [vocab, hidden] or header.get_dtype() not in ("F32", "F16", "F64"):
                return None
            table = f.get_tensor(names[0])
    except Exception:  # noqa: BLE001 - a damaged or foreign file (SafetensorError): the model loader decides
        return None
    return np.ascontiguousarray(table, dtype=np.float32)


def pca(vectors: np.ndarray, dim: int) -> np.ndarray:
    """Rows centred and projected on their ``dim`` principal axes: (V, H) -> (V, min(dim, H))."""
    x = vectors.astype(np.float64)
    x -= x.mean(axis=0)
    _, _, vt = np.linalg.svd(x.T @ x)
    return (x @ vt[:dim].T).astype(np.float32)


def sif_weights(counts: np.ndarray, a: float = SIF_A) -> np.ndarray:
    """``a / (a + p)`` per token, ``p`` its share of ``counts``: (V,) -> (V,)."""
    p = counts / max(1, counts.sum())
    return (a / (a + p)).astype(np.float32)


# --- encoding -------------------------------------------------------------------------

def load_tokenizer(path: str | Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise WikiSimError("dense retrieval needs the tokenizers package: pip install tokenizers") from None
    return Tokenizer.from_file(str(path))


ENCODE_CHUNK = 1024
"""Texts tokenized at once: a tokenizer's encodings hold far more than their ids (offsets,
token strings), so tokenizing 100k pages at once measured about 2 GB."""


def token_ids(tokenizer: Any, texts: list[str], vocab: int) -> Iterator[np.ndarray]:
    """Each text's token ids below ``vocab``, tokenized :data:`ENCODE_CHUNK` texts at a time:
    (n texts) -> n int32 arrays."""
    for start in range(0, len(texts), ENCODE_CHUNK):
        for enc in tokenizer.encode_batch(texts[start:start + ENCODE_CHUNK], add_special_tokens=False):
            ids = np.asarray(enc.ids, dtype=np.int32)
            yield ids[ids < vocab]


def encode_ids(table: np.ndarray, ids: Iterable[np.ndarray], n: int) -> np.ndarray:
    """L2-normalized sums of token rows: ``n`` id arrays -> (n, dim) float32 (zeros for an
    empty one)."""
    out = np.zeros((n, table.shape[1]), dtype=np.float32)
    for i, row in enumerate(ids):
        if len(row):
            out[i] = np.asarray(table[row], dtype=np.float32).sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


def encode(tokenizer: Any, table: np.ndarray, texts: list[str]) -> np.ndarray:
    """L2-normalized sums of the texts' token rows: (n texts) -> (n, dim) float32 (zeros for
    a text with no token)."""
    return encode_ids(table, token_ids(tokenizer, texts, len(table)), len(texts))


def sketch(vectors: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """The sign bits of each row, packed: (n, dim) float -> (ceil(dim / 64), n) uint64, word-major
    so that a scan reads one word of every page at a time (bits past ``dim`` are 0). Made
    ``chunk`` rows at a time: no (n, dim) temporary."""
    n, dim = vectors.shape
    words = -(-dim // 64)
    out = np.zeros((words, n), dtype=np.uint64)
    for start in range(0, n, chunk):
        bits = np.packbits(np.asarray(vectors[start:start + chunk]) > 0, axis=1)
        padded = np.zeros((len(bits), words * 8), dtype=np.uint8)
        padded[:, :bits.shape[1]] = bits
        out[:, start:start + len(bits)] = padded.view(np.uint64).T
    return out


def candidates(bits: np.ndarray, query_bits: np.ndarray, k: int) -> np.ndarray:
    """The pages whose sign bits are nearest the query's (Hamming distance): every page up to the
    smallest distance that admits at least ``k`` of them, ascending page order.
    (W, n) uint64, (W, 1) uint64 -> (>= min(k, n),) int64."""
    distance = np.bitwise_count(bits[0] ^ query_bits[0, 0]).astype(np.uint16)
    for word in range(1, len(bits)):
        distance += np.bitwise_count(bits[word] ^ query_bits[word, 0])
    at_most = np.cumsum(np.bincount(distance, minlength=64 * len(bits) + 1))
    threshold = int(np.searchsorted(at_most, min(k, len(distance))))
    return np.flatnonzero(distance <= threshold)


def page_text(title: str, lead: str) -> str:
    return f"{title}. {lead[:LEAD_CHARS]}"


# --- the index ------------------------------------------------------------------------

def _refuse(path: Path, why: str) -> WikiSimError:
    return WikiSimError(f"{path} is not this simulator's dense index ({why}); rebuild it with "
                        f"`websailor wiki embed {path.parent}`")


def _load(path: Path, spec: dict[str, Any], dtype: type, shape: tuple[int | None, ...]) -> np.ndarray:
    folder = path.parent
    if not isinstance(spec, dict) or path.is_symlink() or not path.is_file():
        raise _refuse(folder, f"{path.name} is missing")
    if path.stat().st_size != spec.get("bytes") or sha256_file(path) != spec.get("sha256"):
        raise _refuse(folder, f"{path.name} does not match the size and sha256 in meta.json")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise _refuse(folder, f"{path.name} is not a plain .npy array: {str(exc).splitlines()[0]}") from None
    if array.dtype != dtype or array.ndim != len(shape) or any(s is not None and s != a
                                                               for s, a in zip(shape, array.shape)):
        raise _refuse(folder, f"{path.name} holds {array.dtype} {array.shape}, expected {np.dtype(dtype)} "
                              f"{tuple('*' if s is None else s for s in shape)}")
    return array


class DenseIndex:
    """A simulator's ``vectors/`` folder, opened read-only and checked (see the module doc)."""

    def __init__(self, sim_dir: str | Path, fingerprint: str, pages: int, retriever: str = "dense"):
        folder = Path(sim_dir) / VECTORS_DIR
        meta_file = folder / "meta.json"
        if not meta_file.is_file():
            raise WikiSimError(f"retriever {retriever!r} needs a dense index, and {sim_dir} was built without one: "
                               f"build with `websailor wiki build --retriever {retriever}` or add one with "
                               f"`websailor wiki embed {sim_dir}`")
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise _refuse(folder, f"meta.json is unreadable: {exc}") from None
        if not isinstance(meta, dict) or meta.get("format") != VECTORS_FORMAT:
            raise _refuse(folder, f"meta.json is not format {VECTORS_FORMAT}")
        if meta.get("build_fingerprint") != fingerprint or meta.get("pages") != pages:
            raise _refuse(folder, "it was made for another build of the simulator")
        files = meta.get("files") or {}
        dim = meta.get("dim")
        self.pages = _load(folder / "pages.npy", files.get("pages.npy"), np.float32, (pages, dim))
        self.bits = _load(folder / "bits.npy", files.get("bits.npy"), np.uint64,
                          (-(-self.pages.shape[1] // 64), pages))
        self.table = _load(folder / "tokens.npy", files.get("tokens.npy"), np.float32, (None, dim))
        tokenizer_file = folder / "tokenizer.json"
        spec = files.get("tokenizer.json") or {}
        if not tokenizer_file.is_file() or tokenizer_file.is_symlink() \
                or sha256_file(tokenizer_file) != spec.get("sha256"):
            raise _refuse(folder, "tokenizer.json does not match the sha256 in meta.json")
        self.tokenizer = load_tokenizer(tokenizer_file)
        self.meta = meta

    def search(self, query: str, n: int) -> list[tuple[int, float]]:
        """The ``n`` pages nearest ``query`` (cosine), best first: ``[(docnum, score)]``."""
        vector = encode(self.tokenizer, self.table, [query])[0]
        if not vector.any():
            return []
        pages = len(self.pages)
        if pages > EXACT_PAGES and n < (k := max(SKETCH_CANDIDATES, pages // 50)):
            chosen = candidates(self.bits, sketch(vector[None]), k)
            rows = self.pages[chosen]
        else:
            chosen, rows = None, self.pages
        # einsum's own loop, one thread: a threaded BLAS matvec spins its threads on a busy
        # machine (10k pages: 15 ms against 0.5 ms measured on 2 loaded cores)
        scores = np.einsum("ij,j->i", rows, vector)
        n = min(n, len(scores))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        docs = top if chosen is None else chosen[top]
        return [(int(d), float(s)) for d, s in zip(docs, scores[top])]


RRF_K = 1
"""Reciprocal rank fusion's constant: a page's fused score is the sum over the rankings of
``weight / (RRF_K + rank)``. The usual 60 (Cormack et al. 2009) flattens the top ranks so
that a weak ranking's first page overtakes BM25's; 1 keeps BM25's top pages on top
(chosen on the benchmark's seed-0 queries, reported on others: benchmarks/README.md#retrieval)."""
DENSE_WEIGHT = 0.3
"""The dense ranking's weight in the hybrid fusion (BM25's is 1), chosen as :data:`RRF_K` was."""


def rrf(rankings: Iterable[list[Any]], k: float = RRF_K, weights: Iterable[float] | None = None) -> list[Any]:
    """Items of several best-first rankings fused by weighted reciprocal rank, best first
    (ties: first seen); ``weights`` default to 1 each."""
    rankings = list(rankings)
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[Any, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])
