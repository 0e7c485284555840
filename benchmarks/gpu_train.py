"""GRPO on one GPU, measured in one run (the prepared GPU check): the transformers engine, and vLLM when present.

One process, one model (nothing downloaded): a randomly initialized Qwen3 of Qwen3-0.6B's shape
(``--size qwen3-0.6b``; the vocabulary is the tokenizer's) on a real byte-level BPE tokenizer (the converted
SmolLM2's ``tokenizer.json`` from ``~/.cache/websailor-gym/models/smollm2-135m`` when setup made it, else one
trained here by :mod:`trainers.subword`), with Qwen3's chat template as shipped (TRL's copy,
``trl/chat_templates/qwen3.jinja``) where TRL is installed, else the ChatML fallback of :mod:`envs.tokens`
(``--template``), and a simulator plus task file built from generated pages (or ``--wiki-dir``/``--tasks``).
The compute is bf16 autocast over fp32 master weights with gradient checkpointing, as ``websailor grpo
--dtype bfloat16 --gradient-checkpointing``. For each engine (``--rollout-engine``: ``hf``, the trainer's own
transformers model through :class:`trainers.policies.TransformersPolicy` and its KV engine; ``vllm``, a
colocated vLLM engine; ``auto``: hf, plus vLLM when vLLM and a GPU are present) it measures:

1. rollouts through ``websailor/WikiSim-v0`` (the trainer's own collection), sampled tokens per second;
2. bare generation of the rollouts' first prompts on the same engine, all at once, ``--max-new-tokens``
   each, no environment (``benchmarks.rollout_speed.bare`` for hf); target: rollout >= 80% of bare;
3. one ``GRPOTrainer.train_step`` (rollout, update; with vLLM also wake, weight push and sleep): time, peak
   memory, and the sampler/trainer log-probability mismatch of its trained tokens (mean and max
   ``|trainer_logp - sampler_logp|``: the sampler's bf16 generation against the trainer's bf16 forward of
   the same tokens), set against the first-step check's default limit
   (:data:`trainers.mismatch.DEFAULT_MAX_LOGPROB_MISMATCH`; the step itself runs with the check off);
4. one update on two trajectories of each ``--long-tokens`` length (16k and 32k), one per forward pass:
   time, peak memory, loss and gradient norm finite.

Usage: ``python -m benchmarks.gpu_train [--rollout-engine auto|hf|vllm]`` on a GPU: under 8 minutes on one
H200 (``total_s`` and the ``targets`` say). Without CUDA (or with ``--rollout-engine vllm`` and no vLLM) it
prints one line saying what is missing and exits 2. ``--dry-run`` runs the same code path on CPU with a tiny
model and, for vLLM, :class:`trainers.engine_standin.StandInLLM` (a check of the script, not a measurement).
Prints a table, then one line of JSON.

**What it needs.** With ``--rollout-engine hf``: no vLLM, no TRL and no network; torch and transformers
(with their own requirements: numpy, tokenizers, huggingface-hub, safetensors, pyyaml, regex, tqdm, jinja2,
networkx, ...) and these pure-Python packages of the project's (:data:`CARRIED`):

- ``gymnasium`` with ``cloudpickle`` and ``farama-notifications`` (the environment);
- ``whoosh-reloaded`` with ``cached-property`` (the simulator's search index).

The simulator is *read* here, which needs nothing else; *building* it from the generated pages needs the
build's packages too (``sqlite-utils``, ``mwparserfromhell``, ``wordfreq`` and theirs), so on a machine that has
only torch and transformers, build it elsewhere and bring it along.

**A GPU machine with torch and transformers only, offline.** On a machine where the project is installed
(its virtual environment), from the repository root::

    python -m benchmarks.gpu_train --prepare gpu_check

builds ``gpu_check/wiki`` and ``gpu_check/tasks.jsonl`` and copies the installed files of :data:`CARRIED`
into ``gpu_check/deps`` (pure Python, a few MB; refused for a package with compiled files). Copy the
repository and ``gpu_check`` to the GPU machine, then from the repository root::

    PYTHONPATH=gpu_check/deps python -m benchmarks.gpu_train --rollout-engine hf \\
        --wiki-dir gpu_check/wiki --tasks gpu_check/tasks.jsonl

With network access once, wheels do the same: ``pip download --no-deps --only-binary=:all: -d wheels
gymnasium cloudpickle farama-notifications whoosh-reloaded cached-property``, then on the GPU machine
``pip install --no-index --no-deps --target gpu_check/deps wheels/*.whl`` (or ``pip install --no-index
--find-links wheels ...`` into its environment).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from benchmarks.gpu_rollout import SIZES

SMOLLM2_DIR = Path("~/.cache/websailor-gym/models/smollm2-135m").expanduser()

CARRIED = ("gymnasium", "cloudpickle", "farama-notifications", "whoosh-reloaded", "cached-property")
"""Distributions the check needs beyond torch, transformers and their requirements (``--rollout-engine hf``
on a built simulator); ``--prepare`` copies their installed files."""

BUILD_ONLY = ("sqlite_utils", "mwparserfromhell", "wordfreq")
"""Modules that building the generated simulator needs and reading it does not."""

TIME_TARGET_S = 480.0
"""Under 8 minutes on one GPU, everything included."""


# ---------------------------------------------------------------- inputs: simulator, tokenizer, model

def qwen3_template() -> str | None:
    """Qwen3's chat template as shipped (thinking), from TRL's copy; None without TRL (TRL is not imported)."""
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "chat_templates" / "qwen3.jinja"
    return path.read_text(encoding="utf-8") if path.exists() else None


def build_tokenizer(kind: str, wiki_dir: Path, vocab_size: int = 4096, template: str = "auto") -> tuple[Any, str, str]:
    """A real BPE tokenizer; ``kind`` ``smollm2`` (setup's files), ``subword`` (trained here on the simulator's
    text and the turn protocol) or ``auto`` (smollm2 when present). ``template``: ``qwen3`` (TRL's copy),
    ``chatml`` (no template: the ChatML fallback) or ``auto`` (qwen3 where TRL is installed). Returns the
    tokenizer, its kind and the template used."""
    if kind == "auto":
        kind = "smollm2" if (SMOLLM2_DIR / "tokenizer.json").exists() else "subword"
    if kind == "smollm2":
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(SMOLLM2_DIR)
    else:
        from trainers.subword import train_subword_tokenizer, wiki_corpus

        tok = train_subword_tokenizer(wiki_corpus(wiki_dir), vocab_size=vocab_size)
    text = qwen3_template() if template in ("auto", "qwen3") else None
    if template == "qwen3" and text is None:
        raise ValueError("--template qwen3 needs TRL's copy of Qwen3's chat template: pip install "
                         "'websailor-gym[trl]' (or --template chatml)")
    tok.chat_template = text
    tok.eos_token = "<|im_end|>"
    if tok.pad_token is None:
        tok.pad_token = "<|endoftext|>" if "<|endoftext|>" in tok.get_vocab() else tok.eos_token
    return tok, kind, "qwen3" if text is not None else "chatml"


def save_model(size: str, tok: Any, out: Path, dtype: torch.dtype) -> Path:
    """A randomly initialized Qwen3 of the given shape for ``tok``, saved with it to ``out``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=len(tok), max_position_embeddings=40960, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                         torch_dtype="bfloat16", **SIZES[size])
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(dtype).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def missing_build_modules() -> list[str]:
    return [m for m in BUILD_ONLY if importlib.util.find_spec(m) is None]


