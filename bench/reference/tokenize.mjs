// llama.cpp's own tokenizer (node-llama-cpp's prebuilt build) on the inputs
// of a corpus, for checking epyctune-engine's tokenizer on the same GGUF.
//   node tokenize.mjs MODEL.gguf CORPUS
// CORPUS: inputs separated by "\n__ggml_vocab_test__\n" lines. Prints one
// line per input, " id id id" (no BOS, special token texts parsed), the
// format of `epyctune-engine tokenize --parse-special --file CORPUS`.
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, corpus] = process.argv.slice(2);
if (!modelPath || !corpus) {
  console.error("usage: node tokenize.mjs MODEL.gguf CORPUS");
  process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, vocabOnly: true});
const inputs = readFileSync(corpus, "utf8").split("\n__ggml_vocab_test__\n");
// A trailing separator ends the last input rather than starting an empty one.
if (inputs.length > 1 && inputs.at(-1) === "") inputs.pop();
const lines = inputs.map((t) => [...model.tokenize(t, true)].map((id) => " " + id).join(""));
process.stdout.write(lines.join("\n") + "\n");
