// Decode speed of llama.cpp (node-llama-cpp's prebuilt CPU build) on a GGUF
// file, for printing the reference's tok/s beside epyctune-engine's on the
// same file, the same threads and the same kind of step: one token per pass
// after a short prompt, greedy.
//   node speed.mjs MODEL.gguf THREADS [N] [REPEATS]
// Prints one JSON line: {"threads", "tokens", "tok_s": [per repeat]}. Each
// repeat times the passes after the first generated token (the prompt's
// batched pass is not a decode step), on a fresh sequence.
import {getLlama} from "node-llama-cpp";

const [modelPath, threadsStr, nStr, repStr] = process.argv.slice(2);
if (!modelPath || !threadsStr) {
  console.error("usage: node speed.mjs MODEL.gguf THREADS [N] [REPEATS]");
  process.exit(2);
}
const threads = Number.parseInt(threadsStr, 10);
const n = Number.parseInt(nStr ?? "32", 10);
const repeats = Number.parseInt(repStr ?? "1", 10);
if (!(threads > 0) || !(n > 1) || !(repeats > 0)) {
  console.error("speed.mjs: THREADS > 0, N > 1 and REPEATS > 0 are required");
  process.exit(2);
}
// maxThreads 0: the context's thread count is used as given, not as a hint.
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
const model = await llama.loadModel({modelPath, useMmap: true});
const context = await model.createContext({contextSize: 512, threads, batchSize: 64});
const input = [...model.tokenize("The quick brown fox", false)];
if (model.tokens.bos != null) input.unshift(model.tokens.bos);
const rates = [];
for (let r = 0; r < repeats; ++r) {
  const sequence = context.getSequence();
  let count = 0, t0 = 0n, t1 = 0n;
  for await (const _ of sequence.evaluate(input, {temperature: 0})) {
    if (++count === 1) t0 = process.hrtime.bigint();
    if (count >= n) { t1 = process.hrtime.bigint(); break; }
  }
  if (count < n) {
    console.error(`speed.mjs: generation stopped after ${count} of ${n} tokens`);
    process.exit(1);
  }
  rates.push((n - 1) / (Number(t1 - t0) / 1e9));
  sequence.dispose();
}
console.log(JSON.stringify({threads, tokens: n, tok_s: rates}));
process.exit(0);
