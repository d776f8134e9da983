#!/usr/bin/env python3
"""Serve under C concurrent streaming clients, and the capacity it gives.

    bench/serve_bench.py ENGINE MODEL [--clients 1,2,4,8,16] [--seconds S]
        [--repeat R] [--tpot-ms 100,200] [-t THREADS] [-n TOKENS]
        [--reference] [--json OUT]

Per C (repeats interleaved over C: r1 C1 C2 .. r2 C1 C2 ..) it starts
`ENGINE serve -m MODEL --parallel C -t THREADS --queue 2C` on a free port,
sends one untimed request, then runs `epyctune-serve-load --stream -c C`
for S seconds (N greedy tokens per request, ignore_eos) and stops serve.
It prints per C the medians over repeats of: aggregate tok/s, p50/p99 time
to first token and p50/p99 time per output token (after the first), beside
the roofline: bandwidth / bytes per token from `ENGINE bench --json` (one
sequence), and C times that (a C-row pass reads the weights once).

Capacity: per target T in --tpot-ms, the largest C whose p50 (and, apart,
whose p99) time per output token is at most T. "<C" means even the
smallest C measured missed it.

--reference runs llama.cpp through node-llama-cpp (bench/reference,
`npm install` there first) in the same run, interleaved: C sequences of one
context, batched in one decode per step (bench/reference/serve_ref.mjs).
That is llama.cpp's batched decode without llama-server's HTTP and slots.

--engine-parallel runs, per repeat, `ENGINE bench --parallel C,...` (C
sequences decoding in one batched pass per step, no HTTP) and prints serve's
aggregate as a share of that decode rate (issue 31: >= 75% at C = 8).

--llama-server BIN runs llama.cpp's own server (or ik_llama.cpp's, built
from source) in the same run, interleaved: per C, `BIN -m MODEL -t THREADS
-np C -c C*CTX --host 127.0.0.1 --port P` plus --llama-server-args (default
`-rtr`, ik_llama.cpp's run-time repacking, its fastest CPU layout for Q4_0;
pass '' for mainline), driven by the same load generator and requests.
"""
import argparse, http.client, json, os, re, shlex, shutil, signal, socket, statistics
import subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def loadgen_of(engine):
    # build/apps/epyctune-engine/epyctune-engine -> build/tests/serve/epyctune-serve-load
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(engine))))
    return os.path.join(build, "tests", "serve", "epyctune-serve-load")


