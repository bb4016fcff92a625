"""Throughput of LLM household decisions against a slow OpenAI-compatible endpoint.

A FakeOpenAIServer on 127.0.0.1 answers every chat request after ``--latency`` seconds (200 ms
by default, a stand-in for a model's generation time). Every household decides with the LLM
(``decision.llm_share: 1``) in ``live`` mode with ``max_concurrency`` requests in flight, so the
best possible rate is ``max_concurrency / latency`` decisions per second (80/s by default); the
target is 80 % of that (64/s).

Two figures per configuration:

``model``
    Wall time of ``model.step()`` for each simulated year (every year has a decision phase), with
    the audit trail written at level ``standard``; decisions per second = LLM decisions that year
    / step time. Nothing is subtracted: hazard, memory, audit and the model's own bookkeeping
    are part of it.
``decide_all``
    ``LLMPolicy.decide_all`` alone for one batch of requests (one per household, built from the
    households' year-1 state and memories).

The loopback server is :class:`simulation.decisions.llm.testing.FakeOpenAIServer`; it adds the
configured latency to every reply and nothing else (its sockets send without Nagle's delay).

Usage:
    python benchmarks/bench_llm.py [--households 400] [--years 2] [--latency 0.2]
        [--concurrency 16]
        [--json benchmarks/results/llm.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_scaling import machine, machine_line

from simulation.config import load_config
from simulation.decisions.llm import LLMPolicy, LLMRequest
from simulation.decisions.llm.testing import FakeOpenAIServer
from simulation.runner import build_model, run_simulation

__all__ = ["bench_decide_all", "bench_model", "main", "overrides", "run_variant"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "llm.json"
VARIANTS = ("loopback",)
#: Share of the ideal rate (max_concurrency / latency) the decision phase should reach.
TARGET_SHARE = 0.8


def overrides(args: argparse.Namespace, base_url: str, cache: Path) -> list[str]:
    return [
        f"households.count={args.households}",
        f"years={args.years}",
        "decision.policy=llm",
        "decision.llm_share=1.0",
        f"decision.llm.base_url={base_url}",
        "decision.llm.mode=live",
        f"decision.llm.cache={cache}",  # live mode never creates it
        f"decision.llm.max_concurrency={args.concurrency}",
        "decision.llm.timeout_s=30",
        "decision.llm.retries=2",
        "audit.level=standard",
        "audit.timestamps=true",
    ]


def bench_model(args: argparse.Namespace, base_url: str, work: Path) -> dict[str, Any]:
    """Run the whole model; time each year's ``model.step()``."""
    config, base = load_config(DEFAULT_CONFIG, overrides(args, base_url, work / "unused.sqlite"))
    model = build_model(config, base)
    wrapped = model.step  # Mesa's step wrapper (counts steps, then calls the model's step)
    years: list[dict[str, Any]] = []

    def timed_step() -> None:
        started = time.perf_counter()
        wrapped()
        elapsed = time.perf_counter() - started
        decisions = sum(
            1
            for h in model.households
            if h.last_decision is not None
            and h.last_decision.year == model.steps
            and h.last_decision.via_llm
        )
        years.append(
            {
                "year": model.steps,
                "step_s": round(elapsed, 4),
                "llm_decisions": decisions,
                "decisions_per_s": round(decisions / elapsed, 2),
            }
        )

    model.step = timed_step
    started = time.perf_counter()
    result = run_simulation(config, base, work / "runs", progress=False, model=model)
    total = time.perf_counter() - started
    decisions = sum(y["llm_decisions"] for y in years)
    step_s = sum(y["step_s"] for y in years)
    invalid = int(result.metrics["invalid_proposals"].sum())
    return {
        "years": years,
        "llm_decisions": decisions,
        "step_s": round(step_s, 3),
        "decisions_per_s": round(decisions / step_s, 2),
        "run_s": round(total, 3),
        "invalid_proposals": invalid,
    }


