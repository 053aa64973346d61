"""Mooncake replay: the loader, the ideal hit rate, and the replayed hit rate against it."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.workload.mooncake import load_mooncake
from inferasim.workload.stamped import ideal_hit_rate
from tests.conftest import shared_data

TRACE = ("mooncake", "conversation_trace.jsonl")


def test_loader_reads_the_whole_trace():
    trace = load_mooncake(shared_data(*TRACE))
    assert len(trace) == 12031
    assert trace.times_s[-1] == pytest.approx(3537.0, abs=1.0)
    assert int((trace.parent >= 0).sum()) == 3975  # implicit follow-ups (README figure)
    assert ideal_hit_rate(trace) == pytest.approx(0.374, abs=0.002)
    # an open-loop replay skips the links and reads the same requests in the same order
    unlinked = load_mooncake(shared_data(*TRACE), implicit_turns=False)
    assert (unlinked.parent < 0).all()
    assert np.array_equal(unlinked.order_s, trace.order_s)
    assert np.array_equal(unlinked.input_tokens, trace.input_tokens)


def _slice(tmp_path, n=1500):
    src = shared_data(*TRACE)
    path = tmp_path / "slice.jsonl"
    path.write_text("".join(src.read_text().splitlines(True)[:n]))
    return path


def _replay(path, *overrides):
    sc = load_scenario(None, ["workload.format=mooncake", f"workload.trace={path}",
                              "model.name=llama-3.1-8b", "gpu.name=b200",
                              "workload.rate_scale=0.25", *overrides])
    return replay_summary(simulate(sc))[1]


def test_unbounded_pool_replays_the_ideal_hit_rate(tmp_path):
    path = _slice(tmp_path)
    ideal = ideal_hit_rate(load_mooncake(path))
    summary = _replay(path, "engine.kv_pool_tokens=100000000")
    assert summary["requests_failed"] == 0
    # Equal but for requests that arrive while the blocks they would reuse are still being
    # prefilled by an earlier one (several requests share a stamp): a real race, not a loss.
    assert summary["prefix_hit_rate"] == pytest.approx(ideal, abs=2e-4)
    assert summary["prefix_hit_rate"] <= ideal


def test_bounded_pool_hit_rate_lower_and_monotonic(tmp_path):
    path = _slice(tmp_path)
    ideal = ideal_hit_rate(load_mooncake(path))
    rates = [_replay(path, f"engine.kv_pool_tokens={p}")["prefix_hit_rate"]
             for p in (150_000, 400_000, 1_500_000)]
    assert rates[0] < ideal
    assert all(np.diff(rates) >= 0), rates
    assert rates[-1] > rates[0]


def test_missing_trace_is_a_clear_error():
    sc = load_scenario(None, ["workload.format=mooncake", "workload.trace=/nope.jsonl"])
    with pytest.raises(ConfigError, match="trace not found") as err:
        simulate(sc)
    assert err.value.key == "workload.trace" and err.value.file == "--set"


# -- AIPerf's multi-turn Mooncake rows (session_id, delay) and rows without hash_ids ----------

def _write(tmp_path, rows, name="trace.jsonl"):
    import json

    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(path, fmt="mooncake", *overrides):
    sc = load_scenario(None, [f"workload.format={fmt}", f"workload.trace={path}",
                              "model.name=llama-3.1-8b", "gpu.name=h100",
                              "workload.duration_s=600", *overrides])
    result = simulate(sc)
    return {r.spec.session: r for r in result.requests}, result


def test_session_rows_replay_as_sessions_with_their_delays(tmp_path):
    rows = [{"session_id": "a", "timestamp": 0, "input_length": 2048, "output_length": 300,
             "hash_ids": [1, 2, 3, 4]},
            {"session_id": "b", "timestamp": 100, "input_length": 600, "output_length": 20,
             "hash_ids": [9, 10]},
            # a later turn timed by its delay: 1.5 s after turn 0 of "a" finished
            {"session_id": "a", "delay": 1500, "input_length": 2800, "output_length": 10,
             "hash_ids": [1, 2, 3, 4, 5, 6]},
            # a later turn with a stamp before the previous one finished: held until it has
            {"session_id": "b", "timestamp": 110, "input_length": 900, "output_length": 5,
             "hash_ids": [9, 10, 11]},
            # and the turn after it, stamped early too: held behind the held turn
            {"session_id": "b", "timestamp": 120, "input_length": 1200, "output_length": 5,
             "hash_ids": [9, 10, 11, 12]}]
    trace = load_mooncake(_write(tmp_path, rows))
    assert trace.explicit_sessions and len(trace) == 5
    reqs, _ = _run(_write(tmp_path, rows))
    assert len(reqs) == 5 and all(np.isfinite(r.finish) for r in reqs.values())
    by_len = {r.spec.prompt_tokens: r for r in reqs.values()}
    first, delayed = by_len[2048], by_len[2800]
    assert delayed.arrival == pytest.approx(first.finish + 1.5, abs=1e-9)
    b0, b1, b2 = by_len[600], by_len[900], by_len[1200]
    assert b1.arrival == pytest.approx(max(0.110, b0.finish), abs=1e-9) and b1.arrival > 0.110
    assert b2.arrival == pytest.approx(b1.finish, abs=1e-9) and b2.arrival >= b1.finish
    # the follow-up turns reuse their conversation's cached blocks
    assert delayed.cached_first == 4 * 512 and b2.cached_first == 512  # b1 held 1 full block


def test_rows_without_hash_ids_share_no_prefix(tmp_path):
    rows = [{"timestamp": 1000 * i, "input_length": 4096, "output_length": 8} for i in range(4)]
    trace = load_mooncake(_write(tmp_path, rows))
    assert ideal_hit_rate(trace) == 0.0
    assert len({tuple(trace.prompt_keys(i)) for i in range(4)}) == 4
    reqs, _ = _run(_write(tmp_path, rows), "mooncake", "engine.kv_pool_tokens=1000000")
    assert all(r.cached_first == 0 for r in reqs.values())


@pytest.mark.parametrize("row, expected", [
    ({"timestamp": 0, "delay": 5, "session_id": "s", "input_length": 10, "output_length": 1},
     "timestamp and delay cannot both be set"),
    ({"delay": 5, "input_length": 10, "output_length": 1}, "expected a timestamp"),
    ({"delay": 5, "session_id": "s", "input_length": 10, "output_length": 1},
     "first turn of session 's' gives a delay"),
    ({"timestamp": -3, "input_length": 10, "output_length": 1}, "timestamp must be a finite"),
    ({"timestamp": 0, "input_length": 10}, "not a Mooncake record"),
])
def test_bad_session_rows_name_the_line_and_the_rule(tmp_path, row, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        load_mooncake(_write(tmp_path, [row]))
    assert "trace.jsonl" in str(err.value)


# -- Bailian traces --------------------------------------------------------------------------

def test_bailian_chains_replay_as_sessions_with_16_token_blocks(tmp_path):
    from inferasim.workload.bailian import load_bailian

    rows = [{"chat_id": 159, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 521,
             "output_length": 200, "type": "text", "turn": 1, "hash_ids": list(range(33))},
            {"chat_id": 160, "parent_chat_id": 159, "timestamp": 1.05, "input_length": 800,
             "output_length": 30, "type": "text", "turn": 2,
             "hash_ids": list(range(33)) + [500 + k for k in range(17)]},
            # its parent is not in the file (a cut trace): a first turn
            {"chat_id": 7, "parent_chat_id": 3, "timestamp": 0.5, "input_length": 64,
             "output_length": 4, "type": "search", "turn": 2, "hash_ids": [900, 901, 902, 903]}]
    path = _write(tmp_path, rows, "bailian.jsonl")
    trace = load_bailian(path)
    assert trace.block_tokens == 16 and trace.explicit_sessions
    assert list(trace.parent) == [-1, -1, 1]  # stamp order: chat 7, 159, 160
    assert len(trace.prompt_keys(1)) == 521 // 16
    reqs, result = _run(path, "bailian")
    by_len = {r.spec.prompt_tokens: r for r in reqs.values()}
    first, follow = by_len[521], by_len[800]
    assert first.finish > 1.05 and follow.arrival == pytest.approx(first.finish, abs=1e-9)
    assert follow.cached_first == 32 * 16  # its conversation's full blocks, held in the cache
    assert by_len[64].arrival == pytest.approx(0.5)


@pytest.mark.parametrize("rows, expected", [
    ([{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 5,
       "output_length": 1}] * 2, "chat_id 1 appears twice"),
    ([{"chat_id": 1, "parent_chat_id": 2, "timestamp": 0, "input_length": 5, "output_length": 1},
      {"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 5,
       "output_length": 1}], "loops back"),
    ([{"chat_id": 1, "timestamp": 0, "input_length": 5}], "not a Bailian record"),
])
def test_bad_bailian_rows_are_refused(tmp_path, rows, expected):
    from inferasim.workload.bailian import load_bailian

    with pytest.raises(ConfigError, match=expected):
        load_bailian(_write(tmp_path, rows, "bailian.jsonl"))


def test_trace_stats_reads_both_stamped_formats(tmp_path):
    from inferasim.workload.trace_stats import trace_stats

    bailian = _write(tmp_path, [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 40,
         "output_length": 3, "hash_ids": [1, 2]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 2, "input_length": 80,
         "output_length": 3, "hash_ids": [1, 2, 3, 4, 5]}], "b.jsonl")
    stats = trace_stats(bailian)
    assert stats["format"] == "bailian" and stats["sessions"] == 1 and stats["requests"] == 2
    assert stats["block_tokens"] == [16]
    assert stats["ideal_prefix_reuse"] == pytest.approx(32 / 120)
    mc = _write(tmp_path, [
        {"session_id": "x", "timestamp": 0, "input_length": 600, "output_length": 3},
        {"session_id": "x", "delay": 2500, "input_length": 700, "output_length": 3}], "m.jsonl")
    stats = trace_stats(mc)
    assert stats["format"] == "mooncake" and stats["sessions"] == 1
    assert stats["think_s"]["n"] == 1 and stats["think_s"]["mean"] == pytest.approx(2.5)


def test_cli_runs_a_bailian_trace(tmp_path):
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    rows = [{"chat_id": 10 * s + k, "parent_chat_id": 10 * s + k - 1 if k else -1,
             "timestamp": 2.0 * s + 0.4 * k, "input_length": 300 + 200 * k, "output_length": 40,
             "turn": k + 1, "hash_ids": list(range(100 * s, 100 * s + (300 + 200 * k) // 16))}
            for s in range(20) for k in range(3)]
    path = _write(tmp_path, rows, "bailian.jsonl")
    result = CliRunner().invoke(cli, ["run", "--set", "workload.format=bailian",
                                      "--set", f"workload.trace={path}",
                                      "--set", "model.name=llama-3.1-8b",
                                      "--set", "gpu.name=h100", "--json"])
    assert result.exit_code == 0, result.output
    import json

    summary = json.loads(result.output)
    assert summary["requests_completed"] == 60
    assert summary["prefix_hit_rate"] > 0.3  # each follow-up reuses its conversation
    bad = _write(tmp_path, ["not a row"], "bad.jsonl")
    result = CliRunner().invoke(cli, ["run", "--set", "workload.format=bailian",
                                      "--set", f"workload.trace={bad}"])
    assert result.exit_code == 2 and "bad.jsonl" in result.output
    assert "expected a Bailian record" in result.output
