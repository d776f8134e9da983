#include "engine/tokenizer/vocab_writer.hpp"
