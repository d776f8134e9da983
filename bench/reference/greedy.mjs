// Greedy generation with llama.cpp (node-llama-cpp's prebuilt CPU build), for
// comparing epyctune-engine's tokens with a reference on the same GGUF file.
//   node greedy.mjs MODEL.gguf "prompt" [N] [--no-bos]
// Prints one JSON line: {"prompt_tokens": [...], "tokens": [...]}.
import {getLlama} from "node-llama-cpp";

const args = process.argv.slice(2);
const noBos = args.includes("--no-bos");
const [modelPath, prompt, nStr] = args.filter((a) => a !== "--no-bos");
if (!modelPath || prompt === undefined) {
  console.error("usage: node greedy.mjs MODEL.gguf PROMPT [N] [--no-bos]");
  process.exit(2);
}
const n = Number.parseInt(nStr ?? "64", 10);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 2048});
const sequence = context.getSequence();
const text = [...model.tokenize(prompt, false)];
const bos = model.tokens.bos;
const input = !noBos && bos != null ? [bos, ...text] : text;
const tokens = [];
for await (const t of sequence.evaluate(input, {temperature: 0})) {
  tokens.push(t);
  if (tokens.length >= n) break;
}
console.log(JSON.stringify({prompt_tokens: input, tokens}));
