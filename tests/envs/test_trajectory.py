from pathlib import Path

import pytest

from envs.baselines import HeuristicAgent
from envs.env import ResearchEnv
from envs.episode import run_episode
from envs.protocol import parse_turn
from envs.trajectory import REQUIRED_KEYS, read_trajectories, trajectory_record, write_trajectories
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool

from .conftest import TASKS, MiniWiki

REFERENCE = Path(__file__).resolve().parents[2] / "../shared/reference"


def test_released_trajectories_read_unchanged_and_parse_with_our_protocol():
    records = list(read_trajectories(REFERENCE / "webdancer_sample_traj.jsonl"))
    assert len(records) == 200
    calls = answers = 0
    for record in records:
        roles = [m["role"] for m in record["messages"]]
        assert roles[0] == "system" and set(roles[1:]) <= {"user", "assistant"}
        for message in record["messages"]:
            if message["role"] == "assistant":
                turn = parse_turn(message["content"])
                assert turn.strict, turn.problems  # the real model's turns are strictly well-formed
                calls += turn.kind == "tool_call" and turn.tool_call is not None
                answers += turn.kind == "answer"
            elif message["role"] == "user" and message["content"].startswith("<tool_response>"):
                assert message["content"].rstrip().endswith("</tool_response>")
    assert (calls, answers) == (222, 200)


def test_record_from_an_episode_round_trips(tmp_path):
    wiki = MiniWiki()
    env = ResearchEnv([SearchTool(wiki), VisitTool(wiki)], TASKS, current_date="2025-07-18")
    episode = run_episode(env, HeuristicAgent(), options={"task_index": 1})
    record = trajectory_record(env.task, env.messages(), episode.reward, episode.info, "heuristic")
    assert episode.record("heuristic") == record
    assert set(REQUIRED_KEYS) <= set(record) and record["id"] == "sdo" and record["is_correct"]
    assert record["task"]["answer"] == "Helioseismic and Magnetic Imager" and record["num_tool_calls"] == 2
    assert write_trajectories(tmp_path / "t.jsonl", [record, record]) == 2
    assert list(read_trajectories(tmp_path / "t.jsonl")) == [record, record]


def test_unfinished_or_malformed_records_are_rejected(tmp_path):
    wiki = MiniWiki()
    env = ResearchEnv([SearchTool(wiki)], TASKS, current_date="2025-07-18")
    _, info = env.reset(options={"task_index": 0})
    with pytest.raises(ValueError, match="last step"):
        trajectory_record(env.task, env.messages(), 0.0, info, "x")
    with pytest.raises(ValueError, match="missing"):
        write_trajectories(tmp_path / "t.jsonl", [{"id": "x"}])
    (tmp_path / "bad.jsonl").write_text('{"messages": []}\n{bad\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        list(read_trajectories(tmp_path / "bad.jsonl"))


def test_the_writer_uses_a_partial_name_until_complete(tmp_path):
    from envs.trajectory import TrajectoryWriter

    record = {k: 0 for k in REQUIRED_KEYS} | {"messages": [], "id": "x"}
    path, partial = tmp_path / "t.jsonl", tmp_path / "t.jsonl.partial"
    with TrajectoryWriter(path) as writer:
        writer.write(record)
        assert not path.exists() and partial.read_text().count("\n") == 1  # flushed, but not finished
    assert path.exists() and not partial.exists() and list(read_trajectories(path)) == [record]
    crashed = tmp_path / "c.jsonl"
    with pytest.raises(RuntimeError):
        with TrajectoryWriter(crashed) as writer:
            writer.write(record)
            raise RuntimeError("the run died")
    assert not crashed.exists() and list(read_trajectories(tmp_path / "c.jsonl.partial")) == [record]
