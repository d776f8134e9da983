#!/bin/sh
# generate --chat end to end without npm: a vocabulary-only GGUF from a tiny
# ChatML tokenizer.json (epyctune-mkmodel vocab), a tiny model carrying it
# (mkmodel --vocab), then the prompt generate builds must be the ChatML text
# encoded with its markup as control tokens.
# Usage: chat_cli_test.sh ENGINE_BIN MKMODEL_BIN TOKENIZER_JSON WORKDIR
set -eu
e=$1
mk=$2
json=$3
w=$4
mkdir -p "$w"
"$mk" vocab --from-json "$json" "$w/v.gguf"
"$mk" mkmodel "$w/m.gguf" --shape tiny --vocab "$w/v.gguf" 2>/dev/null
"$e" generate -m "$w/m.gguf" --chat --system "Be brief." -p "Hi" -n 2 --temp 0 --json 2>/dev/null |
  tr -d ' \n' > "$w/out.json"
# (the x keeps $(...) from dropping the final newline)
text=$(printf '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nx')
text=${text%x}
want=$("$e" tokenize -m "$w/v.gguf" --parse-special -p "$text" | sed 's/^ //; s/ /,/g')
case "$want" in 258,*) ;; *) echo "markup not encoded as <|im_start|> (258): $want"; exit 1 ;; esac
if ! grep -q "\"prompt_tokens\":\[$want\]" "$w/out.json"; then
  echo "generate --chat prompt differs; want [$want]"
  cat "$w/out.json"
  exit 1
fi
echo "ok: [$want]"
