// Reading files in tokenizer tests.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace testutil {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace testutil
