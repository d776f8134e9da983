// Speculative decoding in llama.cpp (node-llama-cpp's prebuilt CPU build,
// its DraftSequenceTokenPredictor: a draft model's sequence proposes up to
// MAX_DRAFT tokens that the target verifies in one batch), beside the target
// alone, on the same files, threads and prompt, greedy. Both models share
// the THREADS CPUs, as llama.cpp's llama-speculative does.
//   node spec.mjs TARGET.gguf DRAFT.gguf THREADS [N] [MAX_DRAFT] [MIN_CONFIDENCE] [PROMPT]
// Prints one JSON line: {"threads", "tokens", "plain_tok_s", "spec_tok_s",
// "same_tokens", "validated", "refuted"}. Each rate times the tokens after
// the first (the prompt's batched pass is not a decode step).
import {getLlama, DraftSequenceTokenPredictor} from "node-llama-cpp";

const [target, draft, threadsStr, nStr, maxStr, confStr, promptArg] = process.argv.slice(2);
if (!target || !draft || !threadsStr) {
  console.error(
      "usage: node spec.mjs TARGET.gguf DRAFT.gguf THREADS [N] [MAX_DRAFT] [MIN_CONFIDENCE] [PROMPT]");
  process.exit(2);
}
const threads = Number.parseInt(threadsStr, 10);
const n = Number.parseInt(nStr ?? "128", 10);
const maxTokens = Number.parseInt(maxStr ?? "16", 10);
const minConfidence = Number.parseFloat(confStr ?? "0.6");
const prompt = promptArg ?? "Once upon a time";
if (!(threads > 0) || !(n > 1) || !(maxTokens > 0) || !(minConfidence >= 0)) {
  console.error("spec.mjs: THREADS > 0, N > 1, MAX_DRAFT > 0 and MIN_CONFIDENCE >= 0 are required");
  process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
const tModel = await llama.loadModel({modelPath: target, useMmap: true});
const dModel = await llama.loadModel({modelPath: draft, useMmap: true});
const input = [...tModel.tokenize(prompt, false)];
if (tModel.tokens.bos != null) input.unshift(tModel.tokens.bos);

async function run(sequence) {
  const out = [];
  let t0 = 0n, t1 = 0n;
  for await (const tok of sequence.evaluate(input, {temperature: 0})) {
    out.push(tok);
    if (out.length === 1) t0 = process.hrtime.bigint();
    if (out.length >= n) { t1 = process.hrtime.bigint(); break; }
  }
  if (out.length < n) {
    console.error(`spec.mjs: generation stopped after ${out.length} of ${n} tokens`);
    process.exit(1);
  }
  return {tokens: out, tok_s: (n - 1) / (Number(t1 - t0) / 1e9)};
}

const ctxOpts = {contextSize: 1024, threads, batchSize: 64};
const plainCtx = await tModel.createContext(ctxOpts);
const plain = await run(plainCtx.getSequence());
await plainCtx.dispose();

const tCtx = await tModel.createContext(ctxOpts);
const dCtx = await dModel.createContext(ctxOpts);
const predictor =
    new DraftSequenceTokenPredictor(dCtx.getSequence(), {maxTokens, minConfidence});
const seq = tCtx.getSequence({tokenPredictor: predictor});
const spec = await run(seq);
const stats = seq.tokenPredictions ?? {};
console.log(JSON.stringify({
  threads, tokens: n, max_draft: maxTokens, min_confidence: minConfidence,
  plain_tok_s: plain.tok_s, spec_tok_s: spec.tok_s,
  same_tokens: plain.tokens.every((t, i) => t === spec.tokens[i]),
  validated: stats.validated ?? null, refuted: stats.refuted ?? null,
}));
process.exit(0);
