"""The observation and action space: model text as a :class:`gymnasium.spaces.Text`.

Gymnasium's default ``Text`` charset is alphanumeric, which no model output fits. The
charset here is written out explicitly: tab, newline, carriage return, every printable
character of the Basic Multilingual Plane (Latin, Greek, Cyrillic, CJK, Arabic, symbols,
private use, ...), and the emoji and pictograph blocks U+1F000-U+1FAFF. Left out: the C0
and C1 control characters, DEL, lone surrogates, U+FFFE/U+FFFF and the rarer astral
planes. Observations are made members of the space by :func:`to_model_text` (characters
outside the charset become U+FFFD, overlong text is cut with a note); actions may be any
string at all, in the space or not.

``ModelText`` is a plain ``Text`` in behaviour (``contains``, ``sample``, flattening to
character indices). It differs in cost only: ``Text.__init__`` builds lookup tables for
the ~66k characters per instance (about 0.6 s and 10 MiB; every environment has two
spaces and vector environments deep-copy them), so they are built once per process, on
first use (stepping an environment never needs them), and shared read-only; and flattening, which ``Text`` does one character at a time in Python,
is done with numpy here (same indices, same padding).

Shared memory (``AsyncVectorEnv(shared_memory=True)``, the default of ``make_vec``): for
``Text``, Gymnasium 1.4 reads the buffer once when the vector environment is built and
returns that snapshot forever after, so every later observation would read as the first
buffer content. For ``ModelText`` the read returns :class:`SharedTextBatch`, a live view
whose deep copy (``AsyncVectorEnv(copy=True)``, the default) is a tuple of strings.
"""

from __future__ import annotations

import copy
import functools
import multiprocessing
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatten, unflatten
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory

# (first, last) code points, inclusive, in increasing order.
MODEL_TEXT_RANGES: tuple[tuple[int, int], ...] = (
    (0x09, 0x0A),
    (0x0D, 0x0D),
    (0x20, 0x7E),
    (0xA0, 0xD7FF),
    (0xE000, 0xFFFD),
    (0x1F000, 0x1FAFF),
)
MAX_TEXT_CHARS = 1 << 17
"""Longest observation and action, in characters (131,072: about 32k tokens of English).
Longer observations are cut with a note; the vector environments' shared memory holds
this many characters per sub-environment."""
REPLACEMENT = "\ufffd"

_OUTSIDE = re.compile(
    "[^" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in MODEL_TEXT_RANGES) + "]"
)


@functools.cache
def _tables() -> tuple[frozenset[str], tuple[str, ...], dict[str, np.int32], str]:
    chars = [chr(c) for a, b in MODEL_TEXT_RANGES for c in range(a, b + 1)]  # sorted by code point
    index = dict(zip(chars, np.arange(len(chars), dtype=np.int32)))
    return frozenset(chars), tuple(chars), index, "".join(chars)


# Character index <-> code point as arrays, for flattening whole strings at once.
_CODE_POINTS = np.concatenate([np.arange(a, b + 1, dtype=np.uint32) for a, b in MODEL_TEXT_RANGES])
_NUM_CHARS = len(_CODE_POINTS)
_INDEX_OF = np.full(MODEL_TEXT_RANGES[-1][1] + 2, -1, dtype=np.int32)
_INDEX_OF[_CODE_POINTS] = np.arange(_NUM_CHARS, dtype=np.int32)


def model_text_charset() -> frozenset[str]:
    """Every character an observation may contain."""
    return _tables()[0]


