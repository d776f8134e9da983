#!/usr/bin/env python3
"""Prefix reuse through `serve --parallel`: the first-token time of a request
that extends a cached prompt, against the same request cold.

    bench/serve_prefix_reuse.py ENGINE MODEL [--words 1100] [--repeat 5] [-t 2]

Starts `serve --parallel 2` on a free port. Each repeat sends a long prompt
with a unique start (cold: nothing cached shares it), then that prompt plus
one more sentence (warm: all but the sentence is in the slot's cache), each
with max_tokens 1 so the reply time is the time to the first token. Prints
the prompt length, the medians, their ratio and the reused-token counter.
"""
import argparse, json, re, statistics, subprocess, sys, time, urllib.request


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.load(r)
    return time.monotonic() - t0, reply


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("model")
    ap.add_argument("--words", type=int, default=1100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    srv = subprocess.Popen([a.engine, "serve", "-m", a.model, "-t", str(a.threads), "--port", "0",
                            "--parallel", "2", "-c", "4096"], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        m = re.match(r"listening on (http://\S+)", line)
        if not m:
            sys.exit("serve did not start: " + line)
        url = m.group(1)
        words = ("the quick brown fox jumps over the lazy dog while a small cat watches "
                 "from the warm window of an old house ").split()
        cold, warm = [], []
        n_prompt = 0
        for i in range(a.repeat):
            base = f"Story {i} of {a.repeat}, number {i * 7919}: " + " ".join(
                words[(k + i) % len(words)] for k in range(a.words))
            t_cold, r = post(url, {"prompt": base, "max_tokens": 1, "temperature": 0})
            n_prompt = r["usage"]["prompt_tokens"]
            t_warm, _ = post(url, {"prompt": base + " And then the dog woke up.", "max_tokens": 1,
                                   "temperature": 0})
            cold.append(t_cold)
            warm.append(t_warm)
            print(f"repeat {i + 1}: cold {t_cold:.3f} s, warm {t_warm:.3f} s", file=sys.stderr)
        metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        reused = re.search(r"^epyctune_serve_prompt_tokens_reused_total (\S+)", metrics, re.M)
        c, w = statistics.median(cold), statistics.median(warm)
        print(json.dumps({"prompt_tokens": n_prompt, "repeats": a.repeat, "cold_s": c,
                          "warm_s": w, "warm_over_cold": w / c,
                          "reused_tokens_total": float(reused.group(1)) if reused else None}))
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
