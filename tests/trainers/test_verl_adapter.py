"""The verl agent-loop adapter's episode logic (plain Python; verl itself is not installed here)."""

from __future__ import annotations

import asyncio

import pytest

from envs.derived_tasks import derive_tasks
from envs.protocol import format_turn
from envs.tokens import end_of_turn_ids, encode
from trainers.adapters.verl import AGENT_NAME, WebSailorAgentLoop, output_fields, play_episode, task_from_sample
from trainers.gold import make_env
from trainers.tiny_lm import tiny_lm


def _scripted(turns: list[str], tokenizer, *, cut_marker: bool = False, logprobs=lambda call, n: [-0.5] * n):
    calls: list[tuple[int, int]] = []

    async def generate(ids: list[int], max_tokens: int):
        calls.append((len(ids), max_tokens))
        text = turns[min(len(calls) - 1, len(turns) - 1)]
        out = encode(text, tokenizer) + ([] if cut_marker else end_of_turn_ids(tokenizer)) + encode("junk", tokenizer)
        out = out[:max_tokens]
        return out, logprobs(len(calls), len(out))

    return generate, calls


@pytest.fixture(scope="module")
def setup(default_wiki):
    task = derive_tasks(default_wiki, 1, seed=1)[0].to_dict()
    _, tokenizer = tiny_lm(hidden=32)
    env = make_env(default_wiki, [task])
    yield task, tokenizer, env
    env.close()


def test_episode_ids_masks_and_reward(setup):
    task, tok, env = setup
    turns = [format_turn("look", tool_call=("search", {"query": [task["question"][:60]]})),
             format_turn("found", answer=task["answer"])]
    generate, calls = _scripted(turns, tok)
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=20000, max_new_tokens=4000))
    assert ep.reward == 1.0 and ep.termination == "answer" and ep.num_turns == 3
    assert len(ep.response_ids) == len(ep.response_mask) == len(ep.response_logprobs)
    eot = end_of_turn_ids(tok)
    sampled = [i for i, m in zip(ep.response_ids, ep.response_mask) if m]
    assert sampled == encode(turns[0], tok) + eot + encode(turns[1], tok) + eot  # cut after the marker, "junk" dropped
    assert all(lp == 0.0 for lp, m in zip(ep.response_logprobs, ep.response_mask) if m == 0)
    text = tok.decode(ep.response_ids)
    observed = tok.decode([i for i, m in zip(ep.response_ids, ep.response_mask) if not m])
    assert "<tool_response>" in observed and observed.endswith("<|im_start|>assistant\n")
    assert text.startswith(turns[0]) and text.endswith(turns[1] + "<|im_end|>")
    assert calls[1][0] == len(ep.prompt_ids) + text.index(turns[1])  # the second turn saw everything before it


def test_response_length_bounds_the_episode(setup):
    task, tok, env = setup
    generate, calls = _scripted([format_turn("look", tool_call=("search", {"query": ["x"]}))], tok)
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=300, max_new_tokens=4000))
    assert len(ep.response_ids) == 300 and ep.termination == "response_length"
    assert all(budget <= 300 for _, budget in calls)
    out = output_fields(ep)  # cut by the budget: out of the loss through the mask verl's loss honours
    assert not ep.in_loss and out["response_mask"] == [0] * 300 and out["extra_fields"]["in_loss"] is False
    assert out["extra_fields"]["termination"] == "response_length" and out["response_ids"] == ep.response_ids
    assert output_fields(ep, mask_excluded=False)["response_mask"] == ep.response_mask


def test_answered_episode_stays_in_the_loss_with_real_logprobs(setup):
    task, tok, env = setup
    generate, _ = _scripted([format_turn("found", answer=task["answer"])], tok,
                            logprobs=lambda call, n: [-0.25 - 0.01 * i for i in range(n)])
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=2000, max_new_tokens=400))
    out = output_fields(ep)
    assert ep.in_loss and out["response_mask"] == ep.response_mask == [1] * len(ep.response_ids)
    assert out["response_logprobs"] == [-0.25 - 0.01 * i for i in range(len(ep.response_ids))]
    assert out["reward_score"] == 1.0 and out["extra_fields"] == {"termination": "answer", "in_loss": True}


