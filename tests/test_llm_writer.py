"""The model-written answer: the citation check, routing between endpoints, and what is recorded.

Hosted APIs are played by `FakeChatServer` (a real HTTP server speaking the OpenAI/Mistral wire
format); the real engines (a GGUF model in process, a llama.cpp server process) are in
test_llm_engines.py.
"""

from __future__ import annotations

import json
import logging
import re
import socket

import pytest
from fakes.chat_server import FakeChatServer
from test_server_fixtures import make_gate, make_settings

from sourcegate.answer import ExtractiveWriter
from sourcegate.gate import Status
from sourcegate.llm_writer import LLMWriter, build_messages, check_answer, clean_reply, endpoints_for
from sourcegate.models import Candidate

Q = "How often should I grease the bearings on pump P-200?"
KEY = "sk-test-7f3a9c"


def passages() -> list[Candidate]:
    return [
        Candidate(id="A#0", doc_id="A", title="Pump P-200: bearing lubrication (Rev. 2)",
                  text="Grease the bearings of pump P-200 every 2,000 operating hours. Add 20 g of grease to each bearing."),
        Candidate(id="B#0", doc_id="B", title="Rapid sand filters",
                  text="Backwash a filter when the head loss reaches 2.5 m or after 72 hours in service."),
    ]


# -- the check ------------------------------------------------------------------------------------

def test_a_cited_faithful_answer_passes():
    check = check_answer("Grease the P-200 bearings every 2,000 operating hours [1]. Backwash at 2.5 m of head loss [2].",
                         passages())
    assert check.ok, check.problems
    assert [c for _, c in check.sentences] == [[1], [2]]


@pytest.mark.parametrize("text, code", [
    ("Grease the bearings every 2,000 hours.", "uncited_sentence"),
    ("Grease the bearings every 2,000 hours [3].", "invalid_citation"),
    ("Grease the bearings every 500 hours [1].", "number_not_in_source"),
    # The number is in a passage, but not in the one cited.
    ("Backwash after 72 hours [1].", "number_not_in_source"),
    ("Pump P-300 needs grease every 2,000 hours [1].", "identifier_not_in_source"),
    ("Grease every 2,000 hours [1]. It is safe to skip lockout.", "uncited_sentence"),
])
def test_unsupported_answers_fail(text, code):
    check = check_answer(text, passages())
    assert not check.ok and code in check.codes, (check.codes, check.problems)


def test_number_forms_and_citation_placement():
    # 2000 is 2,000; a French decimal comma; a citation after the full stop; two passages cited at once.
    ok = ["Graisser toutes les 2000 heures [1].", "La perte de charge admise est de 2,5 m [2].",
          "Grease every 2 000 hours. [1]", "Grease every 2,000 hours and backwash at 2.5 m [1, 2].",
          "1. Add 20 g of grease to each bearing [1]."]
    for text in ok:
        check = check_answer(text, passages())
        assert check.ok, (text, check.problems)


def test_reasoning_blocks_and_cut_answers():
    assert clean_reply("<think>hmm 9,999</think>Grease every 2,000 hours [1].", "stop") == ("Grease every 2,000 hours [1].", None)
    text, problem = clean_reply("Grease every 2,000 hours [1]. Then add 20", "length")
    assert text == "Grease every 2,000 hours [1]." and problem is None
    assert clean_reply("<think>still thinking", "length")[1]
    assert clean_reply("Grease every", "length")[1]


def test_prompt_holds_the_passages_alone_and_asks_in_the_question_language():
    msgs = build_messages("Faut-il graisser la P-200 toutes les 2000 heures ?", Status.ANSWER, passages())
    assert "French" in msgs[0]["content"]
    assert "[1] Pump P-200: bearing lubrication (Rev. 2)" in msgs[1]["content"]
    assert "[2] Rapid sand filters" in msgs[1]["content"]
    conflict = build_messages("P-200 bearings need grease every 500 hours, how much do I add?", Status.CONFLICT, passages()[:1])
    assert 'assumes: "P-200 bearings need grease every 500 hours"' in conflict[1]["content"]


