"""trainers.policies: sampled ids, their log-probabilities, stop sequences; the endpoint backend."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from transformers import ByT5Tokenizer

from tests.trainers.conftest import tiny_qwen2

from envs.tokens import stop_sequences
from trainers.policies import (Generation, OpenAIPolicy, Policy, TextPolicy, TransformersPolicy, cut_at_stop,
                               import_vllm, normalize_stops, sampling_logprobs)


def _forward_logprobs(model, prompt, ids, temperature):
    """log softmax(logits / T) of each sampled id, by one forward pass over prompt + ids."""
    seq = torch.tensor([prompt + ids])
    with torch.no_grad():
        logits = model(seq).logits[0, len(prompt) - 1:-1] / temperature
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)


def test_logprobs_match_a_forward_pass_with_left_padding(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer)
    assert isinstance(policy, Policy)
    prompts = [tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n", add_special_tokens=False),
               tokenizer.encode("a much longer prompt than the other one", add_special_tokens=False)]
    torch.manual_seed(0)
    gens = policy.generate(prompts, max_new_tokens=12, temperature=0.7, top_p=1.0, stop_ids=[])
    assert [g.finish_reason for g in gens] == ["length", "length"]
    for prompt, gen in zip(prompts, gens):
        assert len(gen.token_ids) == len(gen.logprobs) == 12
        expected = _forward_logprobs(model, prompt, gen.token_ids, 0.7)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
        assert gen.text == tokenizer.decode(gen.token_ids, skip_special_tokens=False)


def test_a_checkpoints_own_sampling_defaults_do_not_apply(tokenizer):
    model = tiny_qwen2(seed=3)
    model.generation_config.top_k = 3
    model.generation_config.repetition_penalty = 3.0
    policy = TransformersPolicy(model, tokenizer)
    prompt = tokenizer.encode("abcabc", add_special_tokens=False)
    torch.manual_seed(0)
    gen = policy.generate([prompt], max_new_tokens=10, temperature=1.0, top_p=1.0)[0]
    expected = _forward_logprobs(model, prompt, gen.token_ids, 1.0)
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
    assert model.generation_config.top_k == 3  # restored


def test_sampling_logprobs_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.allclose(sampling_logprobs(logits, 1.0, 0.7).exp(), torch.tensor([[0.625, 0.375, 0.0]]))
    assert torch.allclose(sampling_logprobs(logits, 1.0, 0.4).exp(), torch.tensor([[1.0, 0.0, 0.0]]))
    assert torch.allclose(sampling_logprobs(logits, 1.0, 1.0).exp(), torch.tensor([[0.5, 0.3, 0.2]]))
    t2 = torch.softmax(logits / 2.0, -1)
    assert torch.allclose(sampling_logprobs(logits, 2.0, 1.0).exp(), t2)
    # Greedy: the raw distribution.
    assert torch.allclose(sampling_logprobs(logits, 0.0, 1.0).exp(), torch.tensor([[0.5, 0.3, 0.2]]))


def test_top_p_logprobs_are_the_nucleus_distribution_and_greedy_is_deterministic(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer)
    prompt = [tokenizer.encode("question", add_special_tokens=False)]
    torch.manual_seed(1)
    gen = policy.generate(prompt, max_new_tokens=8, temperature=0.8, top_p=0.3)[0]
    seq = torch.tensor([prompt[0] + gen.token_ids])
    with torch.no_grad():
        logits = model(seq).logits[0, len(prompt[0]) - 1:-1]
    expected = sampling_logprobs(logits, 0.8, 0.3).gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1)
    assert torch.isfinite(expected).all()  # every sampled id lies inside its nucleus
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
    full = _forward_logprobs(model, prompt[0], gen.token_ids, 0.8)
    assert all(a > b for a, b in zip(gen.logprobs, full.tolist()))  # renormalized over the nucleus
    a = policy.generate(prompt, max_new_tokens=6, temperature=0, top_p=1.0)[0]
    b = policy.generate(prompt, max_new_tokens=6, temperature=0, top_p=1.0)[0]
    assert a.token_ids == b.token_ids


def test_multi_token_stop_sequences_end_each_row(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer)
    prompt = tokenizer.encode("xyz", add_special_tokens=False)
    torch.manual_seed(2)
    free = policy.generate([prompt], max_new_tokens=10, temperature=1.0, top_p=1.0)[0]
    # Stop on the 2-token sequence the model sampled at positions 3..4 (with the same seed).
    stop = free.token_ids[3:5]
    torch.manual_seed(2)
    batch = policy.generate([prompt, prompt[:2]], max_new_tokens=10, temperature=1.0, top_p=1.0,
                            stop_ids=[stop])
    torch.manual_seed(2)
    cut = policy.generate([prompt], max_new_tokens=10, temperature=1.0, top_p=1.0, stop_ids=[stop])[0]
    assert cut.finish_reason == "stop" and cut.token_ids[-2:] == stop and len(cut.token_ids) <= 5
    assert all(g.finish_reason == "stop" or len(g.token_ids) == 10 for g in batch)
    assert all(len(g.token_ids) == len(g.logprobs) for g in batch)
    assert stop_sequences(tokenizer)[0] == tokenizer.encode("<|im_end|>", add_special_tokens=False)


def test_helpers_and_validation(model, tokenizer):
    assert normalize_stops([5, [6, 7], [], [6, 7]]) == [[5], [6, 7]]
    assert cut_at_stop([1, 2, 3, 4, 2, 3], [[2, 3]]) == ([1, 2, 3], True)
    assert cut_at_stop([1, 2], [[9]]) == ([1, 2], False)
    policy = TransformersPolicy(model, tokenizer)
    with pytest.raises(ValueError, match="max_new_tokens"):
        policy.generate([[5]], max_new_tokens=0, temperature=1.0, top_p=1.0)
    with pytest.raises(ValueError, match="top_p"):
        policy.generate([[5]], max_new_tokens=1, temperature=1.0, top_p=0)
    with pytest.raises(ValueError, match="at least one token"):
        policy.generate([[]], max_new_tokens=1, temperature=1.0, top_p=1.0)


def test_vllm_missing_says_what_to_install():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"websailor-gym\[vllm\]"):
            import_vllm()
    else:
        pytest.skip("vLLM is installed")


class _ChatHandler(BaseHTTPRequestHandler):
    requests: list[dict] = []
    fail_first = 0

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatHandler.requests.append({"body": body, "auth": self.headers.get("Authorization")})
        if _ChatHandler.fail_first > 0:
            _ChatHandler.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        last = body["messages"][-1]["content"]
        reply = {"choices": [{"message": {"role": "assistant", "content": f"<answer>{last[::-1]}</answer>"},
                              "finish_reason": "stop"}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _ChatHandler.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_policy_on_a_loopback_server(chat_server):
    policy = OpenAIPolicy(chat_server, "tiny", api_key="sk-secret", max_retries=1)
    assert isinstance(policy, TextPolicy) and "sk-secret" not in repr(policy)
    _ChatHandler.fail_first = 1  # one 503, then the retry succeeds
    gens = policy.generate_text([[{"role": "user", "content": "abc"}]], max_new_tokens=7, temperature=0.85,
                                top_p=0.95, stop=["</answer>"])
    assert gens == [Generation([], [], "<answer>cba</answer>", "stop")]
    sent = _ChatHandler.requests[-1]
    assert sent["auth"] == "Bearer sk-secret"
    assert sent["body"]["max_tokens"] == 7 and sent["body"]["top_p"] == 0.95 and sent["body"]["stop"] == ["</answer>"]
    with pytest.raises(ValueError, match="base_url"):
        OpenAIPolicy("ftp://x", "m")


def test_openai_policy_errors_name_the_url_not_the_key():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "m", api_key="sk-secret", max_retries=0, timeout=2)
    with pytest.raises(RuntimeError) as exc:
        policy.generate_text([[{"role": "user", "content": "x"}]], max_new_tokens=1)
    assert "127.0.0.1:9" in str(exc.value) and "sk-secret" not in str(exc.value)


class _FakeVLLM:
    """A stand-in for the parts of vLLM's documented API the backend uses (vLLM cannot run here)."""

    def __init__(self):
        import types

        self.module = types.ModuleType("vllm")
        self.inputs = types.ModuleType("vllm.inputs")
        self.created: list[dict] = []
        self.params: list[dict] = []
        fake = self

        class SamplingParams:
            def __init__(self, **kwargs):
                fake.params.append(kwargs)
                self.kwargs = kwargs

        class Logprob:
            def __init__(self, logprob):
                self.logprob = logprob

        class LLM:
            def __init__(self, model, **kwargs):
                fake.created.append({"model": model, **kwargs})

            def get_tokenizer(self):
                return ByT5Tokenizer()

            def generate(self, prompts, params, use_tqdm=True):
                outs = []
                for i, prompt in enumerate(prompts):
                    ids = [100 + i, 101, 63, 127, 108, 112, 98, 104, 113, 103, 127, 65, 7] if i == 0 else [50, 51]
                    lps = [{t: Logprob(-0.5 - 0.01 * j), 3: Logprob(-9.0)} for j, t in enumerate(ids)]
                    completion = types.SimpleNamespace(token_ids=ids, logprobs=lps,
                                                       finish_reason="stop" if i == 0 else "length")
                    outs.append(types.SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[completion]))
                return outs

        self.module.LLM, self.module.SamplingParams = LLM, SamplingParams
        self.inputs.TokensPrompt = dict
        self.module.inputs = self.inputs