def test_missing_logprobs_are_none_never_zeros(setup):
    task, tok, env = setup
    turns = [format_turn("look", tool_call=("search", {"query": ["x"]})), format_turn("a", answer=task["answer"])]
    generate, _ = _scripted(turns, tok, logprobs=lambda call, n: None)
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=20000, max_new_tokens=4000))
    assert ep.num_turns == 3 and ep.response_logprobs is None and output_fields(ep)["response_logprobs"] is None
    for bad, match in ((lambda call, n: [-0.5] * n if call == 1 else None, "earlier turn but none"),
                       (lambda call, n: None if call == 1 else [-0.5] * n, "none for an earlier one"),
                       (lambda call, n: [-0.5] * 3, "returned 3 log-probs for")):
        generate, _ = _scripted(turns, tok, logprobs=bad)
        with pytest.raises(ValueError, match=match):
            asyncio.run(play_episode(env, task, generate, tok, response_length=20000, max_new_tokens=4000))


def test_answer_cut_by_max_new_tokens_is_truncated_not_answered(setup):
    task, tok, env = setup
    turn = format_turn("found", answer=task["answer"])
    generate, _ = _scripted([turn], tok, cut_marker=True)
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=2000,
                                  max_new_tokens=len(encode(turn, tok))))
    assert ep.last_turn_cut and ep.termination == "token_limit" and ep.reward == 0.0 and not ep.in_loss
    assert set(output_fields(ep)["response_mask"]) == {0}


def test_environment_error_ends_the_episode_out_of_the_loss(setup):
    task, tok, _ = setup

    class Broken:
        unwrapped = None

        def __init__(self, env):
            self.env, Broken.unwrapped = env, env.unwrapped

        def reset(self, **kw):
            return self.env.reset(**kw)

        def step(self, action):
            raise OSError("index file vanished")

    env = make_env(setup[2].unwrapped.tools[0].sim.path, [task])
    try:
        generate, _ = _scripted([format_turn("look", tool_call=("search", {"query": ["x"]}))], tok)
        ep = asyncio.run(play_episode(Broken(env), task, generate, tok, response_length=2000, max_new_tokens=400))
    finally:
        env.close()
    assert ep.termination == "env_error" and "index file vanished" in ep.error and not ep.in_loss
    assert output_fields(ep)["extra_fields"]["error"].startswith("OSError")


def test_turn_cut_off_before_its_marker_is_closed_with_mask_zero(setup):
    task, tok, env = setup
    turn = format_turn("look", tool_call=("search", {"query": ["x"]}))
    generate, _ = _scripted([turn], tok, cut_marker=True)
    ep = asyncio.run(play_episode(env, task, generate, tok, response_length=2000, max_new_tokens=len(turn)))
    n = len(encode(turn, tok))
    eot = end_of_turn_ids(tok)
    assert ep.response_ids[n:n + len(eot)] == eot and ep.response_mask[n:n + len(eot)] == [0] * len(eot)


def test_task_from_sample_reads_verl_rows():
    assert task_from_sample({"extra_info": {"task": {"question": "Q", "answer": "A"}}}) == {"question": "Q",
                                                                                          "answer": "A"}
    row = {"raw_prompt": [{"role": "user", "content": "Q2"}], "reward_model": {"ground_truth": "A2"}}
    assert task_from_sample(row) == {"question": "Q2", "answer": "A2"}
    with pytest.raises(ValueError, match="extra_info.task"):
        task_from_sample({"raw_prompt": []})


def test_agent_loop_says_what_to_install_without_verl():
    try:
        import verl  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="No module named .verl.*pip install verl"):
            WebSailorAgentLoop()
    else:
        from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry

        from tests.trainers.verl_standin import locate

        assert issubclass(WebSailorAgentLoop, AgentLoopBase)
        assert locate(_agent_loop_registry[AGENT_NAME]["_target_"]) is WebSailorAgentLoop


