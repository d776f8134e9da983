#!/usr/bin/env python3
"""Speculation under load: `serve --parallel P` with and without n-gram
lookup (--lookup N), C concurrent clients on prompts that repeat
themselves (--text plain: ones that do not, where lookup must not cost
speed), in interleaved repeats. Prints each setting's aggregate tok/s
(completion tokens of all clients over the wall time of the round), the
median per-request time per output token, and whether every request's text
was the same with and without lookup (it must be: verification is lossless).

    bench/serve_lookup_load.py ENGINE MODEL [--parallel 4] [--clients 1,4]
        [--lookup 4] [--tokens 128] [--text repeat|plain] [--repeat 3] [-t 2]
        [--json OUT]
"""
import argparse, contextlib, http.client, json, re, statistics, subprocess, sys, threading, time
import urllib.parse


@contextlib.contextmanager
def serving(a, lookup):
    """A fresh `serve` for one round; yields its URL."""
    args = [a.engine, "serve", "-m", a.model, "-t", str(a.threads), "--port", "0",
            "--parallel", str(a.parallel), "-c", "2048"] + (["--lookup", str(lookup)] if lookup else [])
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        m = re.match(r"listening on (http://\S+)", srv.stdout.readline())
        if not m:
            sys.exit("serve did not start")
        yield urllib.parse.urlparse(m.group(1))
    finally:
        srv.kill()
        srv.wait()


def ask(url, prompt, n, out, i):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=900)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions",
              json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0,
                          "ignore_eos": True}), {"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    out[i] = (r["choices"][0]["text"], r["usage"]["completion_tokens"], time.monotonic() - t0)


def prompts(n, text):
    if text == "plain":  # no phrase said twice
        words = ("a quiet harbor town wakes before dawn as fishing boats slip out past the "
                 "lighthouse while bakers light ovens and gulls circle over wet cobblestones").split()
        return [" ".join(words[(i * 5 + k) % len(words)] for k in range(24)) + f" ({i})"
                for i in range(n)]
    base = ["the river runs past the mill and the mill turns the stone",
            "one two three four five six seven eight nine ten",
            "def add(a, b): return a + b  # add two numbers",
            "red green blue red green blue yellow"]
    return [" ".join([base[i % len(base)]] * 4) + f" (copy {i})" for i in range(n)]


def round_(a, lookup, clients):
    with serving(a, lookup) as url:
        ps = prompts(clients, a.text)
        out = [None] * clients
        ts = [threading.Thread(target=ask, args=(url, ps[i], a.tokens, out, i)) for i in range(clients)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.monotonic() - t0
    toks = sum(o[1] for o in out)
    return {"tok_s": toks / wall, "tpot_ms": 1e3 * statistics.median(o[2] / o[1] for o in out),
            "texts": [o[0] for o in out]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("model")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--clients", default="1,4")
    ap.add_argument("--lookup", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--text", choices=["repeat", "plain"], default="repeat",
                    help="prompts that repeat a phrase four times, or ones that do not")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    rows = []
    for c in [int(x) for x in a.clients.split(",")]:
        runs = {0: [], a.lookup: []}
        for _ in range(a.repeat):
            for lk in runs:
                runs[lk].append(round_(a, lk, c))
        same = all(r["texts"] == runs[0][0]["texts"] for lk in runs for r in runs[lk])
        plain = statistics.median(r["tok_s"] for r in runs[0])
        look = statistics.median(r["tok_s"] for r in runs[a.lookup])
        row = {"clients": c, "plain_tok_s": plain, "lookup_tok_s": look, "ratio": look / plain,
               "plain_tpot_ms": statistics.median(r["tpot_ms"] for r in runs[0]),
               "lookup_tpot_ms": statistics.median(r["tpot_ms"] for r in runs[a.lookup]),
               "same_text": same}
        rows.append(row)
        print(f"{c} clients, {a.text} prompts, --parallel {a.parallel}: plain {plain:.1f} tok/s, --lookup {a.lookup} "
              f"{look:.1f} tok/s ({look / plain:.2f}x); time per token {row['plain_tpot_ms']:.1f} "
              f"/ {row['lookup_tpot_ms']:.1f} ms; same text: {same}; medians of {a.repeat}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"parallel": a.parallel, "threads": a.threads, "tokens": a.tokens,
                       "text": a.text,
                       "rows": rows}, f, indent=1)
    if not all(r["same_text"] for r in rows):
        sys.exit("lookup changed a reply")


if __name__ == "__main__":
    main()
