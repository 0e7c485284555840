"""Functions the multi-process tests run in spawned children (importable by name)."""

from __future__ import annotations

from envs.live.config import LiveConfig
from envs.live.manager import LiveWeb
from envs.tools.search import LiveSearchTool


def search_many(config_fields: dict, queries: list[str], barrier, results) -> None:
    """Wait at ``barrier`` (so the processes begin together), run each query as a search
    call, and put the list of each call's metadata on the ``results`` queue."""
    live = LiveWeb(LiveConfig(**config_fields))
    tool = LiveSearchTool(live)
    barrier.wait(timeout=60)
    out = []
    for q in queries:
        result = tool({"query": [q]})
        out.append({"ok": result.ok, **result.metadata})
    live.close()
    results.put(out)


def run_processes(config_fields: list[dict], queries: list[list[str]]) -> list[list[dict]]:
    """One spawned process per (config, queries); their metadata lists, in order."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(len(queries)), ctx.Queue()
    procs = [ctx.Process(target=search_many, args=(cfg, qs, barrier, results)) for cfg, qs in zip(config_fields, queries)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    return out