def test_agent_loop_run_returns_verl_output(setup):
    """Against verl's own classes (skipped when verl is not importable, as in the shared test environment)."""
    pytest.importorskip("verl.experimental.agent_loop.agent_loop")
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap
    from verl.workers.rollout.replica import TokenOutput

    task, tok, env = setup
    turns = [format_turn("look", tool_call=("search", {"query": [task["question"][:60]]})),
             format_turn("found", answer=task["answer"])]
    generate, _ = _scripted(turns, tok)

    class Servers:  # verl's AsyncLLMServerManager interface
        async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
            ids, lps = await generate(prompt_ids, sampling_params["max_tokens"])
            return TokenOutput(token_ids=ids, log_probs=lps)

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": 20000, "prompt_length": 4096}},
                               "data": {}})
    from envs.compact import COMPACT_SYSTEM_PROMPT

    import inspect

    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    # verl 0.9 calls it data_config; its main branch dataset_config
    data_key = "data_config" if "data_config" in inspect.signature(AgentLoopBase.__init__).parameters \
        else "dataset_config"
    loop = WebSailorAgentLoop(trainer_config=DictConfigWrap(config), server_manager=Servers(), tokenizer=tok,
                              processor=None, dataset_cls=None, **{data_key: DictConfigWrap(config.data)},
                              env_kwargs={"wiki_dir": str(env.unwrapped.tools[0].sim.path),
                                          "tools": ["search", "visit"], "system_prompt": COMPACT_SYSTEM_PROMPT})
    out = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"task": task}, raw_prompt=[]))
    assert isinstance(out, AgentLoopOutput) and out.reward_score == 1.0 and out.num_turns == 3
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert 0 in out.response_mask and out.response_mask[0] == 1


@pytest.fixture
def verl_standin(monkeypatch):
    """trainers.adapters.verl imported against a stand-in with verl's interface (tests/trainers/verl_standin.py),
    then re-imported as it was."""
    import importlib

    import trainers.adapters.verl as adapter
    from tests.trainers import verl_standin as standin

    standin.install(monkeypatch)
    yield standin, importlib.reload(adapter)
    monkeypatch.undo()
    importlib.reload(adapter)


def test_registered_target_imports_to_the_class_and_runs(setup, verl_standin):
    """verl's register records a dotted path that hydra.utils.instantiate imports: it must be the class."""
    standin, adapter = verl_standin
    target = standin._agent_loop_registry[AGENT_NAME]["_target_"]
    assert target == "trainers.adapters.verl.WebSailorAgentLoop"
    cls = standin.locate(target)
    assert cls is adapter.WebSailorAgentLoop and issubclass(cls, standin.AgentLoopBase)

    task, tok, env = setup
    turns = [format_turn("look", tool_call=("search", {"query": [task["question"][:60]]})),
             format_turn("found", answer=task["answer"])]
    generate, _ = _scripted(turns, tok)
    requests: list[dict] = []

    class Servers:  # verl's AsyncLLMServerManager.generate
        async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
            requests.append({"id": request_id, **sampling_params})
            ids, lps = await generate(prompt_ids, sampling_params["max_tokens"])
            return standin.TokenOutput(token_ids=ids, log_probs=lps)

    from types import SimpleNamespace

    from envs.compact import COMPACT_SYSTEM_PROMPT

    config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(response_length=20000)))
    loop = cls(trainer_config=standin.DictConfigWrap(config), server_manager=Servers(), tokenizer=tok,
               processor=None, dataset_cls=None, dataset_config=standin.DictConfigWrap({}),
               env_kwargs={"wiki_dir": str(env.unwrapped.tools[0].sim.path), "tools": ["search", "visit"],
                           "system_prompt": COMPACT_SYSTEM_PROMPT})
    out = asyncio.run(loop.run({"temperature": 1.0, "logprobs": True}, extra_info={"task": task}, raw_prompt=[]))
    assert isinstance(out, standin.AgentLoopOutput) and out.reward_score == 1.0 and out.num_turns == 3
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, out.response_mask) if m)
    assert out.extra_fields == {"termination": "answer", "in_loss": True} and out.metrics.generate_sequences > 0
    assert len({r["id"] for r in requests}) == 1 and all(r["temperature"] == 1.0 for r in requests)