def build_simulator(out: Path, pages: int) -> tuple[Path, list[dict]]:
    """A simulator of ``pages`` generated, interlinked pages and one task per page (its code word)."""
    missing = missing_build_modules()
    if missing:
        raise ValueError(f"building the generated simulator needs {', '.join(missing)} (not installed here); "
                         "build it where the project is installed with `python -m benchmarks.gpu_train --prepare "
                         "DIR` and pass --wiki-dir DIR/wiki --tasks DIR/tasks.jsonl")
    from wiki_sim.build import build

    words = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]
    corpus = out / "pages.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    with open(corpus, "w", encoding="utf-8") as f:
        for k in range(pages):
            text = (f"Station {k} is a research station on the coast of {words[k % 10].title()} Bay, founded in "
                    f"{1900 + k % 120}. Its code word is {words[(k * 7) % 10]}-{k}. It exchanges data with "
                    f"Station {(k + 1) % pages} and Station {(k * 3) % pages}. ") * 4
            f.write(json.dumps({"title": f"Station {k}", "text": text}) + "\n")
    wiki = out / "wiki"
    build("jsonl", corpus, wiki, workers=2, progress=False)
    tasks = [{"id": f"s{k}", "question": f"What is the code word of Station {k}?",
              "answer": f"{words[(k * 7) % 10]}-{k}"} for k in range(pages)]
    return wiki, tasks