def test_settings_errors_name_the_variable():
    with pytest.raises(ValueError, match="LLM_WRITER_LOCAL"):
        endpoints_for("local", None, None, None, None, None)
    with pytest.raises(ValueError, match="LLM_WRITER_CLOUD_MODEL"):
        endpoints_for("cloud", None, None, "https://api.mistral.ai/v1", None, "k")
    with pytest.raises(ValueError, match="LLM_WRITER_POLICY"):
        endpoints_for("nearest", "gguf:/m.gguf", None, None, None, None)


# -- routing over real HTTP -----------------------------------------------------------------------

def p200_reply(body: dict) -> str:
    """A model that finds the P-200 lubrication passage among those it was given and words it."""
    user = body["messages"][-1]["content"]
    n = re.search(r"^\[(\d+)\] Pump P-200: bearing lubrication", user, re.M)
    return f"Grease the P-200 bearings every 2,000 operating hours [{n.group(1)}]." if n else "No passage [1]."


def closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}/v1"


def ask(tmp_path, query: str = Q, **writer_settings):
    settings = make_settings(tmp_path / "audit.jsonl", writer="llm", **writer_settings)
    gate = make_gate(settings)
    try:
        result = gate.ask(query)
    finally:
        gate.close()
    record = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    return result, record


