"""The child processes of ``benchmarks.scale`` (each system measured in its own process tree).

``python -m benchmarks._scale_systems build SYSTEM CORPUS OUT``: builds a baseline index (``fts5``,
``tantivy``, ``bm25s``) from a JSONL corpus; the simulator's engines are built by the ``websailor
wiki build`` CLI instead.

``python -m benchmarks._scale_systems serve SYSTEM PATH``: opens an index (``simulator`` and
``simulator-tantivy``: a simulator directory; ``fts5``, ``fts5-stopwords``, ``tantivy``,
``bm25s``: a baseline's OUT), prints ``{"open_s": ...}``, then answers one JSON query per stdin line
(``{"q": ...}``) with ``{"titles": [...], "ms": ...}`` (top 10 with snippets, as an agent gets them;
the time is the search call's, measured here).

``python -m benchmarks._scale_systems env WIKI TASKS NUM_ENVS SECONDS [STEPS]``: ``gym.make(
"websailor/WikiSim-v0")`` (one environment, or an ``AsyncVectorEnv`` of NUM_ENVS) played by the
scripted heuristic agent for SECONDS (or until STEPS sub-environment steps, all together, if
sooner: memory compared at equal work, as the caches grow with it) after one warm-up episode;
prints sub-environment steps per second, the time to create it and the episodes' success.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Callable

K = 10
_WORD = re.compile(r"\w+")
Search = Callable[[str], list[str]]


def _docs(corpus: Path):
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            yield d["title"], d["text"]


def build_fts5(corpus: Path, out: Path) -> None:
    db = sqlite3.connect(out / "fts5.sqlite")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter unicode61')")
    batch = []
    for doc in _docs(corpus):
        batch.append(doc)
        if len(batch) == 10_000:
            db.executemany("INSERT INTO docs(title, body) VALUES (?, ?)", batch)
            batch = []
    db.executemany("INSERT INTO docs(title, body) VALUES (?, ?)", batch)
    db.commit()
    db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
    db.commit()
    db.close()


def _tantivy_schema():
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("title", stored=True, tokenizer_name="en_stem")
    sb.add_text_field("body", stored=True, tokenizer_name="en_stem")
    return sb.build()


def build_tantivy(corpus: Path, out: Path) -> None:
    import tantivy

    index = tantivy.Index(_tantivy_schema(), path=str(out))
    writer = index.writer(heap_size=256_000_000, num_threads=2)
    for title, text in _docs(corpus):
        writer.add_document(tantivy.Document(title=title, body=text))
    writer.commit()
    writer.wait_merging_threads()


def _bm25s_tokenize(texts: list[str]):
    import bm25s
    from whoosh.lang.porter import stem

    from wiki_sim.analysis import STOPWORDS

    return bm25s.tokenize(texts, stopwords=sorted(STOPWORDS), stemmer=lambda ws: [stem(w) for w in ws],
                          show_progress=False)


def build_bm25s(corpus: Path, out: Path) -> None:
    import bm25s

    docs = list(_docs(corpus))
    retriever = bm25s.BM25()
    retriever.index(_bm25s_tokenize([f"{t}\n{x}" for t, x in docs]), show_progress=False)
    retriever.save(str(out), corpus=[{"title": t, "text": x} for t, x in docs], show_progress=False)


def open_search(system: str, path: Path) -> Search:
    """Open ``system``'s index at ``path``; return ``search(query) -> top-10 titles`` (snippets made)."""
    if system in ("simulator", "simulator-tantivy"):
        from wiki_sim import WikiSim

        sim = WikiSim(path, cache_size=0)
        return lambda q: [h.title for h in sim.search([q], K)[0] if h.snippet is not None]
    if system in ("fts5", "fts5-stopwords"):
        from wiki_sim.analysis import STOPWORDS
        from wiki_sim.index import TITLE_BOOST

        conn = sqlite3.connect(f"file:{path / 'fts5.sqlite'}?mode=ro", uri=True)
        sql = (f"SELECT title, snippet(docs, 1, '', '', '...', 48) FROM docs WHERE docs MATCH ? "
               f"ORDER BY bm25(docs, {TITLE_BOOST}, 1.0) LIMIT ?")
        drop = STOPWORDS if system == "fts5-stopwords" else frozenset()

        def fts5(q: str) -> list[str]:
            words = [w for w in _WORD.findall(q) if w.lower() not in drop]
            return [t for t, _ in conn.execute(sql, (" OR ".join(f'"{w}"' for w in words), K))] if words else []
        return fts5
    if system == "tantivy":
        import tantivy

        from wiki_sim.index import TITLE_BOOST

        schema = _tantivy_schema()
        index = tantivy.Index(schema, path=str(path))
        searcher = index.searcher()

        def tan(q: str) -> list[str]:
            query, _errors = index.parse_query_lenient(q, ["title", "body"], field_boosts={"title": TITLE_BOOST})
            generator = tantivy.SnippetGenerator.create(searcher, query, schema, "body")
            generator.set_max_num_chars(300)
            out = []
            for _score, address in searcher.search(query, K).hits:
                doc = searcher.doc(address)
                generator.snippet_from_doc(doc).fragment()
                out.append(doc["title"][0])
            return out
        return tan
    if system == "bm25s":
        import bm25s

        from wiki_sim.analysis import analyze
        from wiki_sim.snippets import best_snippet

        retriever = bm25s.BM25.load(str(path), load_corpus=True, mmap=True)
        corpus = retriever.corpus

        def bm(q: str) -> list[str]:
            tokens = _bm25s_tokenize([q])
            if not tokens.vocab:
                return []
            ids, _ = retriever.retrieve(tokens, k=K, show_progress=False, n_threads=1)
            weights = {t: 1.0 for t in analyze(q)}
            out = []
            for i in ids[0]:  # documents when the index was loaded with its corpus, else ids
                doc = i if isinstance(i, dict) else corpus[int(i)]
                best_snippet(doc["text"], weights)
                out.append(doc["title"])
            return out
        return bm
    raise SystemExit(f"unknown system {system!r}")