def copy_distribution(name: str, dest: Path) -> int:
    """Copy an installed pure-Python distribution's files (its packages and ``.dist-info``) under ``dest``;
    returns the bytes copied. A distribution with compiled files is refused (it would not run elsewhere)."""
    from importlib import metadata

    dist = metadata.distribution(name)
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in str(f)]
    compiled = [str(f) for f in files if str(f).endswith((".so", ".pyd", ".dylib"))]
    if compiled:
        raise ValueError(f"{name} has compiled files ({compiled[0]}): carry a wheel built for the GPU machine")
    size = 0
    for f in files:
        src = Path(dist.locate_file(f))
        if src.is_file():
            target = dest / f
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            size += src.stat().st_size
    return size


def prepare(out: Path, pages: int) -> dict:
    """``--prepare``: the simulator, the task file and the carried packages, for a GPU machine."""
    wiki, tasks = build_simulator(out, pages)
    with open(out / "tasks.jsonl", "w", encoding="utf-8") as f:
        for t in tasks:
            f.write(json.dumps(t) + "\n")
    (out / "pages.jsonl").unlink(missing_ok=True)
    deps = out / "deps"
    sizes = {name: copy_distribution(name, deps) for name in CARRIED}
    return {"wiki_dir": str(wiki), "tasks": str(out / "tasks.jsonl"), "deps": str(deps),
            "deps_mb": round(sum(sizes.values()) / 2**20, 2), "pages": pages}


# ---------------------------------------------------------------- the trainer and its engines

def make_llm(args: argparse.Namespace, model_dir: Path, tok: Any) -> Any:
    """The colocated vLLM engine, asleep; the CPU stand-in for ``--dry-run``."""
    if args.dry_run:
        from trainers.engine_standin import StandInLLM

        llm = StandInLLM(model_dir, tok, dtype=torch.bfloat16)
        llm.sleep(level=2)
        return llm
    from trainers.rollout_engine import make_vllm

    return make_vllm(str(model_dir), seed=0, gpu_memory_utilization=args.gpu_memory_utilization,
                     max_model_len=args.max_model_len, dtype="bfloat16")  # the trainer's --dtype below


