"""The LLM judge never shows its API key: not in repr, str or an f-string of it."""

from __future__ import annotations

from envs.judges import LLMJudge

KEY = "sk-judge-secret-0123456789"


def test_llm_judge_repr_has_no_key():
    judge = LLMJudge("http://127.0.0.1:9/v1", "grader", api_key=KEY)
    for text in (repr(judge), str(judge), f"{judge!r}", repr([judge])):
        assert KEY not in text
    assert "grader" in repr(judge)  # the rest is still shown
