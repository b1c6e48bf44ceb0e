import json
import threading

from collector.matrix.command import summarize_command_result
from collector.matrix.results import percentile
from collector.matrix.spec import ToolConversationSpec
from collector.matrix.toolcalls import check_tool_calls
from collector.matrix.workload import ToolConversation
from tests.collector.matrix.fake_openai import FakeChatServer


def _params(**overrides):
    values = {
        "seed": 7,
        "sessions": 1,
        "target_prompt_tokens": 1500,
        "max_turns": 40,
        "tool_result_bytes": 512,
        "request_timeout_s": 5,
    }
    return ToolConversationSpec(**{**values, **overrides})


def _run(server, path, cancel=None, fsync=None, **overrides):
    kwargs = {"fsync": fsync} if fsync else {}
    conv = ToolConversation(
        _params(**overrides),
        base_url=server.url,
        model="m",
        jsonl_path=path,
        cancel=cancel,
        tags={"run_id": 1, "profile": "A"},
        **kwargs,
    )
    return conv.run()


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_growing_conversation_writes_one_fsynced_record_per_request(tmp_path):
    path = tmp_path / "requests.jsonl"
    synced = []
    with FakeChatServer(malformed_step=3) as server:
        result = _run(server, path, fsync=lambda fd: synced.append(server.requests))
        bodies = server.bodies
    records = _records(path)
    assert len(records) == len(bodies) == result.requests
    # The k-th fsync happened after the k-th request and before the next one.
    assert synced == list(range(1, len(records) + 1))
    assert result.stop_reasons == {"0": "target_prompt_tokens"}
    assert result.outcome == "ok"
    prompts = [r["prompt_tokens"] for r in records]
    assert prompts == sorted(prompts) and prompts[-1] >= 1500 > prompts[-2]
    assert result.max_prompt_tokens == prompts[-1]
    # Step 3 was malformed once and re-asked.
    bad = [r for r in records if not r["tool_check"]["valid"]]
    assert [(r["turn"], r["attempt"]) for r in bad] == [(3, 1)]
    assert bad[0]["tool_check"]["problems"] == ["arguments not a JSON object"]
    assert [r["attempt"] for r in records if r["turn"] == 3] == [1, 2]
    assert result.malformed_tool_calls == 1
    assert result.errors == result.timeouts == 0
    assert records[0]["run_id"] == 1 and records[0]["profile"] == "A"
    assert records[0]["status"] == 200 and records[0]["finish_reason"] == "tool_calls"
    # History keeps the assistant tool call and a tool result of exactly tool_result_bytes.
    last = bodies[-1]["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert tool_msgs and all(len(m["content"]) == 512 for m in tool_msgs)
    calls = [m for m in last if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["tool_calls"][0]["id"] for c in calls] == [m["tool_call_id"] for m in tool_msgs]
    assert "Your previous reply was not a valid tool call" in json.dumps(last)
    assert result.latency_p95_s is not None and result.over_30s == 0


def test_same_seed_same_requests_other_seed_other_requests(tmp_path):
    def bodies(seed, name):
        with FakeChatServer() as server:
            _run(server, tmp_path / name, seed=seed, sessions=2, target_prompt_tokens=800)
            return sorted(json.dumps(b, sort_keys=True) for b in server.bodies)

    first = bodies(7, "a.jsonl")
    assert first == bodies(7, "b.jsonl")
    assert first != bodies(8, "c.jsonl")
    sessions = {r["session"] for r in _records(tmp_path / "a.jsonl")}
    assert sessions == {0, 1}


def test_timeout_is_recorded_and_bounded(tmp_path):
    path = tmp_path / "r.jsonl"
    with FakeChatServer(slow_step=2, slow_s=3) as server:
        result = _run(server, path, request_timeout_s=0.3, max_error_retries=1)
    records = _records(path)
    timed_out = [r for r in records if r["timeout"]]
    assert [(r["turn"], r["attempt"]) for r in timed_out] == [(2, 1), (2, 2)]
    assert timed_out[0]["error"] == "timeout" and timed_out[0]["status"] is None
    assert result.timeouts == 2 and result.errors == 2
    assert result.stop_reasons == {"0": "errors"} and result.outcome == "failed"


def test_cancel_mid_request(tmp_path):
    path = tmp_path / "r.jsonl"
    cancel = threading.Event()
    with FakeChatServer(block_step=2) as server:
        threading.Thread(target=lambda: server.reached.wait(10) and cancel.set()).start()
        result = _run(server, path, cancel=cancel)
    records = _records(path)
    assert [r["turn"] for r in records] == [1, 2]
    assert records[-1]["cancelled"] is True and records[-1]["error"] is None
    assert result.outcome == "cancelled" and result.stop_reasons == {"0": "cancelled"}
    assert result.errors == 0 and result.requests == 2


def test_tool_call_checks():
    ok = {
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a"}'},
            }
        ]
    }
    assert check_tool_calls(ok)["valid"] is True
    bad = {
        "tool_calls": [
            {"type": "function", "function": {"name": "rm_rf", "arguments": '{"bad key": 1}'}}
        ]
    }
    check = check_tool_calls(bad)
    assert check["valid"] is False
    assert check["problems"] == [
        "tool call id missing",
        "tool name not declared",
        "argument keys not identifiers",
    ]
    listed = check_tool_calls(
        {"tool_calls": [{"id": "x", "function": {"name": "read_file", "arguments": "[1]"}}]}
    )
    assert listed["problems"] == ["arguments not a JSON object"]
    missing = check_tool_calls(
        {"tool_calls": [{"id": "x", "function": {"name": "read_file", "arguments": "{}"}}]}
    )
    assert missing["problems"] == ["required arguments missing"]
    assert check_tool_calls({"content": "prose"})["problems"] == ["no tool call"]


