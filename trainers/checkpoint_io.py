"""Checkpoints of SFT and GRPO: written atomically, read back safely, for ``--resume``.

Two layouts, one per trainer, both written here:

- a state file (SFT: ``output_dir/checkpoint.pt``): one ``torch.save`` dict holding the model's
  weights, the optimizer, the scheduler, every random generator and the step
  (:func:`save_state` / :func:`load_state`);
- step folders (GRPO: ``output_dir/checkpoint-<step>/``): a model folder that ``from_pretrained``
  loads as it is (``save_pretrained`` of model and tokenizer) plus ``trainer_state.pt`` (optimizer,
  scheduler, task pool, step); the newest ``keep`` are kept (:func:`save_checkpoint`,
  :func:`latest_checkpoint`, :func:`load_checkpoint`).

Every write goes to a temporary name that is renamed when complete, so an interrupted write never
leaves a file or folder that looks finished. A checkpoint may come from someone else (a run folder
received, ``--resume`` on it): loading one must never run code, so trainer state holds tensors and
plain containers only, and is read with ``torch.load(weights_only=True)``. The random generators'
states, which ``random`` and numpy return as tuples with arrays inside, are stored as tensors and
plain numbers (:func:`rng_state`). :func:`save_model` writes a run's final model the same way.

An output folder may hold someone's files too, so only folders this project wrote are replaced or
pruned: every model and step folder carries :data:`WRITTEN_BY` (written first, so an interrupted
write is recognised too), and a ``model/``, ``model.tmp/`` or ``checkpoint-<n>`` without it is
refused (:func:`check_replaceable`) unless the caller passes ``overwrite`` (``--overwrite``).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import atomic_open

CHECKPOINT_PREFIX = "checkpoint-"
"""Step folders are named ``checkpoint-<step>``."""
STATE_FILE = "trainer_state.pt"
"""The trainer state inside a step folder."""
WRITTEN_BY = "websailor-written.json"
"""Record in every model and step folder this project writes; only such folders are replaced or pruned."""
_WRITER = "websailor-gym"


class CheckpointError(UserError):
    """A checkpoint that cannot be used; the message (one line) names the file and what to do."""


class CheckpointWriteError(CheckpointError):
    """A model, step folder or state file that could not be written (a full or failing disk); its
    temporary is removed, so nothing half-written is left, and earlier checkpoints are untouched."""


_WRITE_ERRORS = (OSError, RuntimeError)
"""What a failed write raises: ``OSError`` from files, ``RuntimeError`` from torch's zip writer
(``unexpected pos ...``, ``iostream error``) and from safetensors on a full disk."""


def _write_failed(path: Path, exc: BaseException) -> CheckpointWriteError:
    """The one-line error for ``path`` that could not be written because of ``exc``."""
    first = (str(exc).strip().splitlines() or [""])[0][:160]
    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**30:.1f} GiB free there"
    except OSError:
        free = "free space unknown"
    return CheckpointWriteError(f"{path}: not written ({type(exc).__name__}: {first}; {free}); free disk space "
                                "(or keep fewer checkpoints) and run the same command again")


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
    """``torch.save`` to ``path.tmp``, then rename: a half-written file never has the final name
    (:class:`CheckpointWriteError` when the write fails; the old file stays)."""
    try:
        with atomic_open(path, "wb") as fh:
            torch.save(state, fh)
    except _WRITE_ERRORS as exc:
        raise _write_failed(Path(path), exc) from exc


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


# ---------------------------------------------------------------------- model folders


def _write_model(tmp: Path, model: torch.nn.Module, tokenizer: Any, weights: dict | None) -> None:
    model.save_pretrained(tmp, **({"state_dict": weights} if weights is not None else {}))
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(tmp)


def written_here(folder: Path) -> bool:
    """Whether ``folder`` is a real folder holding this project's :data:`WRITTEN_BY` record."""
    try:
        if folder.is_symlink() or not folder.is_dir():
            return False
        record = json.loads((folder / WRITTEN_BY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("written_by") == _WRITER


def check_replaceable(path: Path, overwrite: bool = False) -> None:
    """:class:`CheckpointError` (one line) if ``path`` exists and this project did not write it,
    unless ``overwrite``: nothing else is ever removed to make room for a model or a checkpoint."""
    if overwrite or not (path.exists() or path.is_symlink()) or written_here(path):
        return
    raise CheckpointError(f"{path} exists and was not written by websailor-gym (no {WRITTEN_BY}); move it "
                          "away, choose another output dir, or pass --overwrite to replace it")


def check_output_dir(out: Path, overwrite: bool = False) -> None:
    """Before a run: refuse an ``out/model`` or ``out/model.tmp`` this project did not write (unless
    ``overwrite``), so a long run does not fail only when it saves its final model."""
    for name in ("model", "model.tmp"):
        check_replaceable(out / name, overwrite)


def _fresh_tmp(tmp: Path, kind: str, overwrite: bool) -> None:
    """An empty ``tmp`` holding the :data:`WRITTEN_BY` record (a leftover of ours is removed first)."""
    check_replaceable(tmp, overwrite)
    _remove(tmp)
    tmp.mkdir(parents=True)
    (tmp / WRITTEN_BY).write_text(json.dumps({"written_by": _WRITER, "kind": kind}) + "\n", encoding="utf-8")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _swap_in(tmp: Path, path: Path) -> None:
    _remove(path)
    os.replace(tmp, path)


def save_model(model: torch.nn.Module, tokenizer: Any, path: Path, weights: dict | None = None,
               overwrite: bool = False) -> None:
    """``save_pretrained`` of model and tokenizer into ``path`` through ``path.tmp`` (no half-written model);
    ``weights``: the full state dict to write instead of the model's own (a sharded model's). A ``path``
    or ``path.tmp`` this project did not write is refused unless ``overwrite`` (:func:`check_replaceable`)."""
    tmp = path.with_name(path.name + ".tmp")
    check_replaceable(path, overwrite)
    _fresh_tmp(tmp, "model", overwrite)
    try:
        _write_model(tmp, model, tokenizer, weights)
    except _WRITE_ERRORS as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_failed(path, exc) from exc
    _swap_in(tmp, path)


def save_checkpoint(out: Path, step: int, model: torch.nn.Module, tokenizer: Any, state: dict, keep: int,
                    weights: dict | None = None, overwrite: bool = False) -> Path:
    """``out/checkpoint-<step>``: the model (``save_pretrained``; ``weights`` instead of its own state dict
    when given: a sharded model's full one) and ``trainer_state.pt``; all but the newest ``keep`` of this
    project's step folders pruned (others are left alone; one in the way is refused unless ``overwrite``).

    With ``keep`` >= 2 the oldest are pruned to ``keep - 1`` before the new one is written, so the disk
    never holds more than ``keep`` of them; a failed write (:class:`CheckpointWriteError`) removes its
    temporary and leaves the others as they were."""
    path = out / f"{CHECKPOINT_PREFIX}{step}"
    tmp = out / f"{CHECKPOINT_PREFIX}{step}.tmp"
    check_replaceable(path, overwrite)
    if keep >= 2:
        for old in [p for p in _checkpoints(out) if p != path][:-(keep - 1)]:
            shutil.rmtree(old, ignore_errors=True)
    _fresh_tmp(tmp, "checkpoint", overwrite)
    try:
        _write_model(tmp, model, tokenizer, weights)
        torch.save(state, tmp / STATE_FILE)  # tensors and plain data only: loaded with weights_only=True
    except _WRITE_ERRORS as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_failed(path, exc) from exc
    _swap_in(tmp, path)
    for old in _checkpoints(out)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def _checkpoints(out: Path) -> list[Path]:
    """This project's step folders in ``out``, oldest first (a foreign ``checkpoint-<n>`` is neither
    resumed from nor pruned)."""
    found = []
    if out.is_dir():
        for p in out.iterdir():
            suffix = p.name[len(CHECKPOINT_PREFIX):]
            if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit() and (p / STATE_FILE).exists() \
                    and written_here(p):
                found.append((int(suffix), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete step folder this project wrote in ``out``, or None."""
    found = _checkpoints(out)
    return found[-1] if found else None


def load_checkpoint(path: Path, model: torch.nn.Module, loader: Callable | None = None) -> dict:
    """Load the weights of the step folder ``path`` into ``model`` and return its trainer state;
    ``loader(model, weights)`` replaces ``model.load_state_dict(weights, strict=False)`` (a sharded model's)."""
    from safetensors.torch import load_file

    todo = f"delete {path}, or run with --no-resume"
    state = load_state(path / STATE_FILE, ("step", "bad_in_row", "pool", "optimizer", "scheduler"), todo)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{path}: no model weights (*.safetensors) in the checkpoint; {todo}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            weights.update(load_file(str(f)))
        except Exception as exc:  # safetensors raises its own error type for a damaged file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise CheckpointError(f"{f}: not a readable weights file ({first}); {todo}") from None
    try:
        missing, unexpected = (loader(model, weights) if loader is not None
                               else model.load_state_dict(weights, strict=False))
    except RuntimeError as exc:  # shapes of another model
        first = (str(exc).strip().splitlines() or [""])[-1].strip()[:200]
        raise CheckpointError(f"{path}: checkpoint does not match the model ({first}); {todo}") from None
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    if unexpected or [k for k in missing if k not in tied and "lm_head" not in k]:
        raise CheckpointError(f"{path}: checkpoint does not match the model (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}); {todo}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return state
