"""vLLM defaults that start (issue 31, item 4), on CPU: ``max_model_len`` from the model's configuration,
importance-sampling correction on by default with the vLLM engine only, the engine's dtype following the
trainer's, a free rendezvous port, the ``vllm`` extra pinned, and one-line errors before any model loads.
The engine is :class:`trainers.engine_standin.StandInLLM` or a fake ``vllm`` module: vLLM cannot run here."""

from __future__ import annotations

import json
import os
import socket
import sys
import tomllib
import types
from pathlib import Path

import pytest
import torch

from tests.trainers import toy_env
from trainers import rollout_engine
from trainers.engine_standin import standin_factory
from trainers.grpo import VLLM_TIS_CAP, GRPOConfig, GRPOTrainer
from wiki_sim.common.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


class FakeLLM:
    """``vllm.LLM``'s constructor and what :func:`make_vllm` calls after it; records its arguments."""

    created: list[dict] = []

    def __init__(self, **kwargs):
        FakeLLM.created.append(kwargs)
        runner = types.SimpleNamespace(model=types.SimpleNamespace(load_weights=lambda w: set()))
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))

    def sleep(self, level=1):
        pass


@pytest.fixture
def fake_vllm(monkeypatch):
    FakeLLM.created = []
    module = types.SimpleNamespace(LLM=FakeLLM, __version__="0.24.0")
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for key in ("VLLM_ENABLE_V1_MULTIPROCESSING", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)  # make_vllm sets them; undone after the test
    return module


