"""Contrastive tuning of the dense index's token table on pairs the simulator itself provides
(``websailor wiki embed --tune contrastive``).

A pair is a query and the page it names without naming it: a page's short description with
the title's words removed, or its lead's first sentence with the title's words removed. The
page side is the text the index embeds (:func:`wiki_sim.dense.page_text`). Both sides are
encoded as :func:`wiki_sim.dense.encode` does (the L2-normalized sum of the token rows), and
the table (the distilled, PCA-reduced, SIF-weighted one) is trained with InfoNCE over
in-batch negatives (each batch holds distinct pages; symmetric, cosine over a temperature).

Held-out pages: a page whose title hashes into the first :data:`HELD_OUT_PERCENT` of 100
buckets (:func:`held_out`) gives no pair. The split depends on the title alone, so it is the
same for every seed and every build; ``benchmarks/retrieval.py`` draws its queries from
held-out pages only.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np

from wiki_sim.errors import WikiSimError

HELD_OUT_PERCENT = 10
"""Pages held out of training (by title hash): the benchmark's queries come from them."""
SPLIT_RULE = f"int(sha256(title utf-8)[:8 hex], 16) % 100 < {HELD_OUT_PERCENT}: held out"
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
MIN_QUERY_WORDS = {"description": 2, "first_sentence": 5}
MAX_SENTENCE_CHARS = 300


def held_out(title: str) -> bool:
    """Whether a page is held out of training (:data:`SPLIT_RULE`)."""
    bucket = int(hashlib.sha256(title.encode("utf-8")).hexdigest()[:8], 16) % 100
    return bucket < HELD_OUT_PERCENT


def without_title_words(text: str, title: str) -> str:
    """``text``'s words, those of ``title`` dropped (case-insensitive), joined by spaces."""
    drop = {w.lower() for w in _WORD.findall(title)}
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in drop)


def first_sentence(lead: str) -> str:
    return _SENTENCE_END.split(lead.strip(), maxsplit=1)[0].strip()


def training_pairs(titles: list[str], leads: dict[str, str], descriptions: Iterable[tuple[str, str]]
                   ) -> tuple[list[str], np.ndarray, dict[str, int]]:
    """Queries of the training pages and the index (in ``titles``) of the page each names:
    ``(queries (P,), pages (P,) int64, counts)``; held-out pages give none."""
    doc = {t: i for i, t in enumerate(titles)}
    queries: list[str] = []
    pages: list[int] = []
    counts = {"description": 0, "first_sentence": 0}

    def add(kind: str, title: str, text: str) -> None:
        query = without_title_words(text, title)
        if len(query.split()) >= MIN_QUERY_WORDS[kind]:
            queries.append(query)
            pages.append(doc[title])
            counts[kind] += 1

    for title, value in descriptions:
        if title in doc and not held_out(title):
            add("description", title, str(value))
    for title in titles:
        sentence = first_sentence(leads.get(title, ""))
        if not held_out(title) and 0 < len(sentence) <= MAX_SENTENCE_CHARS:
            add("first_sentence", title, sentence)
    return queries, np.asarray(pages, dtype=np.int64), counts


@dataclass(frozen=True)
class TuneConfig:
    """Contrastive tuning's settings (recorded in ``vectors/meta.json``)."""

    steps: int = 300
    """Optimizer steps."""
    batch: int = 512
    """Pairs per step (distinct pages; the other pages of the batch are the negatives)."""
    lr: float = 0.01
    """Adam's learning rate (the table's rows have norms around 0.1-1)."""
    temperature: float = 0.05
    """Cosine similarities are divided by it before the softmax."""
    seed: int = 0
    """Batches, query choice and torch's generator: the same seed gives the same table."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (2 if name == "batch" else 0):
                raise ValueError(f"--{name} must be an integer >= {2 if name == 'batch' else 0}, got {value!r}")
        for name in ("lr", "temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 10:
                raise ValueError(f"--{name} must be a number in (0, 10), got {value!r}")


def batches(pair_pages: np.ndarray, batch: int, steps: int, seed: int) -> Iterable[np.ndarray]:
    """``steps`` batches of pair indices, each of up to ``batch`` distinct pages (one random pair
    of each): (P,) -> (B,) per step, the pages cycled epoch by epoch in a seeded order."""
    rng = np.random.default_rng(seed)
    by_page: dict[int, list[int]] = {}
    for i, page in enumerate(pair_pages.tolist()):
        by_page.setdefault(page, []).append(i)
    groups = [np.asarray(v) for _, v in sorted(by_page.items())]
    batch = min(batch, len(groups))
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch:  # a new epoch; the last one's leftovers count as its first pages
            left = set(order)
            order += [g for g in rng.permutation(len(groups)).tolist() if g not in left]
        chosen, order = order[:batch], order[batch:]
        yield np.asarray([groups[g][rng.integers(len(groups[g]))] for g in chosen], dtype=np.int64)


def counted(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A text's token ids as distinct ids and how often each occurs: (L,) -> (U,) int32, (U,) float32.
    The sum of their rows weighted by the counts is the sum of the text's rows, with fewer rows to read."""
    unique, counts = np.unique(np.asarray(ids), return_counts=True)
    return unique.astype(np.int32), counts.astype(np.float32)


