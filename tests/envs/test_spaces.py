import copy
import pickle

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.spaces.utils import flatten, unflatten
from gymnasium.vector.utils import batch_space, create_shared_memory, read_from_shared_memory, write_to_shared_memory

from envs.spaces import MAX_TEXT_CHARS, MODEL_TEXT_RANGES, ModelText, model_text_charset, to_model_text


def test_model_text_is_a_text_space_with_a_model_charset():
    space = ModelText()
    assert isinstance(space, spaces.Text) and space.max_length == MAX_TEXT_CHARS and space.min_length == 0
    charset = model_text_charset()
    assert len(charset) == sum(b - a + 1 for a, b in MODEL_TEXT_RANGES)
    for ch in "aZ09 \n\t{}<>\"'é日本ü—…🙂\ufffd":
        assert ch in charset
    for ch in "\x00\x07\x7f\x85\ud800\uffff\U000e0001":
        assert ch not in charset
    assert space != spaces.Text(MAX_TEXT_CHARS, min_length=0, charset="ab")


@pytest.fixture(scope="module")
def reference():
    """Gymnasium's own Text over the same charset (slow to build: once)."""
    return spaces.Text(50, min_length=0, charset=model_text_charset())


def test_contains_agrees_with_text_contains(reference):
    space = ModelText(50)
    assert space == reference and reference == space
    for x in ["", "hello", "日本語 🙂", "bad \x00", "x" * 51, "\ud800", 5, None]:
        assert space.contains(x) == reference.contains(x), x


def test_sample_is_seeded_and_contained():
    a, b = ModelText(64, seed=3), ModelText(64, seed=3)
    samples = [a.sample() for _ in range(5)]
    assert samples == [b.sample() for _ in range(5)]
    assert all(s in a for s in samples)


def test_copy_and_pickle_keep_rng_and_share_tables():
    space = ModelText(32, seed=1)
    clone = copy.deepcopy(space)
    restored = pickle.loads(pickle.dumps(space))
    assert clone == space and restored == space
    assert clone.sample() == restored.sample() == space.sample()
    assert clone.character_set is space.character_set  # built once per process
    assert len(pickle.dumps(space)) < 10_000


def test_flatten_agrees_with_text_flatten(reference):
    space = ModelText(50)
    for text in ["", "Où? 日本 🙂", "\t\n\r ~\ufffd" * 5, "z" * 50]:
        ours = flatten(space, text)
        assert ours.dtype == np.int32 and np.array_equal(ours, flatten(reference, text))
        assert unflatten(space, ours) == unflatten(reference, ours) == text
    with pytest.raises(KeyError, match="not in the space's charset"):
        flatten(space, "bad \x00")
    with pytest.raises(ValueError, match="max_length"):
        flatten(space, "z" * 51)


def test_shared_memory_reads_are_live():
    space = ModelText(40)
    memory = create_shared_memory(space, n=2)
    batch = read_from_shared_memory(space, memory, n=2)
    write_to_shared_memory(space, 1, "first", memory)
    assert batch[1] == "first" and batch[0] == ""
    write_to_shared_memory(space, 1, "Où? 日本 🙂", memory)
    snapshot = copy.deepcopy(batch)
    write_to_shared_memory(space, 1, "later", memory)
    assert snapshot == ("", "Où? 日本 🙂") and isinstance(snapshot, tuple)
    assert tuple(batch) == ("", "later") and batch[:1] == ("",) and len(batch) == 2


def test_flatten_and_shared_memory_round_trip():
    space = ModelText(40)
    text = "Où? 日本 🙂"
    assert unflatten(space, flatten(space, text)) == text
    batched = batch_space(space, 3)
    assert isinstance(batched, spaces.Tuple) and all(isinstance(s, ModelText) for s in batched)
    memory = create_shared_memory(space, n=2)
    write_to_shared_memory(space, 1, text, memory)
    assert read_from_shared_memory(space, memory, n=2)[1] == text
    assert repr(space).startswith("ModelText(0, 40, charset=<")


def test_to_model_text():
    assert to_model_text("ok \x00 \ud800") == "ok \ufffd \ufffd"
    cut = to_model_text("z" * 1000, max_length=200)
    assert len(cut) <= 200 and cut.startswith("zzz") and "characters cut" in cut
    assert to_model_text("z" * 200, max_length=200) == "z" * 200
    assert np.all([c in model_text_charset() for c in cut])
