"""Synthetic agentic-coding session trees in the ``sessions`` format (``inferasim trace synth``).

Fitted to the AgentX corpus (../shared/data/agentx-traces, 710 Claude Code traces; figures
from its README and requests_flat.csv). Per-turn quantities are split log-normals (median,
log-sd below / above the median), fitted to the corpus's percentiles:

==========================  ======================================  ========================
quantity                    corpus                                  generator
==========================  ======================================  ========================
root requests per session   p50 45, mean 69                         lognormal 45 / 1.0, <=400
first prompt                p10 15 k, p50 24 k, p75 104 k (bimodal)  65 %: lognormal 24 k / 0.3
                                                                    35 %: lognormal 150 k / 0.6
  shared opening prefix     tool 12.4 k + system 2.9 k tokens       ``root`` prefix 15.3 k
prompt growth per turn      p10 192, p50 655, p90 3.5 k, p99 16 k   800 / (1.0, 1.35) [1]
compaction                  0.6 % of turns; from p50 150 k          past 160 k or 0.3 %/turn,
                                                                    to lognormal 60 k / 0.5 [1]
output                      p10 105, p50 216, p90 899, p99 3.7 k    216 / (0.56, 1.1)
think time                  p10 4, p50 10, p90 170, p99 3040 s      10 / (0.7, 2.2)
server time (api)           p50 6.1 s, p90 18 s                     lognormal 6.1 / 0.65
subagent sessions           17 / 710 traces                         ``subagent_frac`` 2.4 %
fan-outs per such session   38 groups / 17; sizes 1:21 2:9 3:8       1 + Poisson(1.2); same mix
subagent requests           10.7 each; input p50 45 k, out p50 235; lognormal 9 / 0.5 turns;
                            think p50 4 s; fresh context            first 11.7 k (8.4 k shared
                                                                    ``sub`` prefix), growth
                                                                    lognormal 3.2 k / 1.0
spawn after parent end      0.2-1.0 s                               uniform 0.2-1.0 s
join after last completion  8-156 s (deciles)                       lognormal 30 s / 1.0
background (async) agents   4 / 63                                  6 %
==========================  ======================================  ========================

[1] Growth and compaction target are tuned (from 655 and 39 k) so that the root prompt
distribution matches the corpus's traces that fit a 196,608-token window (540 of 710, the
ones a MiniMax-M2.5 replay keeps): p10 / p50 / p90 / p99 = 40 k / 92 k / 140 k / 162 k
(generator, 400 sessions: 38 k / 90 k / 146 k / 161 k). The unfiltered corpus's root input
(p50 105 k, p90 236 k) needs a window past 500 k.

Prompts and outputs are capped to fit ``max_context`` (MiniMax-M2.5: 196,608 tokens).
"""

from __future__ import annotations

import attrs
import numpy as np

from inferasim.workload.sessions_format import write_sessions


@attrs.frozen
class AgenticSynthSpec:
    block_tokens: int = 64
    root_turns_median: float = 45.0
    root_turns_sigma: float = 1.0
    root_turns_max: int = 400
    # First prompts are bimodal: fresh sessions, and resumed ones that open on a long context.
    first_prompt_median: float = 24000.0
    first_prompt_sigma: float = 0.3
    resumed_frac: float = 0.35
    resumed_prompt_median: float = 150000.0
    resumed_prompt_sigma: float = 0.6
    root_prefix_tokens: int = 15300
    # Split log-normals: (sigma below the median, sigma above it).
    growth_median: float = 800.0
    growth_sigma: tuple[float, float] = (1.0, 1.35)
    compact_above: int = 160000
    compact_prob: float = 0.003
    compact_to_median: float = 60000.0
    compact_to_sigma: float = 0.5
    output_median: float = 216.0
    output_sigma: tuple[float, float] = (0.56, 1.1)
    think_median_s: float = 10.0
    think_sigma: tuple[float, float] = (0.7, 2.2)
    api_median_s: float = 6.1
    api_sigma: float = 0.65
    subagent_frac: float = 17 / 710
    fanout_extra_mean: float = 1.2
    fanout_sizes: tuple[float, float, float] = (21 / 38, 9 / 38, 8 / 38)
    sub_turns_median: float = 9.0
    sub_turns_sigma: float = 0.5
    sub_first_prompt: float = 11700.0
    sub_prefix_tokens: int = 8400
    sub_growth_median: float = 3200.0
    sub_growth_sigma: float = 1.0
    sub_output_median: float = 235.0
    sub_output_sigma: float = 0.8
    sub_think_median_s: float = 4.0
    sub_think_sigma: float = 1.0
    join_gap_median_s: float = 30.0
    join_gap_sigma: float = 1.0
    background_prob: float = 4 / 63
    max_context: int = 196608


