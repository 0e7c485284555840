import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envs.judges import (ExactMatchF1Judge, Judge, JudgeError, LLMJudge, exact_match, make_judge,
                         normalize_answer, parse_grader_reply, token_f1)


def test_squad_normalization():
    assert normalize_answer("The  Epsom Derby!") == "epsom derby"
    assert normalize_answer("**Bloom’s Taxonomy**") == normalize_answer("Bloom's taxonomy")
    assert normalize_answer("An apple, a pear") == "apple a pear"  # only a leading article goes
    assert normalize_answer("ＡＢＣ") == "abc"  # NFKC: full-width letters


def test_exact_match_and_f1_hand_computed():
    assert exact_match("the Epsom Derby", "Epsom Derby.")
    assert not exact_match("Epsom", "Epsom Derby")
    # pred tokens {epsom, derby, race}, gold {epsom, derby}: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("Epsom Derby race", "Epsom Derby") == pytest.approx(0.8)
    assert token_f1("Grand National", "Epsom Derby") == 0.0
    assert token_f1("", "") == 0.0 and token_f1("x", "") == 0.0  # nothing never matches nothing


def test_em_f1_judge_uses_aliases():
    judge = ExactMatchF1Judge()
    verdict = judge("q", "Santa Claus", ["Santa Claus (horse)", "Santa Claus"])
    assert verdict.is_correct and verdict.score == 1.0 and verdict.details["em"] == 1.0
    verdict = judge("q", "Santa", ["Santa Claus"])
    assert not verdict.is_correct and verdict.score == 0.0
    assert verdict.details["f1"] == pytest.approx(2 * 1 * 0.5 / 1.5)
    f1_judge = make_judge("f1")
    assert f1_judge("q", "Santa", ["Santa Claus"]).score == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        judge("q", "x", [])


def test_make_judge():
    assert isinstance(make_judge("em_f1"), ExactMatchF1Judge)
    custom = ExactMatchF1Judge(reward="f1")
    assert make_judge(custom) is custom and isinstance(custom, Judge)
    with pytest.raises(ValueError, match="judge must be"):
        make_judge("gpt")
    with pytest.raises(ValueError, match="reward"):
        ExactMatchF1Judge(reward="bleu")


def test_parse_grader_reply():
    assert parse_grader_reply("extracted_final_answer: Paris\nreasoning: same\ncorrect: yes\nconfidence: 90%") == \
        (True, "Paris")
    assert parse_grader_reply("correct: **No**")[0] is False
    with pytest.raises(JudgeError):
        parse_grader_reply("I think it is right")


class _Grader(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that grades by substring, after `fail_first` 500s."""

    fail_first = 0
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, dict(self.headers), body))
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            self.send_response(500)
            self.end_headers()
            return
        if self.path != "/v1/chat/completions":
            self.send_response(404)
            self.end_headers()
            return
        prompt = body["messages"][0]["content"]
        response = re.search(r"<<<RESPONSE (\w+)>>>\n(.*)\n<<<END RESPONSE \1>>>", prompt).group(2)
        gold = prompt.split("[correct_answer]: ", 1)[1].split("\n", 1)[0]
        verdict = "yes" if response.lower() in gold.lower() else "no"
        content = f"extracted_final_answer: {response}\nreasoning: compared\ncorrect: {verdict}\nconfidence: 100"
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def grader():
    _Grader.fail_first = 0
    _Grader.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Grader)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_llm_judge_against_a_local_endpoint(grader):
    judge = LLMJudge(base_url=grader, model="grader", api_key="k", backoff=0.0)
    verdict = judge("Which race?", "Epsom Derby", ["Epsom Derby", "The Derby"])
    assert verdict.is_correct and verdict.score == 1.0
    assert verdict.details["extracted_final_answer"] == "Epsom Derby"
    assert not judge("Which race?", "Grand National", ["Epsom Derby"]).is_correct
    path, headers, body = _Grader.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "grader" and body["temperature"] == 0.0
    assert "[correct_answer]: Epsom Derby (also accepted: The Derby)" in body["messages"][0]["content"]


def test_llm_judge_retries_server_errors(grader):
    _Grader.fail_first = 2
    judge = LLMJudge(base_url=grader, model="m", max_retries=2, backoff=0.0)
    assert judge("q", "Paris", ["Paris"]).is_correct
    assert len(_Grader.requests) == 3


def test_llm_judge_gives_up_with_a_clear_error(grader):
    _Grader.fail_first = 5
    with pytest.raises(JudgeError, match="after 2 attempt"):
        LLMJudge(base_url=grader, model="m", max_retries=1, backoff=0.0)("q", "a", ["a"])
    with pytest.raises(JudgeError, match="HTTP 404"):  # a client error is not retried
        _Grader.fail_first = 0
        LLMJudge(base_url=grader.replace("/v1", "/nope"), model="m", backoff=0.0)("q", "a", ["a"])


def test_llm_judge_unreachable_and_bad_config():
    with pytest.raises(JudgeError, match="cannot reach"):
        LLMJudge(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0, timeout=2)("q", "a", ["a"])
    with pytest.raises(ValueError, match="base_url"):
        LLMJudge(base_url="127.0.0.1:8000", model="m")
