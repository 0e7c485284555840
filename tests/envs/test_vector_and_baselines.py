import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

from envs.baselines import (HeuristicAgent, RandomAgent, make_agent, parse_search_results, parse_visit_pages,
                            question_of, quote_support, salient_queries,
                            tool_names_of)
from envs.env import ResearchEnv
from envs.episode import run_episode
from envs.formatting import format_search_batch
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool

from .conftest import TASKS, EchoTool, Hit, MiniWiki


def _make():
    wiki = MiniWiki()
    return ResearchEnv([SearchTool(wiki), VisitTool(wiki), EchoTool()], TASKS, current_date="2025-07-18")


def _play_vector(envs, n_episodes):
    """Heuristic agents in every sub-environment until n_episodes finished; returns their last infos."""
    agents = [HeuristicAgent() for _ in range(envs.num_envs)]
    obs, info = envs.reset(seed=[0, 1, 2][: envs.num_envs])
    for i, agent in enumerate(agents):
        agent.reset(obs[i], {})
    finished, just_done = [], np.zeros(envs.num_envs, dtype=bool)
    for _ in range(50):
        actions = tuple(agents[i].act(obs[i], {}) for i in range(envs.num_envs))
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i in range(envs.num_envs):
            if just_done[i]:  # next-step autoreset: this step's obs is a fresh first prompt
                agents[i].reset(obs[i], {})
            elif terminated[i] or truncated[i]:
                finished.append((float(rewards[i]), bool(info["is_correct"][i]), str(info["termination"][i])))
        just_done = terminated | truncated
        if len(finished) >= n_episodes:
            return finished
    raise AssertionError(f"only {len(finished)} episodes finished")


@pytest.mark.parametrize("vector_cls", [SyncVectorEnv, AsyncVectorEnv])
def test_vector_envs_run_the_heuristic(vector_cls):
    envs = vector_cls([_make] * 3)
    try:
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert all(isinstance(o, str) for o in envs.reset(seed=[0, 1, 2])[0])
        finished = _play_vector(envs, 6)
        assert all(term == "answer" and correct and reward == 1.0 for reward, correct, term in finished)
        transcripts = envs.call("messages")
        assert len(transcripts) == 3 and all(t[0]["role"] == "system" for t in transcripts)
    finally:
        envs.close()


def test_gymnasium_wrappers_fit():
    env = RecordEpisodeStatistics(TimeLimit(_make(), max_episode_steps=2))
    info = run_episode(env, HeuristicAgent(), options={"task_index": 2}).info
    assert "episode" in info and info["episode"]["l"] == 2
    # TimeLimit truncates on its own count, on top of the environment's budgets.
    info = run_episode(env, RandomAgent(seed=1), options={"task_index": 2}).info
    assert info["episode"]["l"] <= 2


def test_heuristic_solves_the_mini_wiki_and_beats_random():
    env = _make()
    heuristic = [run_episode(env, HeuristicAgent(), options={"task_index": i}).info["is_correct"] for i in range(3)]
    rng_policy = RandomAgent(seed=0)
    random_runs = [run_episode(env, rng_policy, options={"task_index": i % 3}).info["is_correct"] for i in range(30)]
    assert all(heuristic)
    assert np.mean(random_runs) < 1.0
    messages = env.messages()
    assert messages[-1]["role"] == "assistant"


def test_policy_helpers_read_the_observations():
    obs, _ = _make().reset(options={"task_index": 0})
    assert question_of(obs) == TASKS[0]["question"]
    assert tool_names_of(obs) == ["search", "visit", "echo"]
    text = format_search_batch(["a", "b"], [[Hit("Santa Claus (horse)", "https://en.wikipedia.org/wiki/Santa_Claus_(horse)",
                                                  "A racehorse.\nSecond line.")],
                                            [Hit("Paris", "https://en.wikipedia.org/wiki/Paris", "")]])
    hits = parse_search_results(text)
    assert [(h.title, h.url, h.rank) for h in hits] == [
        ("Santa Claus (horse)", "https://en.wikipedia.org/wiki/Santa_Claus_(horse)", 1),
        ("Paris", "https://en.wikipedia.org/wiki/Paris", 1)]
    assert hits[0].snippet == "A racehorse.\nSecond line."
    pages = parse_visit_pages(MiniWiki().visit("https://en.wikipedia.org/wiki/Paris", "capital goalword"))
    assert list(pages) == ["https://en.wikipedia.org/wiki/Paris"]
    page = pages["https://en.wikipedia.org/wiki/Paris"]
    assert "capital" in page and "goalword" not in page  # the echoed goal is not page text
    assert quote_support('Which city is "the ___ and most populous city of France"?', page) == 1.0
    assert quote_support('Which city is "the ___ of Spain"?', page) == 0.0
    queries = salient_queries('Which film, called "The Big Sleep" in English, did Howard Hawks direct in 1946?')
    assert queries[0] == "The Big Sleep" and any("Howard Hawks" in q for q in queries)
    assert make_agent("random", seed=1).name == "random"
    with pytest.raises(ValueError, match="policy must be"):
        make_agent("oracle")


def test_gym_make_with_a_registered_entry_point_is_lazy():
    import envs  # noqa: F401

    spec = gym.spec("websailor/WikiSim-v0")
    assert spec.entry_point == "envs.wikisim:make_wikisim_env"
