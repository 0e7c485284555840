"""Trainer state files that are safe to load: ``torch.load(weights_only=True)`` only.

A checkpoint may come from someone else (a run folder received, ``--resume`` on it): loading
one must never run code, so trainer state holds tensors and plain containers only, and is read
with ``weights_only=True``. The random generators' states, which ``random`` and numpy return as
tuples with arrays inside, are stored as tensors and plain numbers (:func:`rng_state`).
"""

from __future__ import annotations

import os
import pickle
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message (one line) names the file and what to do."""


def rng_state() -> dict[str, Any]:
    """Every random generator's state (torch, CUDA, ``random``, numpy) as tensors and plain values."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": {"version": int(version), "internal": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
        "numpy": {"name": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["internal"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state((npy["name"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached_gaussian"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_state(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """``torch.save`` to ``path.tmp``, then rename: a half-written file never has the final name."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_state(path: str | os.PathLike, required: tuple[str, ...] = (), hint: str = "") -> dict[str, Any]:
    """The dict saved in ``path``, read with ``weights_only=True`` (a pickle that would run code is
    refused); :class:`CheckpointError` in one line for an unreadable, foreign or incomplete file."""
    path = Path(path)
    todo = hint or "delete it, or run with --no-resume"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling, zip, EOF and runtime errors of a foreign, truncated or garbage file
        # torch's message goes on to suggest weights_only=False; only the refused object is worth repeating.
        found = re.search(r"Unsupported [^\n]*?(?=\. |\n|$)", str(exc))
        if isinstance(exc, pickle.UnpicklingError) and found and found.group(0).startswith("Unsupported global"):
            raise CheckpointError(f"{path}: refused: it holds objects other than tensors and plain data, so "
                                  f"loading it could run code ({found.group(0)[:200]}); {todo}") from None
        if isinstance(exc, pickle.UnpicklingError):
            first = f"not a torch.save file of tensors and plain data: {found.group(0)[:200] if found else '?'}"
        else:
            first = (str(exc).strip().splitlines() or ["empty or truncated"])[0][:200]
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {first}); {todo}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dict of trainer state, got {type(state).__name__}; {todo}")
    missing = [key for key in required if key not in state]
    if missing:
        raise CheckpointError(f"{path}: trainer state lacks {', '.join(missing)}; {todo}")
    return state
