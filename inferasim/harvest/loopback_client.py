"""A minimal closed-loop streaming client for smoke-testing ``harvest run`` on loopback.

It is NOT a benchmark client: it speaks ``/v1/completions`` with ``stream: true`` to a server on
127.0.0.1 only, counts the whitespace-separated words of each streamed chunk as its tokens (a chunk may carry
several: a coalescing stream), and writes a result JSON in the
``vllm bench serve --save-result`` schema (``{mean,median,p99}_{ttft,tpot,itl,e2el}_ms``) so
``harvest parse`` reads it like the real client's. Bounded: a fixed number of prompts, a timeout
per request. Exit status 1 when no request completed.

    python -m inferasim.harvest.loopback_client --base-url http://127.0.0.1:8000 --model M \
        --random-input-len 128 --random-output-len 16 --num-prompts 8 --max-concurrency 2 \
        --seed 7 --result-dir results --result-filename probe.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo")


def _one(host: str, port: int, model: str, prompt: str, max_tokens: int, timeout: float
         ) -> dict[str, Any]:
    start = time.perf_counter()
    stamps: list[float] = []
    tokens = 0
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                           "stream": True, "ignore_eos": True})
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"ok": False, "error": f"HTTP {resp.status}: {resp.read(200)!r}"}
        for _ in range(max_tokens + 8):  # bounded: the stream ends with [DONE]
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            chunk = json.loads(payload)
            text = chunk["choices"][0].get("text") if chunk.get("choices") else None
            if text:
                stamps.append(time.perf_counter())
                tokens += max(1, len(text.split()))
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        conn.close()
    if not stamps:
        return {"ok": False, "error": "no tokens streamed"}
    end = stamps[-1]
    ttft = stamps[0] - start
    itls = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    tpot = (end - start - ttft) / (tokens - 1) if tokens > 1 else 0.0
    return {"ok": True, "ttft": ttft, "itls": itls, "tpot": tpot, "e2el": end - start,
            "output_len": tokens}


def _stats(prefix: str, values: list[float]) -> dict[str, float]:
    if not values:
        return {f"{s}_{prefix}_ms": 0.0 for s in ("mean", "median", "p99")}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {f"mean_{prefix}_ms": statistics.fmean(values) * 1e3,
            f"median_{prefix}_ms": statistics.median(values) * 1e3, f"p99_{prefix}_ms": p99 * 1e3}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--random-input-len", type=int, required=True)
    p.add_argument("--random-output-len", type=int, required=True)
    p.add_argument("--num-prompts", type=int, required=True)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--result-dir", default=".")
    p.add_argument("--result-filename", required=True)
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--trust-remote-code", action="store_true")
    args = p.parse_args(argv)
    url = urlparse(args.base_url)
    if url.hostname not in LOOPBACK_HOSTS:
        p.error(f"loopback only: {args.base_url}")
    if not 1 <= args.num_prompts <= 10_000 or not 1 <= args.max_concurrency <= 1024:
        p.error("num-prompts must be 1..10000 and max-concurrency 1..1024")
    rng = random.Random(args.seed)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(args.random_input_len))
               for _ in range(args.num_prompts)]
    begin = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.max_concurrency) as pool:
        results = list(pool.map(lambda pr: _one(url.hostname, url.port or 80, args.model, pr,
                                                args.random_output_len, args.request_timeout),
                                prompts))
    duration = time.perf_counter() - begin
    done = [r for r in results if r["ok"]]
    out_tokens = sum(r["output_len"] for r in done)
    in_tokens = args.random_input_len * len(done)
    data: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "loopback", "backend": "loopback", "label": "inferasim loopback client",
        "model_id": args.model, "tokenizer_id": args.model, "num_prompts": args.num_prompts,
        "request_rate": "inf", "max_concurrency": args.max_concurrency, "seed": args.seed,
        "duration": duration, "completed": len(done), "failed": len(results) - len(done),
        "total_input_tokens": in_tokens, "total_output_tokens": out_tokens,
        "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": out_tokens / duration if duration else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration else 0.0,
        "errors": [r["error"] for r in results if not r["ok"]][:20],
    }
    data.update(_stats("ttft", [r["ttft"] for r in done]))
    data.update(_stats("tpot", [r["tpot"] for r in done if r["output_len"] > 1]))
    data.update(_stats("itl", [x for r in done for x in r["itls"]]))
    data.update(_stats("e2el", [r["e2el"] for r in done]))
    out = Path(args.result_dir) / args.result_filename
    out.parent.mkdir(parents=True, exist_ok=True)
    # One line for a .jsonl result (SGLang's bench_serving format), indented JSON otherwise.
    out.write_text(json.dumps(data, indent=None if out.suffix == ".jsonl" else 1) + "\n")
    print(f"completed {len(done)}/{len(results)} -> {out}")
    return 0 if done else 1


def probe_argv(probe: dict[str, Any], *, base_url: str, model: str, python: str) -> list[str]:
    """This client's command for one plan probe (same lengths, load, seed and result file)."""
    result_dir, _, name = probe["result"].rpartition("/")
    return [python, "-m", "inferasim.harvest.loopback_client", "--base-url", base_url,
            "--model", model, "--random-input-len", str(probe["isl"]),
            "--random-output-len", str(probe["osl"]), "--num-prompts", str(probe["num_prompts"]),
            "--max-concurrency", str(probe["concurrency"]), "--seed", str(probe["seed"]),
            "--result-dir", result_dir or ".", "--result-filename", name]


if __name__ == "__main__":
    sys.exit(main())
