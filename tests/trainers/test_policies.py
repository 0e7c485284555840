"""trainers.policies: sampled ids, their log-probabilities, stop sequences; the endpoint backend."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from envs.tokens import stop_sequences
from trainers.policies import (Generation, OpenAIPolicy, Policy, TextPolicy, TransformersPolicy, cut_at_stop,
                               import_vllm, normalize_stops)


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


def test_top_p_logprobs_are_renormalized_and_greedy_is_deterministic(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer)
    prompt = [tokenizer.encode("question", add_special_tokens=False)]
    torch.manual_seed(1)
    gen = policy.generate(prompt, max_new_tokens=8, temperature=1.0, top_p=0.5)[0]
    full = _forward_logprobs(model, prompt[0], gen.token_ids, 1.0)
    # Under top-p the kept mass is <= 1, so each sampled id is at least as likely as untruncated.
    assert all(a >= b - 1e-5 for a, b in zip(gen.logprobs, full.tolist()))
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
