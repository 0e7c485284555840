"""Static embedding models shipped inside PyPI wheels, for the dense index (``--recipe static``).

A static embedding model is a token table and a tokenizer: a text's vector is the normalized sum
of its tokens' rows, as :func:`wiki_sim.dense.encode` computes it. Unlike the tables the other
recipes distil from a causal LM, such a model was trained for sentence similarity. The one known
here is WordLlama's ``l2_supercat`` model (MIT license; Llama 2's 32,000-token vocabulary, 256
dimensions, float16), which the PyPI wheel ``wordllama==0.4.0.post1`` carries with its tokenizer.
``websailor wiki fetch`` downloads the wheel with ``pip download --no-deps --only-binary`` (the
package itself is never installed or imported), extracts the two files, checks their sha256 and
keeps them in the cache (:mod:`wiki_sim.common.wheels`). Nothing comes from a model hub.

Reading checks the table's name, shape and dtype before a byte of it is loaded (safetensors
holds no code).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wiki_sim.common.cache import cache_dir, sha256_file
from wiki_sim.common.wheels import WheelFile, fetch_wheel_file
from wiki_sim.errors import WikiSimError


@dataclass(frozen=True)
class StaticModel:
    """A token table and its tokenizer, both files inside one pinned PyPI wheel."""

    name: str
    """Short name accepted by ``websailor wiki embed --recipe static --model``."""
    weights: WheelFile
    """The safetensors file holding the table (pinned by sha256)."""
    tokenizer: WheelFile
    """The tokenizer, in the ``tokenizers`` JSON format (pinned by sha256)."""
    tensor: str
    """The table's name inside the safetensors file."""
    shape: tuple[int, int]
    """The table's (vocabulary, dimensions)."""
    license: str
    """The model's license, as its wheel states it."""


_WORDLLAMA = "wordllama==0.4.0.post1"
WORDLLAMA_L2_256 = StaticModel(
    name="wordllama-l2-256",
    weights=WheelFile(requirement=_WORDLLAMA, member="wordllama/weights/l2_supercat_256.safetensors",
                      sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
                      filename="wordllama-l2_supercat_256.safetensors", binary_only=True),
    tokenizer=WheelFile(requirement=_WORDLLAMA, member="wordllama/tokenizers/l2_supercat_tokenizer_config.json",
                        sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
                        filename="wordllama-l2_supercat_tokenizer.json", binary_only=True),
    tensor="embedding.weight",
    shape=(32000, 256),
    license="MIT",
)
STATIC_MODELS: dict[str, StaticModel] = {WORDLLAMA_L2_256.name: WORDLLAMA_L2_256}
DEFAULT_STATIC_MODEL = WORDLLAMA_L2_256.name


def static_model(name: str) -> StaticModel:
    """The known static model ``name``; ``WikiSimError`` (one line) for another name."""
    if name not in STATIC_MODELS:
        raise WikiSimError(f"unknown static embedding model {name!r}; expected one of {', '.join(STATIC_MODELS)}")
    return STATIC_MODELS[name]


def fetch_static_model(name: str = DEFAULT_STATIC_MODEL, cache: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """Download (once) and verify a static model's files: ``(weights, tokenizer)`` paths in the cache."""
    model = static_model(name)
    return fetch_wheel_file(model.weights, cache), fetch_wheel_file(model.tokenizer, cache)


def static_files(name: str, cache: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """The cached, verified ``(weights, tokenizer)`` of a static model, never downloading:
    ``WikiSimError`` naming `websailor wiki fetch` when they are missing or altered."""
    model = static_model(name)
    root = cache_dir(cache)
    paths = []
    for spec in (model.weights, model.tokenizer):
        path = root / spec.filename
        if not path.is_file() or sha256_file(path) != spec.sha256:
            what = "is missing" if not path.is_file() else "does not match its pinned sha256"
            raise WikiSimError(f"static embedding model {name}: {path} {what}; fetch it with `websailor wiki fetch`")
        paths.append(path)
    return paths[0], paths[1]


def static_record(name: str) -> dict[str, object]:
    """What a dense index's ``meta.json`` says of the static model it was made from."""
    model = static_model(name)
    return {"name": model.name, "source": model.weights.requirement, "license": model.license,
            "files": {spec.member: spec.sha256 for spec in (model.weights, model.tokenizer)}}


def static_table(name: str = DEFAULT_STATIC_MODEL, cache: str | os.PathLike | None = None) -> tuple[np.ndarray, Path]:
    """A static model's token table as float32 ``(V, D)`` and its tokenizer file's path."""
    from safetensors import safe_open

    model = static_model(name)
    weights, tokenizer = static_files(name, cache)
    with safe_open(str(weights), "np") as f:
        if model.tensor not in f.keys():
            raise WikiSimError(f"{weights} holds no tensor {model.tensor!r}; fetch it again with `websailor wiki fetch`")
        header = f.get_slice(model.tensor)
        if tuple(header.get_shape()) != model.shape or header.get_dtype() not in ("F16", "F32"):
            raise WikiSimError(f"{weights}: {model.tensor} is {header.get_dtype()} {tuple(header.get_shape())}, "
                               f"expected F16 or F32 {model.shape}")
        table = f.get_tensor(model.tensor)
    return np.ascontiguousarray(table, dtype=np.float32), tokenizer
