// libFuzzer target: GGUF parsing and the tokenizer loader on arbitrary bytes.
// Anything but a clean FormatError (a crash, a sanitizer report, another
// exception type escaping) is a finding. See tests/fuzz/README.md.
#include <cstdlib>

#include "engine/gguf/gguf.hpp"
#include "engine/tokenizer/tokenizer.hpp"

using namespace epyctune::engine;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<gguf::File> f;
  try {
    f = gguf::File::parse({data, size}, "fuzz.gguf");
  } catch (const gguf::FormatError&) {
    return 0;
  }
  // Every accepted tensor must lie inside the buffer: touch both ends.
  unsigned sum = 0;
  for (const auto& t : f->tensors()) sum += t.data[0] + t.data[t.nbytes - 1];
  if (sum == 0xFFFFFFFFu) std::abort();  // keeps the reads
  try {
    const auto tok = Tokenizer::from_gguf(*f);
    const char* texts[] = {"Hello world! It's 2024.\n\n\tcaf\xc3\xa9 \xf0\x9f\xa6\x99  x", "", " ",
                           "\xff\xfe broken \xc3"};
    for (const char* text : texts) {
      const auto ids = tok->encode(text, true);
      for (int32_t id : ids)
        if (id < 0 || id >= tok->n_vocab()) std::abort();
      (void)tok->decode(ids);
    }
    const int n = std::min(tok->n_vocab(), 4096);
    for (int32_t id = 0; id < n; ++id) (void)tok->token_to_piece(id);
  } catch (const gguf::FormatError&) {
  }
  return 0;
}
