// What every mode of `epyctune-engine bench` takes the same way: the model,
// repetitions, the CPUs, JSON output and the bandwidth probe's buffer.
#pragma once

#include <string>

namespace epyctune::engine_cli {

struct BenchRunOptions {
  std::string model;
  int repeat = 3;
  int threads = 0;
  std::string cpus;
  bool json = false;
  int bw_mib = 1024;
};

}  // namespace epyctune::engine_cli
