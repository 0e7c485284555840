"""``websailor wiki ...``: build, embed, search, visit, stats, fetch.

Each subcommand is a config dataclass (one attribute docstring per field: the ``--help``
text) and a ``run_*`` function that tests call directly. ``websailor --help`` imports this
module, so it imports nothing heavy at the top: Whoosh, the parsers and the store are
imported inside the run functions.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Kept equal to wiki_sim.ingest.SOURCE_KINDS (a test checks); not imported to stay light.
SourceKind = Literal["default", "dump", "jsonl", "gensim-sample"]
Retriever = Literal["bm25", "dense", "hybrid"]
DEFAULT_WIKI_DIR = "data/wiki"


@dataclass
class BuildConfig:
    """Build an offline Wikipedia simulator (SQLite store + search index: Whoosh, or tantivy) from a corpus.

    Examples:
      websailor wiki build --out data/wiki                      (the embedded default corpus)
      websailor wiki build --source dump simplewiki.xml.bz2 --out data/simplewiki
      websailor wiki build --source jsonl wiki18.jsonl --out data/wiki18
      websailor wiki build --source jsonl bcp.jsonl --id-field docid --url-field url --out data/bcp
      websailor wiki build --source jsonl kilt.jsonl --title-field wikipedia_title --id-field wikipedia_id
    """

    path: str | None = field(default=None, metadata={"positional": True})
    """Corpus file: a MediaWiki XML dump (.xml/.xml.bz2) for --source dump, a JSONL file for --source jsonl,
    optionally another copy of summaries_en-us.json for --source default."""
    source: SourceKind = "default"
    """Corpus kind: default (embedded Vital Articles), dump, jsonl, gensim-sample (the enwiki test
    sample: 206 XML pages, 106 articles)."""
    out: str = DEFAULT_WIKI_DIR
    """Simulator directory to create or replace (built beside it, swapped in when complete)."""
    workers: int = 2
    """Parser and index writer processes."""
    memory_mb: int | None = None
    """Memory budget of the whole build in MB (this process and its index writers; default: 1024 above what
    the command holds at start). Peak RAM does not grow with the index; a budget too small, or a full disk,
    fails the build in one line and leaves the simulator at --out as it was."""
    page_timeout: float = 10.0
    """Seconds one page may take to parse before it is skipped (and counted in build.json)."""
    reuse: bool = False
    """Keep an existing complete simulator at --out built from the same source by the same package version."""
    progress: bool = True
    """Show progress bars."""
    cache_dir: str | None = None
    """Where fetched corpora are cached (default: $WEBSAILOR_CACHE, else ~/.cache/websailor-gym)."""
    engine: Literal["whoosh", "tantivy", "auto"] = "whoosh"
    """Search index: whoosh (default), tantivy (faster at scale; pip install 'websailor-gym[tantivy]'), or auto
    (tantivy above 200,000 pages)."""
    title_field: str | None = None
    """--source jsonl: field of the page title (default: title; wiki-18 "contents" lines carry it on their
    first line; a record without one takes the first line of its text)."""
    text_field: str | None = None
    """--source jsonl: field of the text, a string or a list of strings (default: text, or wiki-18 contents)."""
    url_field: str | None = None
    """--source jsonl: field of the document's own URL, shown in search hits and accepted by visit
    (default: none; pages get their Wikipedia URL)."""
    id_field: str | None = None
    """--source jsonl: field of the document id (kept as the doc_id fact; names apart documents with one title)."""
    retriever: Retriever = "bm25"
    """Indexes to build: bm25 (the search index only), dense or hybrid (also the dense index of `websailor wiki
    embed`, made from --model; either serves all three retrievers)."""
    model: str | None = None
    """--retriever dense|hybrid: the embedding model, as `websailor wiki embed --model` takes it (default: the
    static model wordllama-l2-256 fetched by `websailor wiki fetch`; a local causal-LM folder distils its
    input-embedding table)."""

    def __post_init__(self) -> None:
        if self.engine not in ("whoosh", "tantivy", "auto"):
            raise ValueError(f"--engine must be whoosh, tantivy or auto, got {self.engine!r}")
        if self.retriever not in ("bm25", "dense", "hybrid"):
            raise ValueError(f"--retriever must be bm25, dense or hybrid, got {self.retriever!r}")
        if self.source not in ("default", "dump", "jsonl", "gensim-sample"):
            raise ValueError(f"--source must be one of default, dump, jsonl, gensim-sample; got {self.source!r}")
        if self.source in ("dump", "jsonl") and not self.path:
            raise ValueError(f"--source {self.source} needs a PATH to the corpus file")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"--workers must be an integer >= 1, got {self.workers!r}")
        if self.memory_mb is not None and (not isinstance(self.memory_mb, int) or isinstance(self.memory_mb, bool)
                                           or self.memory_mb < 256):
            raise ValueError(f"--memory-mb must be an integer >= 256, got {self.memory_mb!r}")
        if not self.page_timeout > 0:
            raise ValueError(f"--page-timeout must be > 0 seconds, got {self.page_timeout!r}")
        if not self.out:
            raise ValueError("--out must name a directory")
        named = [f for f in ("title_field", "text_field", "url_field", "id_field") if getattr(self, f) is not None]
        if named and self.source != "jsonl":
            raise ValueError(f"--{named[0].replace('_', '-')} applies to --source jsonl only")
        for f in named:
            if not str(getattr(self, f)).strip():
                raise ValueError(f"--{f.replace('_', '-')} must name a field, got {getattr(self, f)!r}")


def run_build(config: BuildConfig) -> int:
    from wiki_sim.build import build

    fields = None
    if config.source == "jsonl":
        from wiki_sim.ingest.jsonl import JsonlFields

        fields = JsonlFields(title=config.title_field, text=config.text_field, url=config.url_field,
                             id=config.id_field)
    info = build(config.source, config.path, config.out, workers=config.workers, page_timeout=config.page_timeout,
                 progress=config.progress, cache_dir=config.cache_dir, reuse=config.reuse, engine=config.engine,
                 fields=fields, memory_mb=config.memory_mb)
    c = info["counts"]
    if config.retriever != "bm25":
        run_embed(EmbedConfig(config.out, model=config.model, progress=config.progress))
    if info.get("reused"):
        print(f"{config.out}: up to date ({c['pages']} pages from the same source); not rebuilt")
        return 0
    d = info["durations_s"]
    print(f"built {config.out}: {c['pages']} pages, {c['redirects']} redirects, {c['links']} links, "
          f"{c['facts']} facts, {info['skipped']['count']} skipped; "
          f"{'links derived from the text; ' if info.get('links', {}).get('derived') else ''}"
          f"{d['total']:.1f} s (parse+store {d['parse_and_store']:.1f} s, index {d['index']:.1f} s)"
          f"{'; engine ' + info['index']['engine'] if config.engine == 'auto' else ''}")
    from wiki_sim.engines import recommendation

    note = recommendation(info["index"]["engine"], c["pages"])
    if note:
        print(note, file=sys.stderr)
    return 0


def default_model_dir() -> str:
    """The converted SmolLM2-135M folder that `websailor model fetch` makes in the cache."""
    from wiki_sim.common.cache import cache_dir

    return str(cache_dir() / "models" / "smollm2-135m")


@dataclass
class EmbedConfig:
    """Add a dense index to a built simulator (static token embeddings: WordLlama's table from its PyPI wheel,
    or one distilled from a local causal LM by the Model2Vec recipe; no model hub), so that it serves
    --retriever dense and hybrid.

    With --tune contrastive the token table is then trained on the simulator's own pairs (a page's short
    description, or its lead's first sentence, with the title's words removed -> the page's title and lead;
    InfoNCE over in-batch negatives), 10% of the pages held out by a hash of the title; about 25 s more for
    10k pages on one core. On held-out pages the tuned static table measured dense description recall@10
    0.727 (untuned 0.630; SmolLM2's tuned table 0.690), and hybrid 0.860 against BM25's 0.830
    (benchmarks/README.md#retrieval).

    Examples:
      websailor wiki embed data/wiki
      websailor wiki embed data/wiki --tune contrastive --seed 0
      websailor wiki embed data/wiki --recipe input --model ~/.cache/websailor-gym/models/smollm2-135m
      websailor wiki search data/wiki "German-born theoretical physicist" --retriever hybrid
    """

    wiki_dir: str = field(metadata={"positional": True})
    """Simulator directory (built with `websailor wiki build`)."""
    model: str | None = None
    """--recipe static: a static model's name (default and only one: wordllama-l2-256, fetched by `websailor
    wiki fetch`); --recipe input|hidden: a local causal-LM folder (transformers format, with tokenizer.json;
    default: the converted SmolLM2-135M in the cache, made by `websailor model fetch`)."""
    recipe: Literal["auto", "hidden", "input", "static"] = "auto"
    """Token vectors: static (a static embedding model trained for sentence similarity, from a PyPI wheel:
    WordLlama, MIT license; measured best, benchmarks/README.md#retrieval), input (a causal LM's
    input-embedding table; no forward pass), hidden (one layer's hidden state of each token; one forward
    pass per token, 2-7 minutes on 2 cores), or auto: static, or input when --model is a folder."""
    layer: int = 8
    """--recipe hidden: the decoder layer whose output is a token's vector."""
    dim: int = 256
    """Dimensions kept by PCA."""
    tune: Literal["none", "contrastive"] = "none"
    """none (the distilled table as is) or contrastive (trained on the simulator's own pairs; see above)."""
    steps: int = 300
    """--tune contrastive: optimizer steps."""
    batch: int = 512
    """--tune contrastive: pairs per step (distinct pages; the batch's other pages are the negatives)."""
    lr: float = 0.01
    """--tune contrastive: Adam's learning rate."""
    temperature: float = 0.05
    """--tune contrastive: the softmax temperature over cosine similarities."""
    seed: int = 0
    """--tune contrastive: the seed of batches and query choice (the same seed writes the same index)."""
    progress: bool = True
    """Show progress."""

    def __post_init__(self) -> None:
        if self.recipe not in ("auto", "hidden", "input", "static"):
            raise ValueError(f"--recipe must be auto, hidden, input or static, got {self.recipe!r}")
        if self.tune not in ("none", "contrastive"):
            raise ValueError(f"--tune must be none or contrastive, got {self.tune!r}")
        self.tune_config()  # a bad --steps, --batch, --lr, --temperature or --seed fails here
        if not isinstance(self.layer, int) or self.layer < 1:
            raise ValueError(f"--layer must be an integer >= 1, got {self.layer!r}")
        if not isinstance(self.dim, int) or self.dim < 2:
            raise ValueError(f"--dim must be an integer >= 2, got {self.dim!r}")


    def tune_config(self) -> Any:
        """The :class:`wiki_sim.contrast.TuneConfig` of --tune contrastive, else ``None``."""
        if self.tune == "none":
            return None
        from wiki_sim.contrast import TuneConfig

        return TuneConfig(steps=self.steps, batch=self.batch, lr=self.lr, temperature=self.temperature,
                          seed=self.seed)


def run_embed(config: EmbedConfig) -> int:
    from wiki_sim.embed import build_vectors

    from wiki_sim.static_model import DEFAULT_STATIC_MODEL, STATIC_MODELS

    recipe = config.recipe
    if recipe == "auto":
        recipe = "static" if config.model is None or config.model in STATIC_MODELS else "input"
    model = config.model or (DEFAULT_STATIC_MODEL if recipe == "static" else default_model_dir())
    meta = build_vectors(config.wiki_dir, model, recipe=recipe,
                         layer=config.layer, dim=config.dim, progress=config.progress, tune=config.tune_config())
    size = sum(f["bytes"] for f in meta["files"].values()) / 2 ** 20
    tuned = meta["tune"]
    how = (f", tuned contrastively on {sum(tuned['pairs'].values())} pairs of {tuned['split']['training']} pages, "
           f"loss {tuned['loss']['first_20_mean']:.2f} -> {tuned['loss']['last_20_mean']:.2f}") if tuned else ""
    print(f"dense index of {config.wiki_dir}: {meta['pages']} pages x {meta['dim']} dims ({size:.0f} MB, "
          f"{meta['recipe']} recipe from {meta['model']['name']}{how}), {meta['durations_s']['total']:.1f} s")
    return 0


@dataclass
class SearchConfig:
    """Search a built simulator: the top-k pages per query, with snippets."""

    wiki_dir: str = field(metadata={"positional": True})
    """Simulator directory (built with `websailor wiki build`)."""
    queries: list[str] = field(default_factory=list, metadata={"positional": True, "nargs": "+"})
    """One or more queries."""
    k: int = 10
    """Results per query."""
    json: bool = False
    """Print JSON instead of text."""
    retriever: Retriever = "bm25"
    """bm25, dense or hybrid (BM25 and dense fused by reciprocal rank); dense and hybrid need a simulator
    built with --retriever dense|hybrid (or given one by `websailor wiki embed`)."""

    def __post_init__(self) -> None:
        if self.retriever not in ("bm25", "dense", "hybrid"):
            raise ValueError(f"--retriever must be bm25, dense or hybrid, got {self.retriever!r}")
        if isinstance(self.queries, str):
            self.queries = [self.queries]
        if not self.queries or not all(isinstance(q, str) and q.strip() for q in self.queries):
            raise ValueError(f"give at least one non-blank query, got {self.queries!r}")
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"--k must be an integer >= 1, got {self.k!r}")


def run_search(config: SearchConfig) -> int:
    from wiki_sim.sim import WikiSim

    with WikiSim(config.wiki_dir, retriever=config.retriever) as sim:
        results = sim.search(config.queries, k=config.k)
    if config.json:
        print(json.dumps([{"query": q, "corrected_query": hits.corrected_query, "hits": [asdict(h) for h in hits]}
                          for q, hits in zip(config.queries, results)], ensure_ascii=False))
        return 0
    for query, hits in zip(config.queries, results):
        fixed = f" (spelling corrected: results for '{hits.corrected_query}')" if hits.corrected_query else ""
        print(f"# {query}: {len(hits)} results{fixed}")
        for i, hit in enumerate(hits, 1):
            print(f"{i}. {hit.title}  <{hit.url}>\n   {hit.snippet}")
        print()
    return 0


@dataclass
class VisitConfig:
    """Read one page of a built simulator, focused on a goal (the agent's visit tool)."""

    wiki_dir: str = field(metadata={"positional": True})
    """Simulator directory (built with `websailor wiki build`)."""
    url: str = field(default="", metadata={"positional": True})
    """Page URL (https://en.wikipedia.org/wiki/Title) or title."""
    goal: str = ""
    """What to look for on the page."""
    json: bool = False
    """Print JSON (url, title, found, evidence, summary) instead of the tool's text."""
    summarizer_url: str | None = None
    """Base URL of an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) to summarize with a model
    instead of extractively; the API key is read from $OPENAI_API_KEY if set."""
    summarizer_model: str | None = None
    """Model name for --summarizer-url."""

    def __post_init__(self) -> None:
        if not self.url or not self.url.strip():
            raise ValueError("give the URL (or title) of the page to visit")
        if not self.goal or not self.goal.strip():
            raise ValueError('--goal is required: what to look for on the page, e.g. --goal "birth date"')
        if bool(self.summarizer_url) != bool(self.summarizer_model):
            raise ValueError("--summarizer-url and --summarizer-model go together")


def run_visit(config: VisitConfig) -> int:
    import os

    from wiki_sim.focus import format_not_found, format_visit
    from wiki_sim.records import url_to_title
    from wiki_sim.sim import WikiSim

    summarizer = None
    if config.summarizer_url:
        from wiki_sim.summarizers import OpenAISummarizer

        summarizer = OpenAISummarizer(config.summarizer_url, config.summarizer_model or "",
                                      api_key=os.environ.get("OPENAI_API_KEY"))
    with WikiSim(config.wiki_dir, summarizer=summarizer) as sim:
        result = sim.read(config.url, config.goal)
        title = url_to_title(config.url) if result is None else None
        suggestions = sim.closest_pages(title) if title else []
    if config.json:
        out: dict[str, Any] = {"url": config.url, "goal": config.goal, "found": result is not None}
        if result is not None:
            page, focused = result
            out.update(title=page["title"], page_url=page["url"], evidence=focused.evidence, summary=focused.summary)
        else:
            out["did_you_mean"] = [{"title": t, "url": u} for t, u in suggestions]
        print(json.dumps(out, ensure_ascii=False))
    elif result is None:
        print(format_not_found(config.url, config.goal, suggestions))
    else:
        print(format_visit(config.url, config.goal, result[1]))
    return 0 if result is not None else 1


@dataclass
class StatsConfig:
    """Print a simulator's build metadata: source, counts, skipped pages, versions, durations."""

    wiki_dir: str = field(metadata={"positional": True})
    """Simulator directory (built with `websailor wiki build`)."""
    json: bool = False
    """Print the full build record as JSON."""


def run_stats(config: StatsConfig) -> int:
    from wiki_sim.sim import WikiSim

    with WikiSim(config.wiki_dir) as sim:
        stats = sim.stats()
    if config.json:
        print(json.dumps(stats, ensure_ascii=False, indent=2))
        return 0
    b = stats["build"]
    c = b.get("counts", {})
    src = b.get("source", {})
    print(f"simulator   {stats['path']}")
    print(f"source      {src.get('kind')} {src.get('corpus') or src.get('path', '')}")
    print(f"pages       {stats['pages']} (indexed {stats['documents_indexed']}, engine {stats['engine']})")
    for key in ("redirects", "links", "links_resolved", "facts", "facts_with_target", "names"):
        print(f"{key:<11} {c.get(key)}")
    links = b.get("links") or {}
    print(f"link source {'derived from the text (' + links.get('method', '') + ')' if links.get('derived') else 'wikilinks'}"
          f"{'; the corpus has no links between its pages' if not c.get('links_resolved') else ''}")
    print(f"skipped     {b.get('skipped', {}).get('count')}")
    print(f"built at    {b.get('built_at')} in {b.get('durations_s', {}).get('total')} s")
    print("versions    " + ", ".join(f"{k} {v}" for k, v in b.get("versions", {}).items()))
    return 0


@dataclass
class FetchConfig:
    """Download the embedded default corpus, the gensim enwiki test sample and the static embedding model
    (WordLlama's, for `websailor wiki embed --recipe static`) from PyPI into the cache (sha256 verified; a
    cached file that matches is not downloaded again)."""

    cache_dir: str | None = None
    """Cache directory (default: $WEBSAILOR_CACHE, else ~/.cache/websailor-gym)."""


def run_fetch(config: FetchConfig) -> int:
    from wiki_sim import sources
    from wiki_sim.static_model import DEFAULT_STATIC_MODEL, fetch_static_model

    for name, fetch in (("default corpus", sources.fetch_default_corpus),
                        ("gensim enwiki sample", sources.fetch_gensim_sample)):
        path = fetch(config.cache_dir)
        print(f"{name}: {path}")
    weights, _ = fetch_static_model(DEFAULT_STATIC_MODEL, config.cache_dir)
    print(f"static embedding model {DEFAULT_STATIC_MODEL}: {weights}")
    sys.stdout.flush()
    return 0