def bench_decide_all(args: argparse.Namespace, base_url: str, work: Path) -> dict[str, Any]:
    """``LLMPolicy.decide_all`` alone, for one request per household (year-1 state)."""
    config, base = load_config(DEFAULT_CONFIG, overrides(args, base_url, work / "unused.sqlite"))
    model = build_model(config, base)
    model.llm.close()  # the model's own policy is not used here
    top_k = config.memory.retrieval.top_k
    requests = []
    for household in model.households:
        state = household.state
        costs = model.costs_for(state)
        options, _ = model.registry.options(state, costs)
        requests.append(
            LLMRequest(
                state.agent_id,
                1,
                state,
                household.memory.retrieve_scored(top_k=top_k, current_year=1),
                options,
                costs,
                {
                    "year": 1,
                    "subsidy_share": model.government.subsidy_share,
                    "premium_rate": model.insurer.rate,
                },
            )
        )
    policy = LLMPolicy(config.decision.llm, base, config.seed, model.registry)
    try:
        started = time.perf_counter()
        outcomes = policy.decide_all(requests)
        elapsed = time.perf_counter() - started
    finally:
        policy.close()
    latencies = sorted(c.latency_s for o in outcomes for c in o.calls)
    failed = sum(o.fallback for o in outcomes)
    return {
        "requests": len(requests),
        "wall_s": round(elapsed, 3),
        "decisions_per_s": round(len(requests) / elapsed, 2),
        "fallbacks": failed,
        "call_latency_s": {
            "mean": round(statistics.fmean(latencies), 4),
            "p50": round(latencies[len(latencies) // 2], 4),
            "p95": round(latencies[int(len(latencies) * 0.95)], 4),
            "max": round(latencies[-1], 4),
        },
    }


def run_variant(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    with (
        FakeOpenAIServer(latency_s=args.latency) as server,
        tempfile.TemporaryDirectory(prefix="bench_llm_") as tmp,
    ):
        work = Path(tmp)
        model = bench_model(args, server.base_url, work)
        sent_model = len(server.requests)
        batch = bench_decide_all(args, server.base_url, work)
        sent_batch = len(server.requests) - sent_model
    model["http_requests"] = sent_model
    batch["http_requests"] = sent_batch
    return {"model": model, "decide_all": batch}


def main() -> int:
    """Run each variant, print the table and write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--households", type=int, default=400)
    parser.add_argument("--years", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency per call, s")
    parser.add_argument("--concurrency", type=int, default=16, help="decision.llm.max_concurrency")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, from: {', '.join(VARIANTS)}",
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    args = parser.parse_args()
    if min(args.households, args.years, args.concurrency) < 1 or not args.latency > 0:
        parser.error(
            "--households, --years and --concurrency must be at least 1 and --latency above 0, "
            f"got {args.households}, {args.years}, {args.concurrency} and {args.latency}"
        )
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(unknown)}")
    os.environ.pop("OPENAI_API_KEY", None)  # the fake server needs no key; send none

    ideal = args.concurrency / args.latency
    target = TARGET_SHARE * ideal
    results: dict[str, Any] = {
        "benchmark": "llm",
        "households": args.households,
        "years": args.years,
        "server_latency_s": args.latency,
        "max_concurrency": args.concurrency,
        "ideal_decisions_per_s": round(ideal, 2),
        "target_decisions_per_s": round(target, 2),
        "machine": machine(),
        "variants": {},
    }
    for variant in variants:
        print(f"running {variant} ...", file=sys.stderr, flush=True)
        results["variants"][variant] = run_variant(args, variant)

    print(f"\n{machine_line(results['machine'])}")
    print(
        f"LLM decisions: {args.households} households, server latency {args.latency * 1000:.0f}"
        f" ms, max_concurrency {args.concurrency}: ideal {ideal:.1f}/s, target {target:.1f}/s"
    )
    header = f"{'variant':<15} {'measure':<22} {'decisions':>9} {'wall s':>8} {'dec/s':>8}  target"
    print(header)
    print("-" * len(header))
    for variant, figures in results["variants"].items():
        rows = [
            (
                f"model.step() year {y['year']}",
                y["llm_decisions"],
                y["step_s"],
                y["decisions_per_s"],
            )
            for y in figures["model"]["years"]
        ]
        model = figures["model"]
        rows.append(
            ("model.step() all", model["llm_decisions"], model["step_s"], model["decisions_per_s"])
        )
        batch = figures["decide_all"]
        rows.append(
            ("decide_all batch", batch["requests"], batch["wall_s"], batch["decisions_per_s"])
        )
        for measure, decisions, wall, rate in rows:
            verdict = "ok" if rate >= target else "MISSED"
            print(
                f"{variant:<15} {measure:<22} {decisions:>9} {wall:>8.2f} {rate:>8.1f}  {verdict}"
            )
        lat = batch["call_latency_s"]
        print(
            f"{'':<15} call latency (decide_all): mean {lat['mean'] * 1000:.0f} ms, "
            f"p50 {lat['p50'] * 1000:.0f} ms, p95 {lat['p95'] * 1000:.0f} ms; "
            f"fallbacks {batch['fallbacks']}, invalid proposals {model['invalid_proposals']}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
