#!/usr/bin/env python3
"""A long prompt arriving while others decode: how long the decoding requests
stall (issue 31's chunked-prefill target: their longest inter-token gap at
most 3x their median).

    bench/serve_prefill_gap.py ENGINE MODEL [ENGINE2 ...] [--decoders 4]
        [--words 2440] [--repeat 3] [-t 2] [-b 64] [--prefill-gap 2.0,2.5]
        [--control SECONDS] [--json OUT]

Per repeat and engine: `serve --parallel D+1 -c 4608`, D streaming clients
of greedy tokens (ignore_eos) on short prompts; once each has 24 tokens, a
request with a prompt of --words words (2440: about 4,000 tokens of the demo model) and max_tokens 1 (its reply
time is its time to the first token). Every token's arrival is timed on the
client. Per decoder: the median gap between its tokens before the long
prompt was sent, and the longest gap while it was being read (from its send
to its reply, plus one second). Prints, per engine, the worst decoder's
longest / median gap and the long prompt's first-token time, medians over
the repeats, which interleave the engines. Beside it, each gap against the
decoder's own pace at that moment: its contexts grow while a long prompt is
read, so a decode-only step at the end of the read is slower than before it;
the pace is taken on the line from its median gap before the send to its
median gap in the 2.5 s after the reply. That measure carries the target
(<= 3x): it counts what the prompt does to them, not their own slowing.
And each against the median of all the decoder's gaps, from its first
token to 3 s after the reply. With --control S, the decoders first run S
seconds alone, and their longest gap against their median there is the
host's own jitter, the floor under the target. Several --prefill-gap
values run as engines of their own, in the same repeats.
"""
import argparse, http.client, json, re, statistics, subprocess, sys, threading, time
import urllib.parse


def start(engine, model, threads, slots, batch, gap):
    args = [engine, "serve", "-m", model, "-t", str(threads), "--port", "0", "--parallel",
            str(slots), "-c", "4608", "--queue", "4"]
    if batch:
        args += ["-b", str(batch)]
    if gap:
        args += ["--prefill-gap", gap]
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = srv.stdout.readline()
    m = re.match(r"listening on (http://\S+)", line)
    if not m:
        srv.kill()
        sys.exit(f"{engine}: serve did not start: {line!r}")
    return srv, urllib.parse.urlparse(m.group(1))


