"""A lone surrogate anywhere in a record (a task's question, a message) is written and read back."""

from __future__ import annotations

from envs.tasks import task_from_dict
from envs.trajectory import TrajectoryWriter, read_trajectories, trajectory_record


def test_lone_surrogates_round_trip(tmp_path):
    task = task_from_dict({"id": "s", "question": "what is \ud800?", "answer": "x\udfff"}, "test")
    record = trajectory_record(task, [{"role": "user", "content": "q \udc80"}], 1.0,
                               {"termination": "answer", "is_correct": True}, "p")
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        writer.write(record)
        writer.write({**record, "id": "plain", "task": {"question": "é", "answer": "ü"}, "messages": []})
    back = list(read_trajectories(path))
    assert back[0]["task"]["question"] == "what is \ud800?" and back[0]["messages"][0]["content"] == "q \udc80"
    assert back[1]["task"]["question"] == "é"
    assert "é" in path.read_text(encoding="utf-8").splitlines()[1]  # readable UTF-8 where it can be