def test_cloud_answer_is_checked_recorded_and_keyed(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeChatServer(p200_reply, api_key=KEY) as cloud:
        result, record = ask(tmp_path, llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="mistral-small-latest", llm_writer_cloud_api_key=KEY)
        body = cloud.bodies[0]
    assert result.writer.path == "cloud" and result.writer.fallback_reason is None
    assert result.writer.model == "mistral-small-latest"
    assert result.answer.startswith("Grease the P-200 bearings every 2,000 operating hours [")
    assert "\n\nSources:\n[1] " in result.answer
    assert body["temperature"] == 0 and body["max_tokens"] == 256
    # Only the evidence passages go to the model: none of the excluded ones (the forum note's text).
    assert len(re.findall(r"^\[\d+\] ", body["messages"][-1]["content"], re.M)) == len(result.evidence)
    excluded_docs = {x.doc_id for x in result.excluded} - {e.doc_id for e in result.evidence}
    assert "FORUM-2291" in excluded_docs and "FORUM" not in body["messages"][-1]["content"]
    w = record["writer"]
    assert w["path"] == "cloud" and w["policy"] == "cloud"
    assert w["remote_declared"] == w["remote_observed"] == []  # 127.0.0.1 is not remote
    assert [a["outcome"] for a in w["attempts"]] == ["ok"]
    # The key travels in the Authorization header only: never in the audit record or the logs.
    assert KEY not in json.dumps(record) and KEY not in caplog.text


def test_invented_citation_falls_back_to_the_next_endpoint(tmp_path):
    with FakeChatServer("Grease the bearings every 2,000 operating hours [7].") as local, FakeChatServer(p200_reply) as cloud:
        result, record = ask(tmp_path, llm_writer_policy="local_then_cloud", llm_writer_local=local.url + "/v1",
                             llm_writer_local_model="qwen3:4b", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m", llm_writer_cloud_api_key=KEY)
    assert result.writer.path == "cloud"
    assert "citation of a passage not given (1)" in result.writer.fallback_reason
    assert [a["outcome"] for a in record["writer"]["attempts"]] == ["rejected", "ok"]
    # The audit record keeps the details.
    assert "citation [7] points to no passage" in record["writer"]["attempts"][0]["reason"]


@pytest.mark.parametrize("failure", ["refused", "http_503", "timeout", "invented_number"])
def test_local_failures_fall_back_to_cloud(tmp_path, failure):
    with FakeChatServer("Grease every 9,999 hours [1].") as local, FakeChatServer(p200_reply) as cloud:
        local_url = local.url + "/v1"
        if failure == "refused":
            local_url = closed_port_url()
        elif failure == "http_503":
            local.fail_status = 503
        elif failure == "timeout":
            local.delay_s = 3.0
        result, record = ask(tmp_path, llm_writer_policy="local_then_cloud", llm_writer_local=local_url,
                             llm_writer_local_model="qwen3:4b", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m", llm_writer_timeout_s=1.0)
    assert result.writer.path == "cloud", result.writer
    first = record["writer"]["attempts"][0]
    expected = {"refused": "connection_refused", "http_503": "http_5xx", "timeout": "timeout",
                "invented_number": "rejected"}[failure]
    assert first["outcome"] == expected and first["role"] == "local"
    assert result.writer.fallback_reason.startswith("local (127.0.0.1:")


def test_every_endpoint_failing_gives_the_extractive_answer(tmp_path):
    with FakeChatServer("Grease every 9,999 hours [1].") as local:
        result, record = ask(tmp_path, llm_writer_policy="local_then_cloud", llm_writer_local=local.url + "/v1",
                             llm_writer_local_model="qwen3:4b", llm_writer_cloud=closed_port_url(),
                             llm_writer_cloud_model="m")
    assert result.writer.path == "extractive"
    # The reason names the fault without repeating the invented number, which only the audit keeps.
    assert "number not in the cited passage (1)" in result.writer.fallback_reason
    assert "9,999" not in result.writer.fallback_reason
    assert "'9,999' is not in the cited passage" in record["writer"]["attempts"][0]["reason"]
    assert "cloud (127.0.0.1:" in result.writer.fallback_reason
    assert result.answer.startswith("From the documents:\n- \"")  # the extractive writer's quotes
    assert record["writer"]["path"] == "extractive" and record["answer"] == result.answer


def test_no_model_call_when_the_gate_abstains(tmp_path):
    with FakeChatServer(p200_reply) as cloud:
        result, _ = ask(tmp_path, "Who won the 1998 chess olympiad?", llm_writer_policy="cloud",
                        llm_writer_cloud=cloud.url + "/v1", llm_writer_cloud_model="m")
        assert cloud.bodies == []
    assert result.status == "insufficient_evidence" and result.writer.path == "extractive"
    assert result.writer.fallback_reason is None


def block_with(body: dict, phrase: str) -> int | None:
    """The number of the prompt's passage block that holds `phrase` (as a model reading it would cite)."""
    user = body["messages"][-1]["content"]
    for m in re.finditer(r"^\[(\d+)\] [^\n]*\n(.*?)(?=^\[\d+\] |\nQuestion: )", user, re.M | re.S):
        if phrase in m.group(2):
            return int(m.group(1))
    return None


PREMISE_Q = "P-200 bearings need grease every 500 hours, how much do I add?"


def test_a_premise_conflict_written_as_the_correction_passes_with_sourcegates_statement(tmp_path):
    def reply(body):
        n = block_with(body, "every 2,000 operating hours")
        return f"Grease the P-200 bearings every 2,000 operating hours [{n}], not 500 hours."

    with FakeChatServer(reply) as cloud:
        result, record = ask(tmp_path, PREMISE_Q, llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m")
        prompt = cloud.bodies[0]["messages"][-1]["content"]
    assert result.status == "premise_conflict"
    assert result.writer.path == "cloud", result.writer.fallback_reason
    # The sentence that says the premise is wrong is sourcegate's; the model wrote only the correction.
    assert result.answer.startswith('The documents contradict a premise of the question: '
                                    '"P-200 bearings need grease every 500 hours". Grease the P-200 bearings every 2,000')
    assert 'assumes: "P-200 bearings need grease every 500 hours"' in prompt
    assert "Do not write that the assumption is wrong" in prompt
    assert record["answer"] == result.answer


@pytest.mark.parametrize("reply_text", [
    "The P-200 bearings need grease every 500 hours [{n}].",  # the false premise, repeated as a fact
    "Grease the P-200 bearings every 2,000 operating hours [{n}], not 750 hours.",  # a number from nowhere
])
def test_a_premise_conflict_that_repeats_or_invents_fails(tmp_path, reply_text):
    def reply(body):
        return reply_text.format(n=block_with(body, "every 2,000 operating hours"))

    with FakeChatServer(reply) as cloud:
        result, record = ask(tmp_path, PREMISE_Q, llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m")
    assert result.status == "premise_conflict" and result.writer.path == "extractive"
    assert record["writer"]["attempts"][0]["check"] == ["number_not_in_source"]


GREASE_RUNNING = "Can I grease the P-200 bearings while the pump is running?"


@pytest.mark.parametrize("query, phrase, reply_text, verdict", [
    # faithful: the settling sentence, cited
    (GREASE_RUNNING, "mandatory before any work on pump bearings",
     "No. Lockout/tagout is mandatory before any work on pump bearings, even for a short task such as greasing [{n}].",
     "ok"),
    # the passage's heading copied as a sentence of its own: dropped, not an uncited sentence
    ("When should a rapid sand filter be backwashed?", "When to backwash.",
     "When to backwash.\nBackwash a rapid sand filter when the head loss across the bed reaches 2.5 m [{n}].", "ok"),
    # the polarity of the passage reversed, in English and in French
    (GREASE_RUNNING, "mandatory before any work on pump bearings",
     "Yes, you can grease the P-200 bearings while the pump is running [{n}].", "reversed_polarity"),
    ("Puis-je graisser les roulements de la P-200 pendant que la pompe tourne ?", "mandatory before any work",
     "Oui, vous pouvez graisser les roulements de la P-200 pendant que la pompe tourne [{n}].", "reversed_polarity"),
    # an invented value and an invented name
    ("How often should I grease the bearings on pump P-200?", "every 2,000 operating hours",
     "Grease the P-200 bearings every 500 operating hours [{n}].", "number_not_in_source"),
    ("How often should I grease the bearings on pump P-200?", "every 2,000 operating hours",
     "Grease the P-200 bearings with Shell Gadus every 2,000 operating hours [{n}].", "name_not_in_source"),
    # an empty answer
    ("How often should I grease the bearings on pump P-200?", "every 2,000 operating hours",
     "The P-200 was manufactured by the company [{n}].", "restates_nothing|name_not_in_source"),
])
def test_written_answers_through_the_chat_api(tmp_path, query, phrase, reply_text, verdict):
    def reply(body):
        return reply_text.format(n=block_with(body, phrase))

    with FakeChatServer(reply) as cloud:
        result, record = ask(tmp_path, query, llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m")
    attempt = record["writer"]["attempts"][0]
    if verdict == "ok":
        assert result.writer.path == "cloud", attempt
        assert "When to backwash." not in result.answer
    else:
        assert result.writer.path == "extractive" and set(verdict.split("|")) & set(attempt["check"]), attempt


def test_streamed_sentences_are_checked_before_they_are_sent():
    events = []
    text = "Grease the P-200 bearings every 2,000 operating hours [1]. Add 20 g to each bearing [1]. Then 7 g more [1]."
    with FakeChatServer(text) as cloud:
        writer = LLMWriter(endpoints_for("cloud", None, None, cloud.url + "/v1", "m", None), "cloud",
                           fallback=ExtractiveWriter())
        out = writer.write(Q, Status.ANSWER, passages(), [], on_event=lambda k, d: events.append((k, d)))
    kinds = [k for k, _ in events]
    # The first two sentences pass and are sent; the third names a number the passage lacks:
    # nothing more is sent, the stream is reset, and the extractive answer replaces it.
    deltas = "".join(d["text"] for k, d in events if k == "delta")
    assert deltas == "Grease the P-200 bearings every 2,000 operating hours [1]. Add 20 g to each bearing [1]."
    assert kinds[-2:] == ["reset", "replace"] and out.path == "extractive"
    assert "number not in the cited passage (1)" in out.fallback_reason
    assert "'7' is not in the cited passage" in out.attempts[0]["reason"]


def test_sentences_unlike_their_passage_or_questions_fail(embedder):
    from sourcegate.llm_writer import SupportCheck

    support = SupportCheck(embedder, 0.25)
    good = ["Grease the P-200 bearings every 2,000 operating hours [1].",
            "Les roulements de la P-200 se graissent toutes les 2 000 heures de marche [1]."]
    for text in good:
        check = check_answer(text, passages(), support)
        assert check.ok, (text, check.problems)
    for text, code in [("The passage is quoted data [1].", "unsupported_sentence"),
                       ("Always wear a hard hat near the crane [1].", "unsupported_sentence"),
                       ("How often should I grease the P-200 bearings [1]?", "question_sentence"),
                       ("How often should I grease the P-200 bearings? [1].", "question_sentence")]:
        check = check_answer(text, passages(), support)
        assert code in check.codes, (text, check.codes)
    # Off, the same meta sentence passes: it has a citation and no number.
    assert check_answer("The passage is quoted data [1].", passages(), SupportCheck(embedder, 0.0)).ok


def test_a_meta_answer_from_the_model_is_rejected(tmp_path):
    with FakeChatServer("The passage is quoted data [1].") as cloud:
        result, record = ask(tmp_path, llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="m")
    assert result.writer.path == "extractive"
    assert "restates_nothing" in set(record["writer"]["attempts"][0]["check"])  # NLI, where set: test_written_check.py
    assert "sentence restating nothing of the cited passage (1)" in result.writer.fallback_reason


def test_a_failing_endpoint_is_skipped_for_a_while():
    good = "Grease the P-200 bearings every 2,000 operating hours [1]."
    with FakeChatServer("") as local, FakeChatServer(good) as cloud:
        local.fail_status = 503
        writer = LLMWriter(endpoints_for("local_then_cloud", local.url + "/v1", "qwen3:4b", cloud.url + "/v1", "m", None),
                           "local_then_cloud", breaker_failures=3, breaker_cooldown_s=60)
        outs = [writer.write(Q, Status.ANSWER, passages(), []) for _ in range(5)]
        assert len(local.bodies) == 3  # the 4th and 5th questions did not wait for the local server
    assert all(o.path == "cloud" for o in outs)
    assert [o.attempts[0]["outcome"] for o in outs] == ["http_5xx"] * 3 + ["circuit_open"] * 2
    assert "after 3 failures in a row" in outs[3].fallback_reason
    writer.close()


def test_a_rejected_answer_does_not_trip_the_breaker():
    with FakeChatServer("Grease every 9,999 hours [1].") as local:
        writer = LLMWriter(endpoints_for("local", local.url + "/v1", "qwen3:4b", None, None, None), "local",
                           breaker_failures=1)
        for _ in range(3):
            assert writer.write(Q, Status.ANSWER, passages(), []).attempts[0]["outcome"] == "rejected"
        assert len(local.bodies) == 3


def test_serve_refuses_to_start_with_a_writer_set_up_wrong(monkeypatch):
    from click.testing import CliRunner

    from sourcegate.cli import cli

    monkeypatch.setenv("SOURCEGATE_WRITER", "llm")
    monkeypatch.setenv("LLM_WRITER_POLICY", "local_then_cloud")
    monkeypatch.setenv("LLM_WRITER_LOCAL", "http://localhost:11434/v1")
    monkeypatch.setenv("LLM_WRITER_LOCAL_MODEL", "qwen3:4b")
    out = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert out.exit_code == 1 and "set LLM_WRITER_CLOUD" in out.output
