#!/usr/bin/env python3
"""What a user gets from `generate -md` with default settings (issue 34).

For each draft, REPEAT interleaved pairs of runs of the same command line a
user types: the target alone, then `-md DRAFT` with every other setting at its
default and a fresh, empty cost cache (XDG_CACHE_HOME and CACHE_DIRECTORY
point to a new directory), so auto mode decides as it does on a first run.
Greedy, so each speculative run must give the target's own tokens: checked.
Prints per draft the median of the per-pair ratios (speculative tok/s over
plain tok/s of the same pair), acceptance, how many drafting rounds auto ran
time-shared and how often it moved the layout, how many target passes ran
on every CPU, and the seconds the first run's cost probe took; writes JSON.

With --reference, each pair is followed by llama.cpp's speculative decoding
on the same files (bench/reference/spec.mjs: node-llama-cpp's prebuilt CPU
build and its draft-model token predictor, both models on every CPU), at each
of a few draft settings; its best is printed beside ours.

With --ik IK_BUILD, each pair is followed by ik_llama.cpp's llama-spec-bench
(built from source, as bench/reference/ik_spec.py says) on the same files and
prompt: plain, then the draft at each --ik-draft-max, all with its run-time
repacking (-rtr, its fastest CPU layout); its best tok/s is printed beside
ours (issue 34: ours >= 1.2x it).

usage: spec_default.py ENGINE TARGET DRAFT[,DRAFT...] [--n 128] [--repeat 3]
       [--prompt "Once upon a time"] [--reference] [--ik IK_BUILD]
       [--ik-draft-max 8,16] [--json-out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def generate(engine, args, env=None):
    out = subprocess.run([engine, "generate", "--json"] + args, check=True,
                         capture_output=True, text=True, env=env).stdout
    return json.loads(out)


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
# llama.cpp's settings tried: (most tokens drafted, least confidence to draft).
REFERENCE_SETTINGS = [(16, 0.6), (8, 0.0)]


def reference(target, draft, n, prompt):
    best = None
    for max_draft, conf in REFERENCE_SETTINGS:
        out = subprocess.run(["node", os.path.join(HERE, "reference", "spec.mjs"), target, draft,
                              str(os.cpu_count()), str(n), str(max_draft), str(conf), prompt],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        if best is None or r["spec_tok_s"] > best["spec_tok_s"]:
            best = r
    return best


def ik_reference(ik, target, draft, n, prompt, draft_max):
    from ik_spec import ik_bench
    threads = str(os.cpu_count())
    plain, _ = ik_bench(ik, target, None, prompt, n, threads, 0, True)
    best = None
    for k in draft_max.split(","):
        tps, acc = ik_bench(ik, target, draft, prompt, n, threads, k, True)
        if best is None or tps > best["spec_tok_s"]:
            best = {"plain_tok_s": plain, "spec_tok_s": tps, "max_draft": int(k),
                    "acceptance": acc}
    return best


def print_reference(rows, key, vs, header, setting, acceptance):
    """A reference engine's table: its medians per draft, and ours over its best."""
    print("\n" + header)
    print("|---" * (5 if acceptance else 4) + "|")
    for r in rows:
        ps = r["pairs"]
        refs = [p[key] for p in ps]
        med = lambda k: statistics.median(x[k] for x in refs)
        cols = [os.path.basename(r["draft"]), f"{med('plain_tok_s'):.2f}",
                f"{med('spec_tok_s'):.2f} ({', '.join(setting(x) for x in refs)})"]
        if acceptance:
            cols.append(f"{med('acceptance'):.2f}")
        cols.append(f"**{statistics.median(p[vs] for p in ps):.2f}** "
                    f"({', '.join('%.2f' % p[vs] for p in ps)})")
        print("| " + " | ".join(cols) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("target")
    ap.add_argument("drafts")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--ik", help="ik_llama.cpp build directory (bin/llama-spec-bench)")
    ap.add_argument("--ik-draft-max", default="8,16")
    ap.add_argument("--json-out")
    a = ap.parse_args()

    if a.ik:
        a.ik, a.target = os.path.abspath(a.ik), os.path.abspath(a.target)
        a.drafts = ",".join(os.path.abspath(d) for d in a.drafts.split(","))
    base = ["-m", a.target, "-p", a.prompt, "-n", str(a.n)]
    drafts = a.drafts.split(",")
    pairs = {d: [] for d in drafts}
    # Repeats interleave the drafts, so a slow minute of the host lands on
    # one pair of every draft rather than on every pair of one.
    for _ in range(a.repeat):
        for d in drafts:
            plain = generate(a.engine, base)
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, XDG_CACHE_HOME=cache, CACHE_DIRECTORY=cache)
                spec = generate(a.engine, base + ["-md", d], env)
            if spec["tokens"] != plain["tokens"]:
                sys.exit(f"{d}: speculative output differs from the target's own")
            s = spec["spec"]
            pairs[d].append({
                "plain_tok_s": plain["timings"]["tok_s"],
                "spec_tok_s": spec["timings"]["tok_s"],
                "ratio": spec["timings"]["tok_s"] / plain["timings"]["tok_s"],
                "mode": s["mode"], "reason": s["mode_reason"],
                "acceptance": s["acceptance_rate"],
                "every_cpu_passes": s.get("every_cpu_passes", 0),
                "shared_rounds": s.get("shared_rounds", 0),
                "layout_switches": s.get("layout_switches", 0),
                "target_passes": s["target_passes"],
                "load_s": spec["timings"]["load_s"],
                "cost_model_s": spec["timings"].get("cost_model_s", 0),
                "bytes_per_token": plain["bytes_per_token"],
            })
            if a.reference:
                ref = reference(a.target, d, a.n, a.prompt)
                pairs[d][-1]["reference"] = ref
                pairs[d][-1]["vs_reference"] = spec["timings"]["tok_s"] / ref["spec_tok_s"]
            if a.ik:
                ik = ik_reference(a.ik, a.target, d, a.n, a.prompt, a.ik_draft_max)
                pairs[d][-1]["ik"] = ik
                pairs[d][-1]["vs_ik"] = spec["timings"]["tok_s"] / ik["spec_tok_s"]
    rows = [{"draft": d, "pairs": pairs[d],
             "ratio_median": statistics.median(p["ratio"] for p in pairs[d]),
             "plain_median": statistics.median(p["plain_tok_s"] for p in pairs[d]),
             "spec_median": statistics.median(p["spec_tok_s"] for p in pairs[d])}
            for d in drafts]

    print("| draft | plain tok/s | -md tok/s | x plain (per pair) | acceptance "
          "| drafting rounds time-shared / layout moves | passes on every CPU "
          "| cost model s (first run) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ps = r["pairs"]
        med = lambda k: statistics.median(p[k] for p in ps)
        print(f"| {os.path.basename(r['draft'])} | {r['plain_median']:.2f} | "
              f"{r['spec_median']:.2f} | **{r['ratio_median']:.2f}** "
              f"({', '.join('%.2f' % p['ratio'] for p in ps)}) | "
              f"{med('acceptance'):.2f} | "
              f"{'/'.join(str(p['shared_rounds']) + ' / ' + str(p['layout_switches']) for p in ps)} | "
              f"{'/'.join(str(p['every_cpu_passes']) + ' of ' + str(p['target_passes']) for p in ps)} | "
              f"{med('cost_model_s'):.2f} |")
    if a.reference:
        print_reference(rows, "reference", "vs_reference",
                        "| draft | llama.cpp plain tok/s | llama.cpp best speculative tok/s "
                        "(max draft, min confidence) | ours / llama.cpp's best (per pair) |",
                        lambda x: "%d, %.1f" % (x["max_draft"], x["min_confidence"]), False)
    if a.ik:
        print_reference(rows, "ik", "vs_ik",
                        "| draft | ik_llama.cpp -rtr plain tok/s | its best speculative tok/s "
                        "(n_max per pair) | acceptance | our -md / its best (per pair) |",
                        lambda x: str(x["max_draft"]), True)
    for r in rows:
        print(f"{os.path.basename(r['draft'])}: {r['pairs'][0]['reason']}")
    gb = rows[0]["pairs"][0]["bytes_per_token"] / 1e9 if rows else 0
    print(f"target bytes per token: {gb:.2f} GB (roofline = bandwidth / this)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"n": a.n, "repeat": a.repeat, "prompt": a.prompt, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