def serve(system: str, path: Path) -> None:
    start = time.perf_counter()
    search = open_search(system, path)
    opened = time.perf_counter() - start
    t = time.perf_counter()
    search("the first query after opening")  # lazily loaded parts count as opening
    print(json.dumps({"open_s": round(opened, 4), "first_query_s": round(time.perf_counter() - t, 4)}), flush=True)
    for line in sys.stdin:
        query = json.loads(line)["q"]
        t = time.perf_counter()
        titles = search(query)
        ms = (time.perf_counter() - t) * 1e3
        print(json.dumps({"titles": titles, "ms": ms}), flush=True)


def env_run(wiki: str, tasks: str, num_envs: int, seconds: float, max_steps: int | None = None) -> dict:
    import gymnasium as gym
    import numpy as np

    import envs  # noqa: F401  (registers the environments)
    from envs.baselines import HeuristicAgent

    n_tasks = sum(1 for _ in open(tasks, encoding="utf-8"))

    class InOrder(gym.Wrapper):
        """Sub-environment ``shard`` plays tasks shard, shard + num_envs, ...: no task twice (so no
        search is answered from the simulator's cache) while there are tasks left."""

        def __init__(self, env: gym.Env, shard: int):
            super().__init__(env)
            self._next = shard

        def reset(self, *, seed=None, options=None):
            index, self._next = self._next % n_tasks, self._next + num_envs
            return self.env.reset(seed=seed, options={"task_index": index})

    def maker(shard: int):
        return lambda: InOrder(gym.make("websailor/WikiSim-v0", wiki_dir=wiki, tasks=tasks,
                                        tools=["search", "visit"]), shard)

    start = time.perf_counter()
    makers = [maker(i) for i in range(num_envs)]
    vec = gym.vector.AsyncVectorEnv(makers) if num_envs > 1 else gym.vector.SyncVectorEnv(makers)
    obs, _ = vec.reset(seed=list(range(num_envs)))
    created = time.perf_counter() - start
    agents = [HeuristicAgent() for _ in range(num_envs)]
    for i, agent in enumerate(agents):
        agent.reset(obs[i], {})
    restarting = np.zeros(num_envs, dtype=bool)
    steps = episodes = correct = 0
    warm_until = num_envs  # one finished episode per sub-environment before the clock starts
    t0 = None
    while True:
        actions = tuple(agents[i].act(obs[i], {}) for i in range(num_envs))
        obs, _, terminated, truncated, info = vec.step(actions)
        for i in range(num_envs):
            if restarting[i]:
                agents[i].reset(obs[i], {})
            elif terminated[i] or truncated[i]:
                episodes += 1
                if t0 is not None:
                    correct += bool(info["is_correct"][i])
        restarting = terminated | truncated
        if t0 is None:
            if episodes >= warm_until:
                t0, steps, episodes = time.perf_counter(), 0, 0
            continue
        steps += num_envs
        if time.perf_counter() - t0 >= seconds or (max_steps is not None and steps >= max_steps):
            break
    elapsed = time.perf_counter() - t0
    vec.close()
    return {"num_envs": num_envs, "tasks": n_tasks, "create_s": round(created, 3), "steps": steps,
            "steps_per_s": round(steps / elapsed, 2), "episodes": episodes,
            "success": round(correct / episodes, 3) if episodes else None}


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"] and len(argv) == 4:
        builders = {"fts5": build_fts5, "tantivy": build_tantivy, "bm25s": build_bm25s}
        out = Path(argv[3])
        out.mkdir(parents=True, exist_ok=True)
        builders[argv[1]](Path(argv[2]), out)
    elif argv[:1] == ["serve"] and len(argv) == 3:
        serve(argv[1], Path(argv[2]))
    elif argv[:1] == ["env"] and len(argv) in (5, 6):
        steps = int(argv[5]) if len(argv) == 6 else None
        print(json.dumps(env_run(argv[1], argv[2], int(argv[3]), float(argv[4]), steps)), flush=True)
    else:
        raise SystemExit("usage: python -m benchmarks._scale_systems build SYSTEM CORPUS OUT | serve SYSTEM PATH "
                         "| env WIKI TASKS NUM_ENVS SECONDS [STEPS]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