def roofline(engine, model, threads):
    out = subprocess.run([engine, "bench", "-m", model, "-t", str(threads), "--batch", "1",
                          "--passes", "4", "-r", "1", "--json"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    bw = j["bandwidth_gbps"]["median"]
    return {"bandwidth_gbps": bw, "bytes_per_token": j["bytes_per_token"],
            "tok_s": bw * 1e9 / j["bytes_per_token"]}


def start_serve(engine, model, c, threads):
    srv = subprocess.Popen([engine, "serve", "-m", model, "-t", str(threads), "--port", "0",
                            "--parallel", str(c), "--queue", str(2 * c)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = srv.stdout.readline()
    m = re.match(r"listening on (http://\S+)", line)
    if not m:
        srv.kill()
        sys.exit("serve did not start: " + line)
    return srv, m.group(1)


def drive(a, url, c):
    """One untimed request (the first pass maps and warms the weights), then C
    streaming clients for a.seconds; returns the load generator's exit code
    and JSON."""
    subprocess.run([a.loadgen, "--url", url, "-c", "1", "-d", "0.01", "-n", "2", "--json"],
                   check=True, capture_output=True)
    out = subprocess.run([a.loadgen, "--url", url, "-c", str(c), "-d", str(a.seconds),
                          "-n", str(a.tokens), "--stream", "--json"],
                         capture_output=True, text=True)
    return out.returncode, json.loads(out.stdout)


def run_ours(a, c):
    srv, url = start_serve(a.engine, a.model, c, a.threads)
    try:
        rc, j = drive(a, url, c)
        if rc != 0 or j["errors"]:
            sys.exit(f"C={c}: the load generator saw errors: {j.get('error_samples')}")
        return j
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=60)


def engine_parallel(a, clients):
    out = subprocess.run([a.engine, "bench", "-m", a.model, "-t", str(a.threads), "--parallel",
                          ",".join(map(str, clients)), "--ctx", "16", "-n", str(a.tokens), "-r",
                          "1", "--json"], check=True, capture_output=True, text=True).stdout
    return {r["parallel"]: r["decode_tok_s"] for r in json.loads(out)["rows"]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_llama_server(a, c):
    port = free_port()
    cmd = [a.llama_server, "-m", os.path.abspath(a.model), "-t", str(a.threads), "-tb",
           str(a.threads), "-np", str(c), "-c", str(c * a.server_ctx), "--host", "127.0.0.1",
           "--port", str(port)] + shlex.split(a.llama_server_args)
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           cwd="/tmp")
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if srv.poll() is not None:
                sys.exit(f"C={c}: llama-server exited ({srv.returncode}): {' '.join(cmd)}")
            try:
                h = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                h.request("GET", "/health")
                if h.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"C={c}: llama-server not ready after 600 s")
            time.sleep(0.5)
        _, j = drive(a, url, c)
        # Errors are counted, not fatal: a server that fails requests shows it here.
        j["requests"] = j["ok"]
        return j
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()


def run_reference(a, c):
    out = subprocess.run(["node", os.path.join(HERE, "reference", "serve_ref.mjs"),
                          os.path.abspath(a.model), str(a.threads), str(c), str(a.tokens),
                          str(a.seconds)],
                         capture_output=True, text=True, cwd=os.path.join(HERE, "reference"))
    if out.returncode != 0:
        sys.exit(f"C={c}: serve_ref.mjs failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


KEYS = ["tok_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"]


def medians(runs):
    return {k: statistics.median(r[k] for r in runs) for k in KEYS}


def capacity(rows, targets_ms):
    out = []
    for t in targets_ms:
        entry = {"tpot_ms": t}
        for q in ("p50", "p99"):
            ok = [r["clients"] for r in rows if r[f"tpot_{q}_s"] * 1e3 <= t]
            entry[q] = max(ok) if ok else None
        out.append(entry)
    return out


def fmt_cap(v, rows):
    return str(v) if v is not None else f"<{min(r['clients'] for r in rows)}"


def print_rows(title, rows, roof):
    print(f"\n{title}")
    print(f"{'C':>3} {'tok/s':>8} {'x C=1':>6} {'ttft p50':>9} {'ttft p99':>9} "
          f"{'tpot p50':>9} {'tpot p99':>9} {'roofline':>9}  requests")
    base = rows[0]["tok_s"] if rows and rows[0]["tok_s"] else 0
    for r in rows:
        x = r["tok_s"] / base if base else 0
        print(f"{r['clients']:>3} {r['tok_s']:8.1f} {x:5.2f}x {r['ttft_p50_s']*1e3:7.0f}ms "
              f"{r['ttft_p99_s']*1e3:7.0f}ms {r['tpot_p50_s']*1e3:7.1f}ms "
              f"{r['tpot_p99_s']*1e3:7.1f}ms {roof * r['clients']:9.1f}  {r['requests']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("engine")
    ap.add_argument("model")
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tpot-ms", default="100,200")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--tokens", type=int, default=32)
    ap.add_argument("--loadgen", help="epyctune-serve-load (default: beside ENGINE's build)")
    ap.add_argument("--reference", action="store_true",
                    help="also llama.cpp through node-llama-cpp, C sequences of one context")
    ap.add_argument("--engine-parallel", action="store_true",
                    help="also the engine's own C-row decode rate (bench --parallel)")
    ap.add_argument("--llama-server", help="llama-server binary, run beside ours per C")
    ap.add_argument("--llama-server-args", default="-rtr")
    ap.add_argument("--server-ctx", type=int, default=512, help="llama-server context per slot")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    a.loadgen = a.loadgen or loadgen_of(a.engine)
    clients = [int(x) for x in a.clients.split(",")]
    targets = [float(x) for x in a.tpot_ms.split(",")]
    if not os.access(a.loadgen, os.X_OK):
        sys.exit(f"no load generator at {a.loadgen}: build epyctune-serve-load (--loadgen)")
    if a.reference and not shutil.which("node"):
        sys.exit("--reference needs node, and `npm install` in bench/reference")

    roof = roofline(a.engine, a.model, a.threads)
    print(f"roofline: {roof['bandwidth_gbps']:.1f} GB/s / {roof['bytes_per_token']/1e9:.3f} GB "
          f"per token = {roof['tok_s']:.1f} tok/s for one sequence, C x that for C rows",
          flush=True)
    ours = {c: [] for c in clients}
    ref = {c: [] for c in clients}
    srv = {c: [] for c in clients}
    eng = {c: [] for c in clients}
    for rep in range(a.repeat):
        if a.engine_parallel:
            for c, tps in engine_parallel(a, clients).items():
                eng[c].append(tps)
            print(f"repeat {rep + 1} engine bench --parallel: " +
                  ", ".join(f"C={c}: {eng[c][-1]:.1f} tok/s" for c in clients), flush=True)
        for c in clients:
            ours[c].append(run_ours(a, c))
            r = ours[c][-1]
            print(f"repeat {rep + 1} C={c}: {r['tok_s']:.1f} tok/s, tpot p50 "
                  f"{r['tpot_p50_s']*1e3:.1f} ms, {r['ok']} replies", flush=True)
            if a.reference:
                ref[c].append(run_reference(a, c))
                r = ref[c][-1]
                print(f"repeat {rep + 1} C={c} reference: {r['tok_s']:.1f} tok/s, tpot p50 "
                      f"{r['tpot_p50_s']*1e3:.1f} ms, {r['requests']} requests", flush=True)
            if a.llama_server:
                srv[c].append(run_llama_server(a, c))
                r = srv[c][-1]
                print(f"repeat {rep + 1} C={c} llama-server: {r['tok_s']:.1f} tok/s, tpot p50 "
                      f"{r['tpot_p50_s']*1e3:.1f} ms, {r['ok']} replies, {r['errors']} errors",
                      flush=True)

    def rows_of(runs, count_key):
        return [dict(clients=c, requests=sum(r[count_key] for r in runs[c]), **medians(runs[c]))
                for c in clients]

    result = {"engine": a.engine, "model": a.model, "threads": a.threads, "tokens": a.tokens,
              "seconds": a.seconds, "repeat": a.repeat, "roofline": roof,
              "load": os.getloadavg(), "rows": rows_of(ours, "ok")}
    result["capacity"] = capacity(result["rows"], targets)
    print_rows(f"epyctune serve --parallel C, -t {a.threads}, {a.tokens} tokens per request, "
               f"medians of {a.repeat}", result["rows"], roof["tok_s"])
    if a.reference:
        result["reference"] = {"engine": ref[clients[0]][0]["engine"],
                               "rows": rows_of(ref, "requests")}
        result["reference"]["capacity"] = capacity(result["reference"]["rows"], targets)
        print_rows(f"reference: {result['reference']['engine']}: C sequences of one context, "
                   f"batched in one decode per step (not llama-server), -t {a.threads}",
                   result["reference"]["rows"], roof["tok_s"])
    if a.engine_parallel:
        result["engine_parallel"] = {c: statistics.median(eng[c]) for c in clients}
        print("serve's aggregate / the engine's C-row decode rate (bench --parallel): " +
              ", ".join(f"C={o['clients']}: {o['tok_s'] / result['engine_parallel'][o['clients']]:.0%}"
                        f" of {result['engine_parallel'][o['clients']]:.1f}"
                        for o in result["rows"]))
    if a.llama_server:
        result["llama_server"] = {"binary": a.llama_server, "args": a.llama_server_args,
                                  "rows": rows_of(srv, "ok"),
                                  "errors": {c: sum(r["errors"] for r in srv[c]) for c in clients}}
        result["llama_server"]["capacity"] = capacity(result["llama_server"]["rows"], targets)
        print_rows(f"llama-server {a.llama_server_args} -np C, -t {a.threads}, same requests",
                   result["llama_server"]["rows"], roof["tok_s"])
        print("ours / llama-server, aggregate tok/s: " + ", ".join(
            f"C={o['clients']}: {o['tok_s'] / l['tok_s']:.2f}x"
            for o, l in zip(result["rows"], result["llama_server"]["rows"]) if l["tok_s"]))
    print("\ncapacity (largest C whose time per output token meets the target):")
    for name, res in [("epyctune serve", result)] + (
            [("reference", result["reference"])] if a.reference else []) + (
            [("llama-server", result["llama_server"])] if a.llama_server else []):
        for cap in res["capacity"]:
            print(f"  {name}: {cap['tpot_ms']:g} ms: p50 {fmt_cap(cap['p50'], res['rows'])} "
                  f"users, p99 {fmt_cap(cap['p99'], res['rows'])} users")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