def _bags(texts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[Any, Any, Any]:
    """EmbeddingBag's input, offsets and per-sample weights for texts given as :func:`counted` pairs."""
    import torch

    lengths = [len(ids) for ids, _ in texts]
    flat = np.concatenate([ids for ids, _ in texts]) if texts else np.zeros(0, dtype=np.int32)
    weights = np.concatenate([c for _, c in texts]) if texts else np.zeros(0, dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    return torch.from_numpy(flat), torch.from_numpy(offsets), torch.from_numpy(weights)


def info_nce(queries: Any, pages: Any, temperature: float) -> Any:
    """Symmetric InfoNCE of matched rows, cosine over ``temperature``: (B, D), (B, D) -> ()."""
    import torch
    import torch.nn.functional as F

    q = F.normalize(queries, dim=1)
    p = F.normalize(pages, dim=1)
    logits = q @ p.T / temperature
    labels = torch.arange(len(q))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def tune_table(table: np.ndarray, query_ids: list[np.ndarray], page_ids: list[np.ndarray], pair_pages: np.ndarray,
               config: TuneConfig = TuneConfig(), progress: bool = False) -> tuple[np.ndarray, list[float]]:
    """The table trained on the pairs: (V, D) -> (V, D) float32, and the loss of every step.

    ``query_ids[i]``: pair i's token ids; ``page_ids[d]``: page d's; ``pair_pages[i]``: the
    page pair i names. Rows of tokens no pair or page of a batch holds keep their values."""
    try:
        import torch
    except ImportError:
        raise WikiSimError("contrastive tuning needs torch: pip install torch") from None
    if len(query_ids) != len(pair_pages):
        raise ValueError(f"{len(query_ids)} queries but {len(pair_pages)} pages named")
    if len(set(pair_pages.tolist())) < 2:
        raise WikiSimError("contrastive tuning needs pairs of at least 2 training pages; this simulator has "
                           f"{len(set(pair_pages.tolist()))} (too small a corpus: use --tune none)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: deterministic sums, and the machine's other jobs keep their cores
    try:
        torch.manual_seed(config.seed)
        bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(np.array(table, dtype=np.float32)),
                                                    freeze=False, mode="sum", sparse=True)
        queries = [counted(ids) for ids in query_ids]
        pages = {d: counted(page_ids[d]) for d in set(pair_pages.tolist())}  # the pages pairs name
        optimizer = torch.optim.SparseAdam(bag.parameters(), lr=config.lr)
        losses: list[float] = []
        started = shown = time.perf_counter()
        for step, chosen in enumerate(batches(pair_pages, config.batch, config.steps, config.seed), 1):
            q = bag(*_bags([queries[i] for i in chosen]))
            p = bag(*_bags([pages[d] for d in pair_pages[chosen]]))
            loss = info_nce(q, p, config.temperature)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
            if progress and (step == config.steps or time.perf_counter() - shown > 0.5):
                shown = time.perf_counter()
                _bar(step, config.steps, losses, shown - started)
        if progress and config.steps:
            print(file=sys.stderr)
        return bag.weight.detach().numpy().astype(np.float32), losses
    finally:
        torch.set_num_threads(threads)


def _bar(step: int, steps: int, losses: list[float], seconds: float) -> None:
    width = 30
    done = width * step // max(1, steps)
    recent = losses[-20:]
    print(f"\rtune [{'#' * done}{'.' * (width - done)}] {step}/{steps} loss {sum(recent) / len(recent):.3f} "
          f"({seconds:.0f} s)", end="", flush=True, file=sys.stderr)


def tune_record(config: TuneConfig, counts: dict[str, int], losses: list[float], pages: int, held: int,
                seconds: float) -> dict[str, Any]:
    """What ``vectors/meta.json`` says of a tuning run."""
    head = losses[:20] or [float("nan")]
    tail = losses[-20:] or [float("nan")]
    return {"method": "contrastive", **asdict(config), "pairs": counts,
            "split": {"rule": SPLIT_RULE, "pages": pages, "held_out": held, "training": pages - held},
            "loss": {"first_20_mean": round(sum(head) / len(head), 4), "last_20_mean": round(sum(tail) / len(tail), 4)},
            "seconds": round(seconds, 1)}