def stream(url, prompt, n, times, stop):
    """Posts a streaming completion; appends each token chunk's arrival time."""
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
                       "ignore_eos": True})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"decoder got {r.status}")
    while not stop.is_set():
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: {"):
            times.append(time.monotonic())
    c.close()


def one(engine, gap, a, words):
    srv, url = start(engine, a.model, a.threads, a.decoders + 1, a.batch, gap)
    try:
        stop = threading.Event()
        times = [[] for _ in range(a.decoders)]
        threads = [threading.Thread(target=stream, args=(url, f"Story {i}: once upon a time",
                                                         100000, times[i], stop), daemon=True)
                   for i in range(a.decoders)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 300
        while min(len(t) for t in times) < 24:
            if time.monotonic() > deadline:
                raise RuntimeError("decoders did not start")
            time.sleep(0.05)
        # The host's own jitter: the same decoders, alone, for --control
        # seconds. Their longest gap against their median there is the floor
        # no prefill schedule can go below on this host.
        t_control = time.monotonic()
        time.sleep(a.control)
        c = http.client.HTTPConnection(url.hostname, url.port, timeout=900)
        t_send = time.monotonic()
        c.request("POST", "/v1/completions",
                  json.dumps({"prompt": words, "max_tokens": 1, "temperature": 0}),
                  {"Content-Type": "application/json"})
        resp = c.getresponse()
        reply = json.loads(resp.read())
        t_reply = time.monotonic()
        if resp.status != 200:
            raise RuntimeError(f"the long prompt got {resp.status}: {reply}")
        time.sleep(3.0)
        stop.set()
        worst, worst_at, ratios = 0.0, 0.0, []
        worst_local, worst_local_at = 0.0, 0.0
        worst_all = 0.0
        control = 0.0
        meds, posts = [], []  # per decoder, for the medians over decoders
        for ts in times:
            gaps = [(b - x, x) for x, b in zip(ts, ts[1:])]
            alone = [g for g, x in gaps if x >= t_control and x + g < t_send]
            if len(alone) > 1:
                control = max(control, max(alone) / statistics.median(alone))
            # Their pace before the long prompt: during it, a long prompt read
            # at the whole budget per pass would be most of the stream.
            med = statistics.median(g for g, x in gaps if x + g < t_send)
            # Their pace after it: their own contexts grew meanwhile, so a
            # decode-only step is slower at the end of a long read than at
            # its start. Their pace at a moment of the read is taken on the
            # line from `med` to `post`.
            after = [g for g, x in gaps if x > t_reply + 0.5]
            post = statistics.median(after) if after else med
            meds.append(med)
            posts.append(statistics.median(after) if after else 0.0)
            during = [(g, x) for g, x in gaps if x + g >= t_send and x <= t_reply + 1.0]
            longest = max(during) if during else (0.0, t_send)
            worst_all = max(worst_all, longest[0] / statistics.median(g for g, x in gaps))
            r = longest[0] / med
            ratios.append(r)
            if r > worst:
                worst, worst_at = r, longest[1] - t_send
            span = max(t_reply - t_send, 1e-9)
            for g, x in during:
                f = min(max((x - t_send) / span, 0.0), 1.0)
                loc = g / (med + f * (post - med))
                if loc > worst_local:
                    worst_local, worst_local_at = loc, x - t_send
        return {"prompt_tokens": reply["usage"]["prompt_tokens"], "ttft_s": t_reply - t_send,
                "worst_gap_over_median": worst, "worst_gap_at_s": worst_at, "gap_ratios": ratios,
                "worst_gap_over_local": worst_local, "worst_local_at_s": worst_local_at,
                "worst_gap_over_all": worst_all, "control_gap_over_median": control,
                "median_gap_ms": 1e3 * statistics.median(meds),
                "median_gap_after_ms": 1e3 * statistics.median(posts)}
    finally:
        srv.terminate()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("model")
    ap.add_argument("others", nargs="*", help="more engine binaries, run in the same repeats")
    ap.add_argument("--decoders", type=int, default=4)
    ap.add_argument("--words", type=int, default=2440)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-b", "--batch", type=int, default=0, help="serve -b (0: its default)")
    ap.add_argument("--prefill-gap", default="",
                    help="serve --prefill-gap, or a comma list run side by side (default: its own)")
    ap.add_argument("--control", type=float, default=0.0,
                    help="seconds of the decoders alone before the long prompt, whose longest / "
                         "median gap is the host's own jitter (0: none)")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    vocab = ("the quick brown fox jumps over the lazy dog while a small cat watches "
             "from the warm window of an old house ").split()
    words = "A long report: " + " ".join(vocab[k % len(vocab)] for k in range(a.words))
    setups = [(e, g) for e in [a.engine] + a.others for g in a.prefill_gap.split(",")]
    name = {s: s[0] + (f" --prefill-gap {s[1]}" if s[1] else "") for s in setups}
    runs = {s: [] for s in setups}
    for i in range(a.repeat):
        for s in setups:
            r = one(s[0], s[1], a, words)
            runs[s].append(r)
            print(f"repeat {i + 1} {name[s]}: prompt {r['prompt_tokens']} tokens, first token "
                  f"{r['ttft_s']:.2f} s, worst longest/median gap {r['worst_gap_over_median']:.2f}"
                  f" ({r['worst_gap_at_s']:.1f} s after the send), vs their pace then "
                  f"{r['worst_gap_over_local']:.2f} ({r['worst_local_at_s']:.1f} s), vs the "
                  f"median of all their gaps {r['worst_gap_over_all']:.2f}"
                  f" (median gap {r['median_gap_ms']:.1f} ms before, "
                  f"{r['median_gap_after_ms']:.1f} ms after)"
                  + (f"; alone for {a.control:.0f} s: {r['control_gap_over_median']:.2f}"
                     if a.control else ""), file=sys.stderr)
    out = []
    for s in setups:
        rs = runs[s]
        row = {"engine": s[0], "prefill_gap": s[1], "repeats": rs}
        for k in ("worst_gap_over_median", "worst_gap_over_local", "worst_gap_over_all", "ttft_s",
                  "median_gap_ms", "median_gap_after_ms", "control_gap_over_median"):
            row[k] = statistics.median(r[k] for r in rs)
        out.append(row)
        print(f"{name[s]}: longest gap, worst decoder, / its median gap before the prompt: "
              f"{row['worst_gap_over_median']:.2f}x; / its pace at that moment: "
              f"{row['worst_gap_over_local']:.2f}x (target <= 3x); / the median of all its gaps: "
              f"{row['worst_gap_over_all']:.2f}x; median gap {row['median_gap_ms']:.1f} ms before, "
              f"{row['median_gap_after_ms']:.1f} ms after; the long prompt's first token "
              f"{row['ttft_s']:.2f} s; medians of {len(rs)}"
              + (f"; with no long prompt, for {a.control:.0f} s before it: longest / median gap "
                 f"{row['control_gap_over_median']:.2f}x (the host's floor)" if a.control else ""))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"decoders": a.decoders, "words": a.words, "threads": a.threads,
                       "rows": out}, f, indent=1)

if __name__ == "__main__":
    main()
