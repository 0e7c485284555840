"""grpo and eval name their environment the same way; rollout fields are declared once."""

from __future__ import annotations

import dataclasses

import pytest

from trainers.eval import EvalConfig
from trainers.grpo import GRPOConfig
from trainers.rollout import RolloutConfig
from trainers.rollout_options import EnvOptions, EpisodeOptions, SamplingOptions
from websailor.cli import build_parser, main
from websailor.config_cli import config_from_args, field_docs
from websailor.pipeline import PipelineConfig

ENV_ARGS = ["--wiki-dir", "data/wiki", "--env-kwargs", '{"tools": ["search", "visit"]}', "--max-tool-calls", "7",
            "--max-new-tokens", "33", "--temperature", "0.5"]


def _parse(words: list[str], cls: type):
    chosen = (words[0], None)
    return config_from_args(cls, build_parser(chosen).parse_args(words))


def test_grpo_and_eval_parse_the_environment_options_the_same_way(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "Q?", "answer": "A"}\n')
    grpo = _parse(["grpo", "model", str(tasks), *ENV_ARGS], GRPOConfig)
    evaluation = _parse(["eval", "--tasks", str(tasks), *ENV_ARGS], EvalConfig)
    expected = {"tools": ["search", "visit"], "wiki_dir": "data/wiki"}
    assert grpo.env_options() == evaluation.env_options() == expected
    for name in ("env_id", "wiki_dir", "env_kwargs", "max_tool_calls", "max_new_tokens", "temperature"):
        assert getattr(grpo, name) == getattr(evaluation, name), name
    # the same directory given both ways is one directory
    both = _parse(["eval", "--tasks", str(tasks), "--wiki-dir", "w", "--env-kwargs", '{"wiki_dir": "w"}'], EvalConfig)
    assert both.env_options() == {"wiki_dir": "w"}


@pytest.mark.parametrize("extra, message", [
    (["--wiki-dir", "a", "--env-kwargs", '{"wiki_dir": "b"}'], "--wiki-dir 'a' and env_kwargs' wiki_dir 'b' disagree"),
    (["--env-kwargs", "[1]"], "env_kwargs must be a JSON object, got list"),
    (["--env-kwargs", "{nope"], "env_kwargs must be a JSON object, got '{nope'"),
    (["--wiki-dir", "a", "--env-kwargs", '{"max_tool_calls": 3}'], "must not name 'max_tool_calls' (got 3)"),
    (["--wiki-dir", "a", "--max-new-tokens", "0"], "max_new_tokens must be a positive integer, got 0"),
    (["--wiki-dir", "a", "--max-tool-calls", "0"], "max_tool_calls must be a positive integer, got 0"),
])
def test_grpo_and_eval_refuse_the_same_bad_options_with_the_same_line(tmp_path, capsys, extra, message):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "Q?", "answer": "A"}\n')
    lines = []
    for words in (["grpo", "model", str(tasks), *extra], ["eval", "--tasks", str(tasks), *extra]):
        assert main(words) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
        lines.append(err.split("error: ", 1)[1])
    assert lines[0] == lines[1]


def test_the_simulator_needs_a_directory_either_way(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "Q?", "answer": "A"}\n')
    with pytest.raises(ValueError, match=r"--wiki-dir is required for websailor/WikiSim-v0"):
        EvalConfig(tasks=str(tasks))
    with pytest.raises(ValueError, match=r"--wiki-dir is required for websailor/WikiSim-v0"):
        GRPOConfig(model="m", tasks=str(tasks)).require_simulator()
    EvalConfig(tasks=str(tasks), env_kwargs='{"wiki_dir": "w"}')  # given through --env-kwargs: enough
    GRPOConfig(model="m", tasks=str(tasks), wiki_dir="w").require_simulator()


def test_rollout_fields_are_declared_once_with_per_command_defaults():
    for cls in (GRPOConfig, EvalConfig, PipelineConfig, RolloutConfig):
        assert issubclass(cls, SamplingOptions)
        docs = field_docs(cls)
        for base in (b for b in (EnvOptions, EpisodeOptions, SamplingOptions) if issubclass(cls, b)):
            for f in dataclasses.fields(base):  # one docstring per field: the base's
                assert docs[f.name] == field_docs(base)[f.name], (cls.__name__, f.name)
    defaults = {cls.__name__: (cls.max_new_tokens, cls.temperature, cls.top_p, getattr(cls, "max_tool_calls", None))
                for cls in (GRPOConfig, EvalConfig, PipelineConfig, RolloutConfig)}
    assert defaults == {"GRPOConfig": (512, 1.0, 1.0, 10), "EvalConfig": (2048, 0.85, 0.95, 100),
                        "PipelineConfig": (64, 0.7, 1.0, 2), "RolloutConfig": (2048, 1.0, 1.0, None)}
