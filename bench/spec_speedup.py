#!/usr/bin/env python3
"""Speculative decoding speed-up vs the target alone, shared vs partitioned.

Runs `epyctune-engine generate --json` for each configuration REPEAT times,
interleaved (so background load hits every configuration alike), and prints a
markdown table of median tok/s, the spread, the speed-up over the target
alone on the same CPUs, and the speculation stats. Greedy decoding, so every
configuration must produce the same tokens: the script checks that too.

usage: spec_speedup.py ENGINE TARGET DRAFT[,DRAFT...] [--n 128] [--repeat 3] [--k 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(engine, args):
    out = subprocess.run([engine, "generate", "--json"] + args, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("target")
    ap.add_argument("drafts")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", default="4")
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. " * 2)
    a = ap.parse_args()

    base = ["--model", a.target, "--prompt", a.prompt, "-n", str(a.n)]
    configs = [("target alone", "0-1", []), ("target alone", "1", [])]
    for d in a.drafts.split(","):
        for k in a.k.split(","):
            spec = ["--model-draft", d, "--draft-max", k]
            configs.append((f"{os.path.basename(d)} K={k} shared", "0-1",
                            spec + ["--spec-mode", "shared"]))
            configs.append((f"{os.path.basename(d)} K={k} partitioned", "0-1",
                            spec + ["--spec-mode", "partitioned", "--draft-cpus", "0",
                                    "--verify-cpus", "1"]))
    results = {i: [] for i in range(len(configs))}
    for _ in range(a.repeat):
        for i, (_, cpus, extra) in enumerate(configs):
            args = base + extra + ([] if "--verify-cpus" in extra else ["--cpus", cpus])
            results[i].append(run(a.engine, args))

    ref_tokens = results[0][0]["tokens"]
    base_tps = statistics.median(r["timings"]["tok_s"] for r in results[0])
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    print()
    print("| configuration | CPUs | tok/s median (min-max) | speed-up | acceptance | "
          "accepted/pass | draft s | verify s | wait s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (name, cpus, extra) in enumerate(configs):
        rs = results[i]
        for r in rs:
            if r["tokens"] != ref_tokens:
                print(f"MISMATCH: {name} produced different tokens", file=sys.stderr)
                sys.exit(1)
        tps = [r["timings"]["tok_s"] for r in rs]
        med = statistics.median(tps)
        s = rs[len(rs) // 2]["spec"]
        cpu_desc = cpus if "--verify-cpus" not in extra else "draft 0 / verify 1"
        spec_cols = ("| - | - | - | - | - |" if not s["enabled"] else
                     f"| {s['acceptance_rate']:.2f} | {s['mean_accepted']:.2f} | "
                     f"{s['draft_s']:.3f} | {s['verify_s']:.3f} | {s['wait_s']:.3f} |")
        print(f"| {name} | {cpu_desc} | {med:.1f} ({min(tps):.1f}-{max(tps):.1f}) | "
              f"{med / base_tps:.2f}x " + spec_cols)


if __name__ == "__main__":
    main()
