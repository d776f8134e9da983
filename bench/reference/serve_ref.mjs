// llama.cpp (node-llama-cpp's prebuilt CPU build) serving C concurrent
// greedy generations: one context with C sequences, which node-llama-cpp
// batches into one decode per step. This is not llama-server (no HTTP, no
// slots scheduler); it is the same engine's batched decode, for
// bench/serve_bench.py --reference to print beside `serve --parallel C`.
//   node serve_ref.mjs MODEL.gguf THREADS CLIENTS N SECONDS [PROMPT]
// Each of the C workers runs requests of N tokens on its own sequence until
// SECONDS pass (a started request finishes). Prints one JSON line: llama.cpp
// release, clients, requests, tokens, tok_s (all tokens over the wall time),
// and p50/p99 time to first token and per output token after the first.
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, threadsStr, cStr, nStr, secStr, promptArg] = process.argv.slice(2);
const threads = Number.parseInt(threadsStr ?? "", 10);
const clients = Number.parseInt(cStr ?? "", 10);
const n = Number.parseInt(nStr ?? "", 10);
const seconds = Number.parseFloat(secStr ?? "");
if (!modelPath || !(threads > 0) || !(clients > 0) || !(n > 1) || !(seconds > 0)) {
  console.error("usage: node serve_ref.mjs MODEL.gguf THREADS CLIENTS N SECONDS [PROMPT]");
  process.exit(2);
}
const prompt = promptArg ?? "The quick brown fox jumps over the lazy dog";
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
const model = await llama.loadModel({modelPath, useMmap: true});
const input = [...model.tokenize(prompt, false)];
if (model.tokens.bos != null) input.unshift(model.tokens.bos);
const perSeq = input.length + n + 16;
const context = await model.createContext({
  contextSize: Math.max(512, clients * perSeq), sequences: clients, threads,
  batchSize: Math.max(64, clients * 8),
});

const ttft = [], tpot = [];
let tokens = 0, requests = 0;
const now = () => Number(process.hrtime.bigint()) / 1e9;

async function worker(sequence, end) {
  while (now() < end) {
    await sequence.clearHistory();
    const t0 = now();
    let count = 0, first = 0, last = 0;
    for await (const _ of sequence.evaluate(input, {temperature: 0})) {
      last = now();
      if (++count === 1) first = last;
      if (count >= n) break;
    }
    tokens += count;
    requests += 1;
    ttft.push(first - t0);
    if (count > 1) tpot.push((last - first) / (count - 1));
  }
}

// One untimed request per sequence first: the first decode's setup is not
// serving.
const sequences = Array.from({length: clients}, () => context.getSequence());
await Promise.all(sequences.map((s) => worker(s, now() + 1e-9)));
ttft.length = 0; tpot.length = 0; tokens = 0; requests = 0;
const start = now();
await Promise.all(sequences.map((s) => worker(s, start + seconds)));
const wall = now() - start;

const pct = (v, p) => {
  if (v.length === 0) return 0;
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length))) - 1];
};
const rel = llama.llamaCppRelease;
const nlc = JSON.parse(readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url)));
console.log(JSON.stringify({
  engine: `llama.cpp ${rel.release} (${rel.repo}, prebuilt) through node-llama-cpp ${nlc.version}`,
  clients, threads, requests, tokens, seconds: wall, tok_s: tokens / wall,
  ttft_p50_s: pct(ttft, 50), ttft_p99_s: pct(ttft, 99),
  tpot_p50_s: pct(tpot, 50), tpot_p99_s: pct(tpot, 99),
}));
process.exit(0);
