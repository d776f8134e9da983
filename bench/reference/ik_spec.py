#!/usr/bin/env python3
"""Speculative decoding against ik_llama.cpp's llama-spec-bench, same pair, same run.

ik_llama.cpp is built from source (it is not packaged): fetch its repository,
then

    cmake -S ik_llama.cpp -B ik-build -G Ninja -DCMAKE_BUILD_TYPE=Release \\
        -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF
    cmake --build ik-build --target llama-spec-bench

Each repeat runs, in turn: our `bench --draft --spec` (plain decoding and our
configurations), then ik_llama.cpp's `llama-spec-bench` without a draft
(plain decoding) and with the draft at each n_max (`--spec-type
draft:n_max=K`, its replacement for --draft-max), with and without run-time
repacking (-rtr, its faster CPU layout). Its older `llama-speculative`
example accepted no draft token at all at the revision measured, even with
the draft equal to the target, so it is not used. Every ratio is taken within one
repeat against that engine's own plain decoding, and against ours; the table
gives medians over repeats.

usage: ik_spec.py ENGINE IK_BUILD TARGET DRAFT [--n 128] [--repeat 3]
                  [--threads 2] [--draft-max 4,8,16] [--spec adaptive,8]
                  [--prompt TEXT] [--json-out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(cmd):
    # ik_llama.cpp writes llama.log into its working directory: not ours.
    with tempfile.TemporaryDirectory() as cwd:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout + p.stderr


def ik_bench(ik, target, draft, prompt, n, threads, draft_max, rtr):
    """llama-spec-bench: decode tok/s and acceptance; no draft = plain decoding."""
    cmd = [f"{ik}/bin/llama-spec-bench", "-m", target, "-p", prompt, "-n", str(n),
           "-t", threads, "--temp", "0", "--seed", "1", "-c", "2048", "--output-format", "jsonl"]
    if draft:
        cmd += ["-md", draft, "-td", threads, "--spec-type", f"draft:n_max={draft_max}"]
    if rtr:
        cmd += ["-rtr"]
    out = run(cmd)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith('{"row_type"')]
    summary = next(r for r in rows if r["row_type"] == "summary")
    if summary["generated"] != n:
        raise SystemExit(f"llama-spec-bench generated {summary['generated']} of {n} tokens")
    return summary["decode_tps"], summary["speculative"]["acceptance_rate"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("ik")
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--draft-max", default="4,8,16")
    ap.add_argument("--spec", default="adaptive,8")
    ap.add_argument("--prompt", default="The quick brown fox")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    # ik_llama.cpp runs from a scratch directory (run()): the paths must not be relative.
    a.engine, a.ik, a.target, a.draft = map(os.path.abspath, (a.engine, a.ik, a.target, a.draft))

    rows = {}  # name -> list of (tok/s, ratio to that engine's plain, ratio to our plain)

    def add(name, tps, own_plain, our_plain, acc=None):
        rows.setdefault(name, []).append((tps, tps / own_plain, tps / our_plain, acc))

    for _ in range(a.repeat):
        ours = json.loads(run([a.engine, "bench", "--model", a.target, "--draft", a.draft,
                               "--spec"] + a.spec.split(",") + [
                              "-p", a.prompt, "-n", str(a.n), "-r", "1", "-t", a.threads,
                              "--spec-mode", "shared", "--json"]))
        our_plain = ours["configs"][0]["tokens_per_s"]["median"]
        for c in ours["configs"]:
            add("epyctune " + c["name"], c["tokens_per_s"]["median"], our_plain, our_plain,
                c.get("acceptance"))
        for rtr in (False, True):
            tag = "ik_llama.cpp" + (" -rtr" if rtr else "")
            ik_p, _ = ik_bench(a.ik, a.target, None, a.prompt, a.n, a.threads, 0, rtr)
            add(f"{tag} plain", ik_p, ik_p, our_plain)
            for k in a.draft_max.split(","):
                tps, acc = ik_bench(a.ik, a.target, a.draft, a.prompt, a.n, a.threads, k, rtr)
                add(f"{tag} speculative --draft-max {k}", tps, ik_p, our_plain, acc)

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=2)
    print(f"target {a.target}, draft {a.draft}, {a.threads} threads, {a.n} tokens, greedy, "
          f"{a.repeat} interleaved repeats (medians)")
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}\n")
    print("| engine, configuration | tok/s | x its own plain | x epyctune plain | acceptance |")
    print("|---|---|---|---|---|")
    for name, v in rows.items():
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        acc = [x[3] for x in v if x[3] is not None]
        acc_col = f"{statistics.median(acc):.2f}" if acc else "-"
        print(f"| {name} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {acc_col} |")


if __name__ == "__main__":
    main()