class AgenticSynth:
    def __init__(self, spec: AgenticSynthSpec, rng: np.random.Generator):
        self.spec, self.rng = spec, rng

    def _ln(self, median: float, sigma) -> float:
        z = self.rng.standard_normal()
        if isinstance(sigma, tuple):
            sigma = sigma[0] if z < 0 else sigma[1]
        return float(median * np.exp(sigma * z))

    def _tokens(self, median: float, sigma, lo: int = 1) -> int:
        return max(lo, int(round(self._ln(median, sigma))))

    def _secs(self, median: float, sigma) -> float:
        return round(self._ln(median, sigma), 1)

    def _output(self, prompt: int, median: float, sigma) -> int:
        return max(1, min(self._tokens(median, sigma), self.spec.max_context - prompt))

    def session(self, sid: str) -> dict:
        s, rng = self.spec, self.rng
        n_root = min(s.root_turns_max, max(1, int(round(self._ln(s.root_turns_median,
                                                                   s.root_turns_sigma)))))
        limit = s.max_context - 4096
        turns: list[dict] = []
        t = 0.0
        if rng.random() < s.resumed_frac:
            first = self._tokens(s.resumed_prompt_median, s.resumed_prompt_sigma)
        else:
            first = self._tokens(s.first_prompt_median, s.first_prompt_sigma)
        prompt = min(limit, max(s.root_prefix_tokens + s.block_tokens, first))
        # Where subagent fan-outs go (after which root turn).
        fanouts: dict[int, int] = {}
        if n_root >= 3 and rng.random() < s.subagent_frac:
            for _ in range(1 + rng.poisson(s.fanout_extra_mean)):
                at = int(rng.integers(0, n_root - 1))
                fanouts[at] = 1 + int(rng.choice(3, p=np.asarray(s.fanout_sizes)))
        n_agents = 0
        pending_join: list[tuple[str, float]] = []   # (stream, recorded end)
        prev_end = 0.0
        for k in range(n_root):
            turn: dict = {"id": f"r{k}"}
            if k == 0:
                turn["prefix"] = "root"
                gap = think = 0.0
            else:
                compact = prompt > s.compact_above or rng.random() < s.compact_prob
                if compact:
                    prompt = max(s.root_prefix_tokens + s.block_tokens,
                                 min(limit, self._tokens(s.compact_to_median, s.compact_to_sigma)))
                    turn["keep"] = s.root_prefix_tokens
                else:
                    prompt = min(limit, prompt + self._tokens(s.growth_median, s.growth_sigma))
                think = self._secs(s.think_median_s, s.think_sigma)
                gap = think
                if pending_join:
                    turn["joins"] = [name for name, _ in pending_join]
                    last = max(end for _, end in pending_join)
                    gap = self._secs(s.join_gap_median_s, s.join_gap_sigma)
                    think = round(max(last, prev_end) + gap - prev_end, 1)
                    pending_join = []
                    t = max(last, prev_end) + gap
                else:
                    t = prev_end + think
            api = self._secs(s.api_median_s, s.api_sigma)
            out = self._output(prompt, s.output_median, s.output_sigma)
            turn.update({"in": prompt, "out": out, "t": round(t, 1), "api": api})
            if k > 0:
                turn["think"] = think
                if gap != think:
                    turn["gap"] = gap
            turns.append(turn)
            prev_end = t + api
            for _ in range(fanouts.get(k, 0)):
                n_agents += 1
                name = f"agent-{n_agents}"
                end = self._subagent(turns, name, f"r{k}", prev_end)
                if k + 1 < n_root and rng.random() >= s.background_prob:
                    pending_join.append((name, end))
            t = prev_end
        out = {"session": sid, "block_tokens": s.block_tokens,
               "prefixes": {"root": s.root_prefix_tokens}, "turns": turns}
        if n_agents:
            out["prefixes"]["sub"] = s.sub_prefix_tokens
        return out

    def _subagent(self, turns: list[dict], name: str, parent: str, parent_end: float) -> float:
        s = self.spec
        n = max(1, int(round(self._ln(s.sub_turns_median, s.sub_turns_sigma))))
        limit = s.max_context - 4096
        start = parent_end + round(float(self.rng.uniform(0.2, 1.0)), 1)
        t = start
        prompt = max(s.sub_prefix_tokens + s.block_tokens,
                     self._tokens(s.sub_first_prompt, 0.3))
        end = start
        for k in range(n):
            turn: dict = {"stream": name}
            if k == 0:
                turn.update({"parent": parent, "prefix": "sub", "gap": round(start - parent_end, 1)})
            else:
                prompt = min(limit, prompt + self._tokens(s.sub_growth_median, s.sub_growth_sigma))
                think = self._secs(s.sub_think_median_s, s.sub_think_sigma)
                turn["think"] = think
                t = end + think
            api = self._secs(s.api_median_s * 0.5, s.api_sigma)
            turn.update({"in": prompt, "out": self._output(prompt, s.sub_output_median,
                                                          s.sub_output_sigma),
                         "t": round(t, 1), "api": api})
            turns.append(turn)
            end = t + api
        return end


def synth_sessions(n: int, seed: int, spec: AgenticSynthSpec | None = None) -> list[dict]:
    gen = AgenticSynth(spec or AgenticSynthSpec(), np.random.default_rng(seed))
    return [gen.session(f"syn-{i:04d}") for i in range(n)]


def write_synth(path, n: int, seed: int, spec: AgenticSynthSpec | None = None) -> int:
    sessions = synth_sessions(n, seed, spec)
    write_sessions(path, sessions)
    return sum(len(x["turns"]) for x in sessions)