def _folder(tmp_path: Path, limit: int = 8192) -> Path:
    """A model folder holding only its config.json (SmolLM2-135M's limit by default): nothing to load."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": limit}))
    return folder


def _trainer(tmp_path, factory, **kw):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    base = dict(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=4,
                group_size=2, micro_batch_size=4, pool_size=2, device="cpu", tensorboard="off", max_new_tokens=8,
                save_every=0, rollout_engine="vllm", steps=1)
    base.update(kw)
    return GRPOTrainer(GRPOConfig(**base), model, tok, toy_env.TASKS[:2], engine_factory=factory)


def test_defaults_tis_on_with_vllm_only_and_no_fixed_length():
    hf = GRPOConfig(model="m", tasks="t")
    vllm = GRPOConfig(model="m", tasks="t", rollout_engine="vllm")
    assert hf.tis_cap == 0 and vllm.tis_cap == VLLM_TIS_CAP == 2.0
    assert hf.vllm_max_model_len is None and vllm.vllm_max_model_len is None
    assert GRPOConfig(model="m", tasks="t", rollout_engine="vllm", tis_cap=0).tis_cap == 0  # off when asked
    assert GRPOConfig(model="m", tasks="t", tis_cap=3).tis_cap == 3
    with pytest.raises(ValueError, match="vllm_max_model_len"):
        GRPOConfig(model="m", tasks="t", vllm_max_model_len=0)


def test_the_cli_takes_the_none_defaults_and_explicit_values():
    from websailor.cli import build_parser
    from websailor.config_cli import config_from_args

    parser = build_parser(("grpo", None))
    plain = config_from_args(GRPOConfig, parser.parse_args(["grpo", "m", "t", "--rollout-engine", "vllm"]))
    assert plain.vllm_max_model_len is None and plain.tis_cap == 2.0
    set_ = config_from_args(GRPOConfig, parser.parse_args(["grpo", "m", "t", "--rollout-engine", "vllm",
                                                           "--vllm-max-model-len", "4096", "--tis-cap", "0"]))
    assert set_.vllm_max_model_len == 4096 and set_.tis_cap == 0


def test_model_limit_reads_the_configuration_without_weights(tmp_path):
    assert rollout_engine.model_limit(_folder(tmp_path, 8192)) == 8192
    assert rollout_engine.model_limit(str(tmp_path / "missing")) is None
    assert rollout_engine.model_limit({"n_positions": 1024}) == 1024  # GPT-2's name for it
    assert rollout_engine.model_limit({"text_config": {"max_position_embeddings": 4096}}) == 4096
    yarn = {"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                               "original_max_position_embeddings": 32768}}
    assert rollout_engine.model_limit(yarn) == 131072  # long-context RoPE scaling, as vLLM derives it
    llama3 = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert rollout_engine.model_limit(llama3) == 131072  # already the scaled length
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    assert rollout_engine.model_limit(model.config) == model.config.max_position_embeddings


def test_max_model_len_is_the_models_unless_set_and_never_above_it():
    assert rollout_engine.resolve_max_model_len(None, 8192) == 8192
    assert rollout_engine.resolve_max_model_len(4096, 8192) == 4096
    assert rollout_engine.resolve_max_model_len(None, None) is None  # vLLM then reads the model itself
    with pytest.raises(UserError, match=r"--vllm-max-model-len 32768 is above the 8192 positions") as err:
        rollout_engine.resolve_max_model_len(32768, 8192)
    assert "\n" not in str(err.value)


def test_the_trainer_builds_its_engine_at_the_models_length_and_dtype(tmp_path):
    seen: list[dict] = []
    inner = standin_factory()

    def factory(model_dir, **kwargs):
        seen.append(kwargs)
        return inner(model_dir, **kwargs)

    fp32 = _trainer(tmp_path / "a", factory)
    limit = fp32.model.config.max_position_embeddings
    assert seen[-1]["max_model_len"] == limit and seen[-1]["dtype"] == "float32"
    assert {p.dtype for p in fp32.engine.llm.model.parameters()} == {torch.float32}
    bf16 = _trainer(tmp_path / "b", factory, dtype="bfloat16", vllm_max_model_len=limit // 2)
    assert seen[-1]["max_model_len"] == limit // 2 and seen[-1]["dtype"] == "bfloat16"
    assert {p.dtype for p in bf16.engine.llm.model.parameters()} == {torch.bfloat16}
    assert bf16.train_step()["train/skipped"] in (0, 1)  # trains on the bf16 engine's samples
    calls = len(seen)
    with pytest.raises(UserError, match="--vllm-max-model-len"):
        _trainer(tmp_path / "c", factory, vllm_max_model_len=limit + 1)
    assert len(seen) == calls  # refused before the engine was built


def test_make_vllm_passes_dtype_and_length_and_takes_a_free_port(fake_vllm, tmp_path):
    folder = _folder(tmp_path, 8192)
    rollout_engine.make_vllm(str(folder), dtype="bfloat16", model=object())
    [kwargs] = FakeLLM.created
    assert kwargs["dtype"] == "bfloat16" and kwargs["max_model_len"] == 8192
    port = int(os.environ["MASTER_PORT"])
    assert port != 29517 and port > 0
    with socket.socket() as sock:  # free when taken (nothing listens on it)
        sock.bind(("127.0.0.1", port))
    with pytest.raises(UserError, match="--vllm-max-model-len 16384"):
        rollout_engine.make_vllm(str(folder), max_model_len=16384, model=object())
    assert len(FakeLLM.created) == 1  # refused before vLLM was asked


def test_cli_length_above_the_models_is_one_line_before_loading(fake_vllm, tmp_path, capsys):
    from websailor.cli import main

    folder = _folder(tmp_path, 8192)  # config.json alone: loading it would fail with another error
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "q", "answer": "a"}\n')
    rc = main(["grpo", str(folder), str(tasks), "--rollout-engine", "vllm", "--vllm-max-model-len", "32768"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--vllm-max-model-len 32768" in err[0] and "8192" in err[0]


def test_an_old_vllm_is_one_line(fake_vllm):
    fake_vllm.__version__ = "0.9.2"
    with pytest.raises(UserError, match=r"vllm 0\.9\.2 is older than 0\.10\.2") as err:
        rollout_engine.require_vllm_gpu()
    assert "\n" not in str(err.value)
    fake_vllm.__version__ = "0.24.0+cu129"
    assert rollout_engine.require_vllm_gpu() is fake_vllm


def test_the_vllm_extra_is_pinned_to_a_range_that_has_what_the_engine_calls():
    from packaging.requirements import Requirement
    from packaging.version import Version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [req] = [Requirement(r) for r in extras["vllm"]]
    assert req.name == "vllm" and req.specifier, "the vllm extra needs a version range"
    assert any(s.operator == "<" for s in req.specifier), "an upper bound: vLLM's internals move"
    assert all(Version(s.version) >= Version(rollout_engine.VLLM_MIN_VERSION) for s in req.specifier
               if s.operator == ">=")


def test_the_projects_own_model_gets_its_8192_positions(fake_vllm):
    """The issue's case: SmolLM2-135M (set up by setup_wiki.sh) allows 8192 positions; the old default, 32768,
    made vLLM refuse to start. Its converted folder's config.json is read; no weight is loaded."""
    from trainers.models import ModelError, resolve_model

    try:
        folder = resolve_model("smollm2-135m")
    except ModelError:
        pytest.skip("smollm2-135m is not set up here (websailor model fetch)")
    assert rollout_engine.model_limit(folder) == 8192
    rollout_engine.check_before_loading("smollm2-135m", None)
    with pytest.raises(UserError, match="--vllm-max-model-len 32768 is above the 8192"):
        rollout_engine.check_before_loading("smollm2-135m", 32768)