def test_percentile_is_nearest_rank():
    assert percentile([], 0.95) is None
    assert percentile([float(i) for i in range(1, 21)], 0.95) == 19.0
    assert percentile([3.0], 0.95) == 3.0


def test_command_summary():
    out = summarize_command_result(3, 12.3456, "x" * 100 + "tail", name="agent", tail_bytes=4)
    assert out["outcome"] == "failed" and out["exit_status"] == 3
    assert out["output_tail"] == "tail" and out["output_bytes"] == 104
    assert out["duration_s"] == 12.346 and out["kind"] == "command"
    assert summarize_command_result(0, 1, b"ok")["outcome"] == "ok"
    assert summarize_command_result(None, 1, "", timed_out=True)["outcome"] == "timeout"
    assert summarize_command_result(None, 1, "", cancelled=True)["outcome"] == "cancelled"


def test_a_soak_runs_for_its_duration_in_fresh_conversations(tmp_path):
    path = tmp_path / "requests.jsonl"
    with FakeChatServer() as server:
        result = _run(server, path, target_prompt_tokens=600, duration_s=1.5, sessions=2)
    records = _records(path)
    assert result.outcome == "ok"
    assert result.stop_reasons == {"0": "duration", "1": "duration"}
    conversations = {(r["session"], r["conversation"]) for r in records}
    assert result.conversations == len(conversations) > 2
    # Each fresh conversation starts again at turn 1 with a short prompt.
    firsts = [r for r in records if r["turn"] == 1]
    assert len(firsts) == len(conversations)
    assert max(r["prompt_tokens"] for r in firsts) < 600 <= result.max_prompt_tokens
    # Each session counts its conversations from 0 (conversation 0 of a soak is the plain
    # conversation; how many fit in 1.5 s per session depends on the machine's load).
    for session in (0, 1):
        numbers = sorted({r["conversation"] for r in records if r["session"] == session})
        assert numbers == list(range(len(numbers))) and numbers, session


def test_requests_in_flight_when_the_host_froze_are_cut_not_errors(tmp_path):
    path = tmp_path / "requests.jsonl"
    halt, freeze = threading.Event(), threading.Event()
    with FakeChatServer(block_step=2) as server:
        conv = ToolConversation(
            _params(),
            base_url=server.url,
            model="m",
            jsonl_path=path,
            cancel=halt,
            freeze=freeze,
            tags={"run_id": 1, "profile": "A"},
        )
        box = {}
        thread = threading.Thread(target=lambda: box.update(result=conv.run()))
        thread.start()
        assert server.reached.wait(10)
        freeze.set()
        halt.set()
        thread.join(10)
        server.release.set()
    result = box["result"]
    assert (result.outcome, result.errors, result.cut_by_freeze) == ("host_froze", 0, 1)
    last = _records(path)[-1]
    assert (last["cut_by_freeze"], last["cancelled"], last["error"]) == (True, True, None)
