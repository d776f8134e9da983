#!/usr/bin/env python3
"""The HTTP front under hostile clients, one or more serve binaries side by side.

For each engine binary (e.g. this tree's and one built from an older commit,
whose front was cpp-httplib) on the same tiny model, interleaved over
--repeat rounds, it measures:

  streams     8 streaming clients alone: time to first token p50/p99, tok/s
  hostile     the same beside 200 idle and 30 trickling connections
  chunked     a 100 MB chunked body against --max-body 65536: the status,
              the bytes the server took before answering, its RSS growth
  header      a 64 MB header line: the status, the RSS growth
  nested      a 300 KB body nested 100,000 deep: the status (0: the
              connection died with the server)
  http10      a streamed completion asked for over HTTP/1.0: whether the
              reply is chunked (an HTTP/1.0 client reads that as garbage)
  pipelined   3 pipelined requests: how many replies came back
  second      a second server started on the first one's port: whether
              it started (it should refuse)

usage: bench/serve_front.py LOADGEN ENGINE [ENGINE...] [--seconds S] [--repeat N]
                            [--mkmodel MKMODEL]
LOADGEN is build/tests/serve/epyctune-serve-load; the model comes from MKMODEL
(default build/tools/epyctune-mkmodel/epyctune-mkmodel).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class Serve:
    def __init__(self, engine, model, *extra, port=0):
        self.p = subprocess.Popen([engine, "serve", "-m", model, "-t", "1", "--port", str(port),
                                   *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on http://"):
            raise RuntimeError(f"{engine}: {line!r} {self.p.stderr.read()[-500:]}")
        self.url = line.split()[-1]
        self.host, port = self.url[len("http://"):].rsplit(":", 1)
        self.port = int(port)

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.alive():
            self.p.terminate()
        try:
            self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def connect(s):
    c = socket.create_connection((s.host, s.port), timeout=30)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def read_reply_head(c, timeout=20):
    c.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            got = c.recv(65536)
            if not got:
                break
            data += got
    except OSError:
        pass
    return int(data[9:12]) if data.startswith(b"HTTP/1.") and len(data) >= 12 else 0


def flood(s, head, piece, total):
    """Sends head then `piece` until `total` bytes or the server cuts in; returns
    (status, bytes sent before the reply, RSS growth KiB)."""
    rss0 = rss_kib(s.p.pid)
    c = connect(s)
    sent = [0]
    stop = threading.Event()

    def sender():
        try:
            c.sendall(head)
            while sent[0] < total and not stop.is_set():
                c.sendall(piece)
                sent[0] += len(piece)
        except OSError:
            pass

    t = threading.Thread(target=sender)
    t.start()
    status = read_reply_head(c, 60)
    at_reply = sent[0]
    growth = rss_kib(s.p.pid) - rss0 if s.alive() else -1
    stop.set()
    try:
        c.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    c.close()
    t.join()
    return status, at_reply, growth


def exchange(s, raw, timeout=20):
    try:
        c = connect(s)
        c.sendall(raw)
        c.settimeout(timeout)
        data = b""
        while True:
            got = c.recv(65536)
            if not got:
                break
            data += got
        c.close()
        return data
    except OSError:
        return b""


def load(loadgen, s, seconds, *extra):
    try:
        out = subprocess.run([loadgen, "--url", s.url, "-c", "8", "-d", str(seconds), "-n", "16",
                              "--stream", "--json", *extra], capture_output=True, text=True,
                             timeout=seconds + 120)
        return json.loads(out.stdout)
    except (json.JSONDecodeError, subprocess.TimeoutExpired):
        return {"ttft_p50_s": float("nan"), "ttft_p99_s": float("nan"), "tok_s": 0,
                "errors": -1, "ok": 0}


def round_for(engine, model, loadgen, seconds):
    r = {}
    s = Serve(engine, model, "--queue", "8")
    try:
        load(loadgen, s, 1)
        r["streams"] = load(loadgen, s, seconds)
        r["hostile"] = load(loadgen, s, seconds, "--idle", "200", "--slow", "30")
        req = json.dumps({"prompt": "the quick", "max_tokens": 6, "stream": True}).encode()
        r10 = exchange(s, b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" %
                       (len(req), req))
        r["http10_chunked"] = b"chunked" in r10.split(b"\r\n\r\n", 1)[0].lower()
        pipe = (b"GET /health HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n"
                b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        r["pipelined_replies"] = exchange(s, pipe, 5).count(b"HTTP/1.1 200")
        try:
            second = Serve(engine, model, port=s.port)
            r["second_started"] = True
            second.stop()
        except RuntimeError:
            r["second_started"] = False
        deep = b'{"prompt":"a","max_tokens":' + b"[" * 100000 + b"1" + b"]" * 100000 + b"}"
        got = exchange(s, b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n"
                       b"Connection: close\r\n\r\n%s" % (len(deep), deep))
        r["nested_status"] = int(got[9:12]) if got.startswith(b"HTTP/1.") else 0
        r["alive_after"] = s.alive()
    finally:
        s.stop()
    s = Serve(engine, model, "--max-body", "65536")
    try:
        r["chunked"] = flood(s, b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n",
                             b"10000\r\n" + b" " * 65536 + b"\r\n", 100 << 20)
        r["header"] = flood(s, b"GET /health HTTP/1.1\r\nX-Big: ", b"a" * (1 << 20), 64 << 20)
    finally:
        s.stop()
    return r


def median(xs):
    xs = sorted(x for x in xs if x == x)
    return xs[len(xs) // 2] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("loadgen")
    ap.add_argument("engines", nargs="+")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write every round here")
    ap.add_argument("--mkmodel", default="build/tools/epyctune-mkmodel/epyctune-mkmodel",
                    help="the dev tool that writes the tiny model")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "tiny.gguf")
        subprocess.run([a.mkmodel, "mkmodel", model, "--shape", "tiny", "--quant", "q8_0",
                        "-t", "1"], check=True, capture_output=True)
        rounds = {e: [] for e in a.engines}
        for i in range(a.repeat):
            for e in a.engines:  # interleaved: each round runs every binary once
                rounds[e].append(round_for(e, model, a.loadgen, a.seconds))
                print(f"round {i + 1}: {e} done", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rounds, f, indent=1)
    print("| engine | streams alone: TTFT p50 / p99 ms | beside 200 idle + 30 slow: TTFT p50 / p99 ms "
          "| 100 MB chunked: status, MB taken, RSS +MiB | 64 MB header: status, RSS +MiB "
          "| 100k-deep body | HTTP/1.0 stream chunked | pipelined replies of 3 | second server started |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e, rs in rounds.items():
        def m(k, f):
            return median([f(r[k]) for r in rs])
        st = f"{m('streams', lambda x: x['ttft_p50_s'] * 1e3):.1f} / {m('streams', lambda x: x['ttft_p99_s'] * 1e3):.1f}"
        ho = f"{m('hostile', lambda x: x['ttft_p50_s'] * 1e3):.1f} / {m('hostile', lambda x: x['ttft_p99_s'] * 1e3):.1f}"
        ch = rs[-1]["chunked"]
        hd = rs[-1]["header"]
        print(f"| {e} | {st} | {ho} | {ch[0]}, {ch[1] / 1e6:.1f}, {ch[2] / 1024:.1f} "
              f"| {hd[0]}, {hd[2] / 1024:.1f} | {rs[-1]['nested_status'] or 'no reply'}{'' if rs[-1]['alive_after'] else ', serve died'} "
              f"| {rs[-1]['http10_chunked']} | {rs[-1]['pipelined_replies']} | {rs[-1]['second_started']} |")


if __name__ == "__main__":
    main()
