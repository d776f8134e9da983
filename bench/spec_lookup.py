#!/usr/bin/env python3
"""Prompt lookup (no draft model) on a code-editing-like prompt, vs plain decoding.

The prompt is built so that the answer reuses long spans of it, as an
editor's answer re-emits the code it was given: decode plain from a seed
prompt P to get O, then use P + O' + P as the prompt, where O' is O with
every Nth token replaced (--edit-every N; 0 keeps O whole). A model whose
next token depends mostly on the current one (mkmodel --attention-scale)
then re-emits O after the second P, and lookup finds O' in the context
except at the edits. The script reports how much of the output really
continues a span of the context (output tokens that extend a >= 4-token
span already there, and the longest such run), so a model that does not
reuse its input shows up as such instead of as a slow lookup.

The measurement is `epyctune-engine bench --lookup L --spec ...`: plain and
each lookup configuration decode the prompt in turn per repeat (paired
ratios, medians), with acceptance by position, the K the adaptive
controller chose, and the cost model's prediction beside the measurement.
bench fails if any configuration's tokens differ from plain decoding's.

usage: spec_lookup.py ENGINE TARGET [--n 128] [--repeat 3] [--spec adaptive,8,16]
                      [--lookup 8] [--threads 2] [--edit-every 0] [--seed-prompt TEXT]
                      [--json-out FILE]
"""
import argparse
import json
import subprocess


def engine(exe, args):
    out = subprocess.run([exe] + args, check=True, capture_output=True, text=True).stdout
    return out


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


def edited(exe, model, text, every):
    """text with every `every`-th token's piece swapped for a piece further on."""
    if every <= 0:
        return text, 0
    j = json.loads(engine(exe, ["tokenize", "-m", model, "-p", text, "--json"]).splitlines()[0])
    pieces = list(j["pieces"])
    n = 0
    for i in range(every - 1, len(pieces), every):
        other = pieces[(i + every // 2 + 1) % len(pieces)]
        if other != pieces[i]:
            pieces[i] = other
            n += 1
    return "".join(pieces), n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("target")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spec", default="adaptive,8,16")
    ap.add_argument("--lookup", default="8")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--edit-every", type=int, default=0)
    ap.add_argument("--seed-prompt", default="def merge(a, b):\n    out = []\n")
    ap.add_argument("--json-out")
    a = ap.parse_args()

    gen = ["generate", "--json", "--model", a.target, "-t", a.threads, "-n", str(a.n),
           "--draft-max", "0"]
    first = json.loads(engine(a.engine, gen + ["--prompt", a.seed_prompt]))
    body, edits = edited(a.engine, a.target, first["text"], a.edit_every)
    prompt = a.seed_prompt + body + a.seed_prompt
    check = json.loads(engine(a.engine, gen + ["--prompt", prompt]))
    covered, longest = reuse(check["prompt_tokens"], check["tokens"])
    same = sum(x == y for x, y in zip(check["tokens"], first["tokens"]))

    bench = json.loads(engine(a.engine, [
        "bench", "--model", a.target, "--lookup", a.lookup, "--spec"] + a.spec.split(",") + [
        "-p", prompt, "-n", str(a.n), "-r", str(a.repeat), "-t", a.threads, "--json"]))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"prompt": prompt, "edits": edits, "reused_tokens": covered,
                       "longest_reused_run": longest, "bench": bench}, f, indent=2)

    roof = bench["roofline"]
    print(f"prompt: {len(check['prompt_tokens'])} tokens (seed prompt + its {a.n}-token plain "
          f"continuation with {edits} tokens edited + seed prompt)")
    print(f"output: {same}/{len(first['tokens'])} tokens as the seed prompt's continuation; "
          f"{covered} continue a >= 4-token span of the context, longest reused run {longest}")
    print(f"roofline {roof['tokens_per_s']:.2f} tok/s = {roof['bandwidth_gbps']:.1f} GB/s / "
          f"{roof['bytes_per_token'] / 1e6:.0f} MB per token")
    ceil = bench["ceiling"]
    print(f"ceiling, every proposal accepted: x{ceil['ratio']:.2f} "
          f"(K per repeat {ceil['k_per_repeat']})")
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    print()
    print("| configuration | tok/s median | x plain (per repeat) | predicted | acceptance | "
          "accepted per verify pass | K chosen (rounds) |")
    print("|---|---|---|---|---|---|---|")
    for c in bench["configs"]:
        tps = c["tokens_per_s"]
        if c["k"] == 0:
            print(f"| plain | {tps['median']:.2f} | 1.00 | - | - | - | - |")
            continue
        hist = sorted((int(k), n) for k, n in c["k_histogram"].items())
        rounds = sum(n for _, n in hist) or 1
        per_pass = c["acceptance"] * sum(k * n for k, n in hist) / rounds
        name = f"lookup 1..{a.lookup}, " + ("adaptive K" if c["adaptive"] else c["name"])
        ks = " ".join(f"{k}:{n}" for k, n in hist)
        print(f"| {name} | {tps['median']:.2f} | {c['ratio_to_plain']:.2f} | "
              f"{c['predicted_ratio']:.2f} | {c['acceptance']:.2f} | {per_pass:.2f} | {ks} |")


if __name__ == "__main__":
    main()