def test_vllm_backend_against_its_documented_interface(monkeypatch):
    fake = _FakeVLLM()
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake.module)
    monkeypatch.setitem(__import__("sys").modules, "vllm.inputs", fake.inputs)
    from trainers.policies import VLLMPolicy

    policy = VLLMPolicy("some/model", seed=7, gpu_memory_utilization=0.5)
    assert fake.created == [{"model": "some/model", "logprobs_mode": "processed_logprobs",
                             "gpu_memory_utilization": 0.5}]
    tok = ByT5Tokenizer()
    im_end = tok.encode("<|im_end|>", add_special_tokens=False)
    gens = policy.generate([[5, 6], [7]], max_new_tokens=20, temperature=0.85, top_p=0.95, stop_ids=[im_end, [1]])
    params = fake.params[-1]
    assert params["stop_token_ids"] == [1] and params["stop"] == ["<|im_end|>"] and params["logprobs"] == 0
    assert params["temperature"] == 0.85 and params["top_p"] == 0.95 and params["max_tokens"] == 20
    assert params["seed"] == 7 and params["include_stop_str_in_output"] is True
    assert gens[0].token_ids == [100, 101] + im_end and gens[0].finish_reason == "stop"  # cut after the stop ids
    assert gens[0].logprobs == pytest.approx([-0.5 - 0.01 * j for j in range(12)])
    assert gens[1].token_ids == [50, 51] and gens[1].finish_reason == "length"
    policy.generate([[5]], max_new_tokens=2, temperature=1.0, top_p=1.0)
    assert fake.params[-1]["seed"] == 8  # a fresh seed per call


@pytest.mark.parametrize("engine", ["kv", "generate"])
def test_a_model_in_training_mode_samples_as_in_eval_mode_and_keeps_its_modes(tokenizer, engine):
    """A trainer's model handed over in training mode, with dropout and gradient checkpointing on, samples
    what the same model samples in eval mode (no dropout; the KV cache kept: transformers before 5.2x
    drops it in training mode with checkpointing), and every module's mode is restored after."""
    model = tiny_qwen2()
    model.config.attention_dropout = 0.5
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    prompts = [tokenizer.encode("who is A?" * 20), tokenizer.encode("what is B?")]
    kwargs = dict(max_new_tokens=8, temperature=1.0)
    gens = lambda: [torch.Generator().manual_seed(s) for s in (1, 2)]  # noqa: E731
    want = TransformersPolicy(model.eval(), tokenizer, engine=engine).generate(prompts, generators=gens(), **kwargs)
    model.gradient_checkpointing_enable()
    model.train()
    model.model.norm.eval()  # a module a trainer keeps in eval mode stays so
    got = TransformersPolicy(model, tokenizer, engine=engine).generate(prompts, generators=gens(), **kwargs)
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    assert model.training and model.model.layers[0].training and not model.model.norm.training