def make_trainer(args: argparse.Namespace, engine: str, model_dir: Path, tok: Any, template: str, tasks: list[dict],
                 wiki: Path, out: Path) -> Any:
    from transformers import AutoModelForCausalLM

    from trainers.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(model=str(model_dir), tasks="-", output_dir=str(out / f"run-{engine}"),
                     env_id="websailor/WikiSim-v0",
                     env_kwargs=json.dumps({"wiki_dir": str(wiki), "tools": ["search", "visit"],
                                            "max_context_tokens": args.max_model_len}),
                     steps=1, batch_size=args.episodes, group_size=args.group_size, micro_batch_size=args.episodes,
                     micro_batch_tokens=min(args.long_tokens), max_new_tokens=args.max_new_tokens, max_tool_calls=4,
                     learning_rate=1e-6, pool_size=max(args.episodes // args.group_size, 1), save_every=0,
                     device=args.device, dtype="bfloat16", gradient_checkpointing=True, tensorboard="off",
                     progress=False, chat_template="on" if template == "qwen3" else "off", rollout_engine=engine,
                     max_logprob_mismatch=None,  # measured and reported here, not a reason to stop
                     vllm_gpu_memory_utilization=args.gpu_memory_utilization, vllm_max_model_len=args.max_model_len,
                     exclude_truncated=False, resume=False)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    factory = None
    if engine == "vllm":
        llm = make_llm(args, model_dir, tok)
        factory = lambda *a, **k: llm  # noqa: E731
    return GRPOTrainer(cfg, model, tok, tasks, engine_factory=factory)


def _peak_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_gb(device: str) -> float:
    """Peak of torch's allocator since the reset (vLLM's sleep-mode pool included or not, by version)."""
    if device != "cuda":
        return 0.0
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def _device_used_gb(device: str) -> float:
    """Memory in use on the whole device now (every allocator, vLLM's included)."""
    if device != "cuda":
        return 0.0
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def _sampled(trajs: list[Any]) -> int:
    return sum(sum(t.loss_mask) for t in trajs)


def measure_rollout_hf(trainer: Any, tasks: list[dict], args: argparse.Namespace) -> tuple[dict, dict]:
    """The trainer's own rollouts (its policy, under its autocast), then bare ``model.generate`` of their first
    prompts (``benchmarks.rollout_speed.bare``, under the same autocast)."""
    from benchmarks.rollout_speed import bare
    from trainers import precision

    start = time.perf_counter()
    trajs = trainer.collect(tasks[: args.episodes // args.group_size])
    seconds = time.perf_counter() - start
    rollout = {"tokens": _sampled(trajs), "seconds": seconds, "episodes": len(trajs),
               "turns": sum(t.num_turns for t in trajs), "tool_calls": sum(t.num_tool_calls for t in trajs)}
    prompts = [list(t.prompt_ids) for t in trajs]
    settings = SimpleNamespace(device=trainer.device, max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0,
                               seed=0)
    trainer.model.eval()
    try:
        with precision.autocast(trainer.device, trainer.config.dtype):
            found = bare(trainer.model, trainer.tokenizer, prompts, settings)
    finally:
        trainer.model.train()
    return rollout, {"tokens": found["sampled"], "seconds": found["seconds"]}


def measure_rollout_vllm(trainer: Any, tasks: list[dict], args: argparse.Namespace) -> tuple[dict, dict]:
    """Rollouts on the awake engine, then bare generation of their first prompts on it (no stop sequences)."""
    from trainers.rollout import RolloutConfig, collect

    trainer.engine.prepare(trainer.model)
    policy = trainer.engine.policy(trainer.tokenizer, seed=0)
    config = RolloutConfig(env_kwargs=dict(trainer.env_kwargs, max_tool_calls=trainer.config.max_tool_calls),
                           num_envs=args.episodes, tool_workers=args.episodes, max_new_tokens=args.max_new_tokens,
                           max_total_tokens=args.max_model_len, max_episode_seconds=None,
                           use_chat_template=trainer.config.chat_template == "on")
    try:
        start = time.perf_counter()
        trajs = collect(policy, tasks[: args.episodes // args.group_size], config, group_size=args.group_size,
                        progress=False)
        seconds = time.perf_counter() - start
        rollout = {"tokens": _sampled(trajs), "seconds": seconds, "episodes": len(trajs),
                   "turns": sum(t.num_turns for t in trajs), "tool_calls": sum(t.num_tool_calls for t in trajs)}
        start = time.perf_counter()
        gens = policy.generate([list(t.prompt_ids) for t in trajs], max_new_tokens=args.max_new_tokens,
                               temperature=1.0, top_p=1.0, stop_ids=())
        bare = {"tokens": sum(len(g.token_ids) for g in gens), "seconds": time.perf_counter() - start}
    finally:
        trainer.engine.sleep()
    return rollout, bare


def measure_step(trainer: Any, device: str) -> dict:
    """One full GRPO step (rollout and update; with vLLM wake, weight push and sleep around the rollout)."""
    _peak_reset(device)
    start = time.perf_counter()
    metrics = trainer.train_step()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_gb": _peak_gb(device), "device_used_gb": _device_used_gb(device),
            "metrics": metrics}


def measure_long_update(trainer: Any, tokens: int, device: str) -> dict:
    """One update on two ``tokens``-long trajectories (half of each trained on), one per forward pass."""
    g = torch.Generator().manual_seed(0)
    vocab = len(trainer.tokenizer)
    trajs = []
    for _ in range(2):
        ids = torch.randint(3, vocab, (tokens - 16,), generator=g).tolist()
        mask = [1 if (i // 512) % 2 == 0 else 0 for i in range(len(ids))]
        trajs.append(SimpleNamespace(prompt_ids=list(range(3, 19)), token_ids=ids, loss_mask=mask,
                                     logprobs=[-8.0 if m else 0.0 for m in mask]))
    saved = trainer.config.micro_batch_tokens
    trainer.config.micro_batch_tokens = tokens  # one trajectory per forward pass
    _peak_reset(device)
    try:
        start = time.perf_counter()
        metrics = trainer.update(trajs, [1.0, -1.0], [True, True])
        seconds = time.perf_counter() - start
    finally:
        trainer.config.micro_batch_tokens = saved
    loss, grad_norm = float(metrics["loss/policy"]), float(metrics.get("grad/norm", math.nan))
    return {"tokens": tokens, "seconds": round(seconds, 2), "peak_gb": round(_peak_gb(device), 2),
            "trained": metrics["train/tokens"], "loss": loss, "grad_norm": grad_norm,
            "finite": math.isfinite(loss) and math.isfinite(grad_norm) and not metrics["train/skipped"]}


def measure_engine(engine: str, args: argparse.Namespace, model_dir: Path, tok: Any, template: str,
                   tasks: list[dict], wiki: Path, work: Path) -> dict:
    """Rollout against bare generation, one GRPO step and the long updates, on one engine."""
    from trainers.mismatch import DEFAULT_MAX_LOGPROB_MISMATCH

    trainer = make_trainer(args, engine, model_dir, tok, template, tasks, wiki, work)
    tis_cap = trainer.config.tis_cap
    try:
        measure = measure_rollout_hf if engine == "hf" else measure_rollout_vllm
        rollout, bare = measure(trainer, tasks, args)
        step = measure_step(trainer, args.device)
        long = [measure_long_update(trainer, n, args.device) for n in args.long_tokens]
    finally:
        del trainer
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    rollout_tps = rollout["tokens"] / rollout["seconds"] if rollout["seconds"] else 0.0
    bare_tps = bare["tokens"] / bare["seconds"] if bare["seconds"] else 0.0
    m = step["metrics"]
    mean, worst = m.get("mismatch/abs_mean", math.nan), m.get("mismatch/abs_max", math.nan)
    return {"engine": "standin-cpu" if engine == "vllm" and args.dry_run else engine,
            "bare_tokens_per_s": round(bare_tps, 1), "rollout_tokens_per_s": round(rollout_tps, 1),
            "rollout_over_bare": round(rollout_tps / bare_tps, 3) if bare_tps else 0.0,
            "rollout_sampled": rollout["tokens"], "rollout_turns": rollout["turns"],
            "rollout_tool_calls": rollout["tool_calls"], "bare_sampled": bare["tokens"],
            "step_s": round(step["seconds"], 2), "step_rollout_s": round(m.get("time/rollout_s", 0.0), 2),
            "step_update_s": round(m.get("time/update_s", 0.0), 2), "step_peak_gb": round(step["peak_gb"], 2),
            "device_used_gb_after_step": round(step["device_used_gb"], 2),
            "step_sync_s": round(m.get("engine/sync_s", 0.0), 3),
            "step_sync_mb": round(m.get("engine/sync_mb", 0.0), 1), "step_train_tokens": m.get("train/tokens", 0),
            "tis_cap": tis_cap,
            "mismatch_abs_mean": round(mean, 5), "mismatch_abs_max": round(worst, 4),
            "mismatch_kl_k3": round(m.get("mismatch/kl_k3", math.nan), 6),
            "mismatch_limit": DEFAULT_MAX_LOGPROB_MISMATCH,
            "mismatch_within_limit": bool(mean <= DEFAULT_MAX_LOGPROB_MISMATCH),
            "long": long, "long_finite": all(x["finite"] for x in long)}


# ---------------------------------------------------------------- the command

def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, stand-in vLLM: checks the script")
    parser.add_argument("--rollout-engine", choices=["auto", "hf", "vllm"], default="auto",
                        help="hf (no vLLM needed), vllm, or auto: hf, plus vllm when vLLM and a GPU are present "
                             "(--dry-run: the stand-in)")
    parser.add_argument("--prepare", default=None, metavar="DIR",
                        help="build DIR/wiki and DIR/tasks.jsonl and copy the carried packages to DIR/deps, "
                             "for a GPU machine without them (see the docstring), and exit")
    parser.add_argument("--size", choices=sorted(SIZES), default=None, help="default: qwen3-0.6b (tiny in --dry-run)")
    parser.add_argument("--tokenizer", choices=["auto", "smollm2", "subword"], default="auto")
    parser.add_argument("--template", choices=["auto", "qwen3", "chatml"], default="auto",
                        help="Qwen3's (TRL's copy) or the ChatML fallback; auto: qwen3 where TRL is installed")
    parser.add_argument("--subword-vocab", type=int, default=4096, help="ids of the tokenizer trained here")
    parser.add_argument("--wiki-dir", default=None, help="a built simulator (default: build one here)")
    parser.add_argument("--tasks", default=None, help="task JSONL for --wiki-dir (default: the generated pages')")
    parser.add_argument("--pages", type=int, default=None, help="pages of the generated simulator (default 300; 30)")
    parser.add_argument("--episodes", type=int, default=None, help="rollout episodes at once (default 64; 4)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per turn (default 256; 8)")
    parser.add_argument("--long-tokens", default=None,
                        help="update context lengths, comma-separated (default 16384,32768; 64,128)")
    parser.add_argument("--max-model-len", type=int, default=32768)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.35)
    args = parser.parse_args(argv)
    small = args.dry_run
    for name, full, dry in (("size", "qwen3-0.6b", "tiny"), ("pages", 300, 30), ("episodes", 64, 4),
                            ("max_new_tokens", 256, 8), ("long_tokens", "16384,32768", "64,128")):
        if getattr(args, name) is None:
            setattr(args, name, dry if small else full)
    try:
        args.long_tokens = [int(x) for x in str(args.long_tokens).split(",") if x.strip()]
    except ValueError:
        parser.error(f"--long-tokens must be comma-separated integers, got {args.long_tokens!r}")
    if not args.long_tokens or min(args.long_tokens) < 32:
        parser.error("--long-tokens needs lengths of at least 32 tokens")
    if small:
        args.group_size = min(args.group_size, 2)
    if args.episodes % args.group_size:
        parser.error(f"--episodes ({args.episodes}) must be a multiple of --group-size ({args.group_size})")
    args.device = "cpu" if small else "cuda"
    return args


def has_vllm_gpu() -> bool:
    return torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


def engines_for(args: argparse.Namespace) -> list[str]:
    """The engines to measure; ``ValueError`` (one line) for what this machine lacks."""
    if not args.dry_run and not torch.cuda.is_available():
        raise ValueError("no CUDA GPU here; --dry-run checks this script on CPU")
    if args.rollout_engine == "hf":
        return ["hf"]
    if args.rollout_engine == "vllm":
        if not args.dry_run:
            from trainers.rollout_engine import require_vllm_gpu

            require_vllm_gpu()
        return ["vllm"]
    return ["hf", "vllm"] if args.dry_run or has_vllm_gpu() else ["hf"]


def run(args: argparse.Namespace, engines: list[str], work: Path) -> dict:
    from envs.tasks import load_tasks

    start = time.perf_counter()
    if args.wiki_dir:
        wiki = Path(args.wiki_dir)
        if not args.tasks:
            raise ValueError("--wiki-dir needs --tasks")
        tasks = [t.to_dict() for t in load_tasks(args.tasks)]
    else:
        wiki, tasks = build_simulator(work, args.pages)
    tok, tok_kind, template = build_tokenizer(args.tokenizer, wiki, args.subword_vocab, args.template)
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    model_dir = save_model(args.size, tok, work / "model", dtype)
    by_engine = {e: measure_engine(e, args, model_dir, tok, template, tasks, wiki, work) for e in engines}
    total = time.perf_counter() - start
    main = by_engine[engines[0]]
    targets = {"rollout_over_bare_0.8": all(r["rollout_over_bare"] >= 0.8 for r in by_engine.values()),
               "under_8_minutes": total < TIME_TARGET_S,
               "long_updates_finite": all(r["long_finite"] for r in by_engine.values()),
               "mismatch_within_limit": all(r["mismatch_within_limit"] for r in by_engine.values())}
    flat = {k: v for k, v in main.items() if k not in ("long", "engine")}
    for x in main["long"]:
        flat[f"long_{x['tokens']}_peak_gb"] = x["peak_gb"]
        flat[f"long_{x['tokens']}_s"] = x["seconds"]
    return {"benchmark": "gpu_train", "dry_run": args.dry_run, "device": args.device,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
            "engines": [by_engine[e]["engine"] for e in engines], "engine": main["engine"], "size": args.size,
            "vocab": len(tok), "tokenizer": tok_kind, "template": template, "episodes": args.episodes,
            "group_size": args.group_size, "max_new_tokens": args.max_new_tokens, "long_tokens": args.long_tokens,
            **flat, "by_engine": by_engine, "total_s": round(total, 1), "target": 0.8, "targets": targets}


def print_table(r: dict) -> None:
    names = list(r["by_engine"])
    print(f"{'measure':<36}" + "".join(f"{r['by_engine'][n]['engine']:>14}" for n in names))
    rows = [("bare generation tokens/s", "bare_tokens_per_s"),
            ("rollout tokens/s (WikiSim-v0)", "rollout_tokens_per_s"),
            ("rollout / bare (target >= 0.8)", "rollout_over_bare"), ("GRPO step s", "step_s"),
            ("  rollout s", "step_rollout_s"), ("  update s", "step_update_s"), ("  weight sync s", "step_sync_s"),
            ("  peak GiB (torch)", "step_peak_gb"), ("  device GiB in use after (all)", "device_used_gb_after_step"),
            ("  sampler/trainer mean |dlogp|", "mismatch_abs_mean"), ("  sampler/trainer max |dlogp|",
                                                                       "mismatch_abs_max")]
    for label, key in rows:
        print(f"{label:<36}" + "".join(f"{r['by_engine'][n][key]:>14}" for n in names))
    for i, tokens in enumerate(r["long_tokens"]):
        for label, key in ((f"update at {tokens} tokens s", "seconds"), ("  peak GiB (torch)", "peak_gb"),
                           ("  loss and gradient finite", "finite")):
            print(f"{label:<36}" + "".join(f"{str(r['by_engine'][n]['long'][i][key]):>14}" for n in names))
    print(f"{'total s (target < 480)':<36}{r['total_s']:>14}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.prepare:
        try:
            done = prepare(Path(args.prepare), args.pages)
        except ValueError as exc:
            print(f"gpu_train: {exc}", file=sys.stderr)
            return 2
        print(f"gpu_train: prepared {done['wiki_dir']}, {done['tasks']} and {done['deps']} ({done['deps_mb']} MB); "
              f"on the GPU machine: PYTHONPATH={done['deps']} python -m benchmarks.gpu_train --rollout-engine hf "
              f"--wiki-dir {done['wiki_dir']} --tasks {done['tasks']}")
        return 0
    try:
        engines = engines_for(args)
    except ValueError as exc:
        print(f"gpu_train: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="gpu_train-") as tmp:
        try:
            result = run(args, engines, Path(tmp))
        except ValueError as exc:
            print(f"gpu_train: {exc}", file=sys.stderr)
            return 2
    print_table(result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