class ModelText(spaces.Text):
    """``Text(max_length, min_length=min_length, charset=model_text_charset())``, cheaply."""

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0,
                 seed: int | np.random.Generator | None = None):
        if not isinstance(max_length, (int, np.integer)) or not isinstance(min_length, (int, np.integer)):
            raise TypeError(f"expected integer lengths, got min_length={min_length!r}, max_length={max_length!r}")
        if not 0 <= min_length <= max_length:
            raise ValueError(f"expected 0 <= min_length <= max_length, got {min_length} and {max_length}")
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        spaces.Space.__init__(self, dtype=str, seed=seed)

    # Text's lookup tables, built on first use (sampling, ``character_index``, comparing
    # charsets), never by stepping an environment: every process saves their 10 MiB.
    _char_set = property(lambda self: _tables()[0])
    _char_list = property(lambda self: _tables()[1])
    _char_index = property(lambda self: _tables()[2])
    _char_str = property(lambda self: _tables()[3])

    def contains(self, x: Any) -> bool:
        # Same answer as Text.contains, with the character test done by one regex in C.
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and _OUTSIDE.search(x) is None)

    def __repr__(self) -> str:
        # Text's repr prints every character of the charset (64k of them).
        return (f"ModelText({self.min_length}, {self.max_length}, "
                f"charset=<{_NUM_CHARS} characters in {len(MODEL_TEXT_RANGES)} ranges>)")

    def __deepcopy__(self, memo: dict) -> "ModelText":
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._np_random = copy.deepcopy(self._np_random, memo)
        return new

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_char_set", "_char_list", "_char_index", "_char_str"):
            state.pop(key, None)  # spaces pickled by an older version held them
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def to_model_text(text: str, max_length: int = MAX_TEXT_CHARS) -> str:
    """``text`` as a member of :class:`ModelText`: characters outside the charset become
    U+FFFD and text longer than ``max_length`` is cut, ending with a note that says so."""
    text = _OUTSIDE.sub(REPLACEMENT, text)
    if len(text) > max_length:
        note = f"\n[... {{}} characters cut: observations are limited to {max_length} characters]"
        keep = max_length - len(note.format(len(text)))
        text = text[:max(keep, 0)] + note.format(len(text) - max(keep, 0))
        text = text[:max_length]
    return text


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (which cannot be encoded as UTF-8) replaced by U+FFFD."""
    return re.sub("[\ud800-\udfff]", REPLACEMENT, text)


def _flatten_model_text(space: ModelText, x: str) -> np.ndarray:
    points = np.frombuffer(x.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(points) > space.max_length:
        raise ValueError(f"text of {len(points)} characters does not fit max_length {space.max_length}")
    indices = _INDEX_OF[np.minimum(points, len(_INDEX_OF) - 1)]
    if (indices < 0).any():
        bad = chr(int(points[np.argmax(indices < 0)]))
        raise KeyError(f"character {bad!r} is not in the space's charset")
    out = np.full(space.max_length, _NUM_CHARS, dtype=np.int32)  # Text pads with len(charset)
    out[: len(indices)] = indices
    return out


def _unflatten_model_text(space: ModelText, x: np.ndarray) -> str:
    x = np.asarray(x)
    return _CODE_POINTS[x[(x >= 0) & (x < _NUM_CHARS)]].tobytes().decode("utf-32-le")


class SharedTextBatch(Sequence):
    """The observations of a vector environment's shared memory, read when accessed."""

    def __init__(self, space: ModelText, memory: Any, n: int):
        self._space, self._memory, self._n = space, memory, n

    def _rows(self) -> np.ndarray:
        return np.frombuffer(self._memory.get_obj(), dtype=np.int32).reshape((self._n, self._space.max_length))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        return _unflatten_model_text(self._space, self._rows()[index])

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


def _create_model_text_memory(space: ModelText, n: int = 1, ctx: Any = multiprocessing) -> Any:
    memory = ctx.Array(np.dtype(np.int32).char, n * space.max_length)
    # Filled with the padding index, so a slot not yet written reads as "" (zeros would read as tabs).
    np.frombuffer(memory.get_obj(), dtype=np.int32)[:] = _NUM_CHARS
    return memory


flatten.register(ModelText)(_flatten_model_text)
create_shared_memory.register(ModelText)(_create_model_text_memory)
unflatten.register(ModelText)(_unflatten_model_text)
read_from_shared_memory.register(ModelText)(lambda space, memory, n=1: SharedTextBatch(space, memory, n))
