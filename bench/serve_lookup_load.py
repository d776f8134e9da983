#!/usr/bin/env python3
"""Speculation under load: `serve --parallel P` with and without
speculation (n-gram lookup --lookup N, a draft model --draft FILE, or
both), C concurrent clients on prompts that repeat themselves (--text
plain: ones that do not, where lookup must not cost speed), in interleaved
repeats. Prints each setting's aggregate tok/s (completion tokens of all
clients over the wall time of the round), the median per-request time per
output token, and whether every request's text was the same with and
without speculation (it must be: verification is lossless).

    bench/serve_lookup_load.py ENGINE MODEL [--parallel 4] [--clients 1,4]
        [--lookup 4] [--draft FILE] [--tokens 128] [--text repeat|plain]
        [--repeat 3] [-t 2] [--json OUT]
"""
import argparse, contextlib, http.client, json, re, statistics, subprocess, sys, threading, time
import urllib.parse


@contextlib.contextmanager
def serving(a, spec):
    """A fresh `serve` for one round (spec: with speculation); yields its URL."""
    args = [a.engine, "serve", "-m", a.model, "-t", str(a.threads), "--port", "0",
            "--parallel", str(a.parallel), "-c", "2048"] + (spec_args(a) if spec else [])
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        m = re.match(r"listening on (http://\S+)", srv.stdout.readline())
        if not m:
            sys.exit("serve did not start")
        yield urllib.parse.urlparse(m.group(1))
    finally:
        srv.kill()
        srv.wait()


def spec_args(a):
    return (["--lookup", str(a.lookup)] if a.lookup else []) + (["-md", a.draft] if a.draft else [])


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


def round_(a, spec, clients):
    with serving(a, spec) as url:
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
    ap.add_argument("--lookup", type=int, default=4, help="0: off (with --draft)")
    ap.add_argument("--draft", help="a draft model for the target")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--text", choices=["repeat", "plain"], default="repeat",
                    help="prompts that repeat a phrase four times, or ones that do not")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    spec = " ".join(spec_args(a))
    if not spec:
        sys.exit("nothing to compare: give --lookup N or --draft FILE")
    rows = []
    for c in [int(x) for x in a.clients.split(",")]:
        runs = {False: [], True: []}
        for _ in range(a.repeat):
            for sp in runs:
                runs[sp].append(round_(a, sp, c))
        same = all(r["texts"] == runs[False][0]["texts"] for sp in runs for r in runs[sp])
        med = {sp: statistics.median(r["tok_s"] for r in runs[sp]) for sp in runs}
        tpot = {sp: statistics.median(r["tpot_ms"] for r in runs[sp]) for sp in runs}
        row = {"clients": c, "plain_tok_s": med[False], "spec_tok_s": med[True],
               "ratio": med[True] / med[False], "plain_tpot_ms": tpot[False],
               "spec_tpot_ms": tpot[True], "same_text": same}
        rows.append(row)
        print(f"{c} clients, {a.text} prompts, --parallel {a.parallel}: plain {med[False]:.1f} tok/s, "
              f"{spec} {med[True]:.1f} tok/s ({row['ratio']:.2f}x); time per token "
              f"{tpot[False]:.1f} / {tpot[True]:.1f} ms; same text: {same}; medians of {a.repeat}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"parallel": a.parallel, "threads": a.threads, "tokens": a.tokens,
                       "text": a.text, "model": a.model, "spec": spec,
                       "rows": rows}, f, indent=1)
    if not all(r["same_text"] for r in rows):
        sys.exit("speculation changed a reply")


if __name__ == "__main__":
    main()
