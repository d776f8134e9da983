#!/usr/bin/env python3
"""Prompt lookup (no draft model) on a code-editing-like prompt, vs plain decoding.

A synthetic random-weight model has no reason to repeat its input, so the
prompt is built to make its greedy continuation do so: decode plain from a
seed prompt P to get O, then use P + O + P as the prompt. A model that follows
its own earlier path then re-emits O, as an editor's answer re-emits the code
it was given. The script reports how much of the measured output is really
reused from the prompt (the share of output tokens that continue a span of
at least 4 tokens already in the context, and the longest such span).

Plain and lookup configurations run interleaved REPEAT times on the same CPUs
(background load hits all alike); the table gives medians and min-max. Greedy
decoding: every configuration must produce the same tokens, which is checked.

usage: spec_lookup.py ENGINE TARGET [--n 128] [--repeat 3] [--k 8,16] [--lookup 8]
                      [--cpus 0-1] [--seed-prompt TEXT]
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(engine, args):
    out = subprocess.run([engine, "generate", "--json"] + args, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def reuse(context, output, span=4):
    """Output tokens that continue a span of >= span tokens already in the context."""
    seen = set()
    hist = list(context)
    for i in range(len(hist) - span + 1):
        seen.add(tuple(hist[i:i + span]))
    covered, run_len, longest = 0, 0, 0
    for t in output:
        hist.append(t)
        key = tuple(hist[-span:])
        if len(hist) >= span and key in seen:
            covered += 1
            run_len += 1
            longest = max(longest, run_len)
        else:
            run_len = 0
        seen.add(key)
    return covered, longest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("target")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", default="8,16")
    ap.add_argument("--lookup", default="8")
    ap.add_argument("--cpus", default="0-1")
    ap.add_argument("--seed-prompt", default="def merge(a, b):\n    out = []\n")
    a = ap.parse_args()

    cpus = ["--cpus", a.cpus]
    first = run(a.engine, ["--model", a.target, "--prompt", a.seed_prompt, "-n", str(a.n)] + cpus)
    prompt = a.seed_prompt + first["text"] + a.seed_prompt
    base = ["--model", a.target, "--prompt", prompt, "-n", str(a.n)] + cpus
    configs = [("plain", ["--draft-max", "0"])]
    for k in a.k.split(","):
        configs.append((f"lookup 1..{a.lookup}, K={k}", ["--lookup", a.lookup, "--draft-max", k]))
    results = {i: [] for i in range(len(configs))}
    for _ in range(a.repeat):
        for i, (_, extra) in enumerate(configs):
            results[i].append(run(a.engine, base + extra))

    ref = results[0][0]
    covered, longest = reuse(ref["prompt_tokens"], ref["tokens"])
    print(f"prompt: {len(ref['prompt_tokens'])} tokens (seed prompt + its {a.n}-token plain "
          f"continuation + seed prompt)")
    print(f"output reuse: {covered}/{len(ref['tokens'])} output tokens continue a >= 4-token "
          f"span already in the context; longest reused run {longest} tokens")
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    print()
    print("| configuration | tok/s median (min-max) | vs plain | acceptance | accepted/pass | "
          "target passes |")
    print("|---|---|---|---|---|---|")
    base_tps = statistics.median(r["timings"]["tok_s"] for r in results[0])
    for i, (name, _) in enumerate(configs):
        rs = results[i]
        if any(r["tokens"] != ref["tokens"] for r in rs):
            print(f"MISMATCH: {name} produced different tokens", file=sys.stderr)
            sys.exit(1)
        tps = [r["timings"]["tok_s"] for r in rs]
        # Per-repeat ratio against the plain run of the same repeat, then the median.
        ratios = [r["timings"]["tok_s"] / p["timings"]["tok_s"] for r, p in zip(rs, results[0])]
        s = rs[len(rs) // 2]["spec"]
        spec = ("| - | - | - |" if not s["enabled"] else
                f"| {s['acceptance_rate']:.2f} | {s['mean_accepted']:.2f} | "
                f"{s['target_passes']} |")
        print(f"| {name} | {statistics.median(tps):.2f} ({min(tps):.2f}-{max(tps):.2f}) | "
              f"{statistics.median(ratios):.2f}x (median of per-repeat ratios; "
              f"{statistics.median(tps) / base_tps:.2f}x of medians) " + spec)


if __name__ == "__main__":
    main()
