// `epyctune-engine chat`: an interactive conversation in the model's chat
// template, as llama-cli -cnv and ollama run. Each line on stdin is a user
// turn (a trailing backslash continues it on the next line); the reply
// streams to stdout. /bye or end of input leaves, /clear starts over.
// Ctrl-C during a reply stops that reply; at the prompt it leaves (130).
//
// Every turn re-renders the whole conversation, but one KV cache is kept
// across turns: a one-slot BatchDecoder, whose prefix reuse computes only
// the tokens after the longest common prefix of the new rendering and what
// the cache holds. A turn costs its own tokens, not the history's.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "apps/epyctune-engine/launch_options.hpp"
#include "apps/epyctune-engine/llama_flags.hpp"
#include "engine/chat/chat_template.hpp"
#include "engine/gguf/gguf.hpp"
#include "engine/serving/batch_decoder.hpp"
#include "engine/serving/engine.hpp"

namespace epyctune::engine_cli {
namespace {

namespace eng = epyctune::engine;

struct ChatArgs {
  eng::serving::EngineConfig engine;
  eng::sampling::SamplerParams sampler;
  int n_predict = -1;  // per reply; -1: until the model ends its turn or the context is full
  std::string system, chat_template;
  bool verbose = false;
};

// Set by SIGINT while a reply is generating; polled before each pass.
std::atomic<bool> g_replying{false};
std::atomic<bool> g_stop_reply{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  if (g_replying.load()) {
    g_stop_reply.store(true);
    return;
  }
  const char nl = '\n';
  (void)!::write(STDOUT_FILENO, &nl, 1);
  ::_exit(130);
}

void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
}

// The next user turn: one line, or several joined where a line ends in '\'.
// false at end of input.
bool read_turn(bool tty, std::string& turn) {
  turn.clear();
  std::string line;
  for (;;) {
    if (tty) {
      std::fputs(turn.empty() ? "> " : ". ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) return !turn.empty();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool more = !line.empty() && line.back() == '\\';
    if (more) line.pop_back();
    turn += line;
    if (!more) return true;
    turn += '\n';
  }
}

class Chat {
 public:
  Chat(const ChatArgs& a, eng::serving::Engine& e, eng::chat::Style style)
      : a_(a),
        e_(e),
        style_(std::move(style)),
        dec_(e.target(), 1, e.batch_options(e.config().batch, eng::serving::kDefaultPrefillGap)) {
    clear();
  }

  void clear() {
    messages_.clear();
    if (!a_.system.empty()) messages_.push_back({"system", a_.system});
  }

  // One user turn and the model's reply, streamed to stdout.
  void turn(const std::string& user) {
    messages_.push_back({"user", user});
    const auto prompt = e_.tokenizer().encode(eng::chat::render(style_, messages_, true), false,
                                              /*parse_special=*/true);
    const int room = e_.n_ctx() - static_cast<int>(prompt.size());
    if (room < 1) {
      messages_.pop_back();
      std::fprintf(stderr,
                   "epyctune-engine chat: the conversation is %zu tokens with this turn, and "
                   "the context %d: /clear starts over, -c/--ctx-size N sets it\n",
                   prompt.size(), e_.n_ctx());
      return;
    }
    std::string reply;
    eng::serving::SlotRequest r;
    r.prompt = prompt;
    r.n_predict = a_.n_predict < 0 ? room : std::min(a_.n_predict, room);
    r.sampler = a_.sampler;
    r.is_stop = [this](int32_t t) { return e_.tokenizer().is_eog(t); };
    r.on_token = [this, &reply](int32_t t) {
      if (e_.tokenizer().is_eog(t)) return true;
      const std::string piece = e_.tokenizer().token_to_piece(t);
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    r.cancelled = [] { return g_stop_reply.load(); };
    g_stop_reply = false;
    g_replying = true;
    dec_.add(std::move(r));
    std::vector<eng::serving::SlotResult> done;
    while (done.empty()) done = dec_.step();
    g_replying = false;
    std::fputs("\n", stdout);
    std::fflush(stdout);
    // A stopped reply stays as far as it went: it is what the user saw.
    messages_.push_back({"assistant", reply});
    if (a_.verbose) report(done.front());
  }

 private:
  static void report(const eng::serving::SlotResult& r) {
    const auto& st = r.stats;
    const char* how = r.finish == eng::serving::SlotResult::Finish::cancelled ? ", stopped" : "";
    std::fprintf(stderr,
                 "[chat] prompt %lld tokens, %lld new (%lld cached) in %.3f s; reply %lld tokens "
                 "in %.3f s (%.2f tok/s)%s\n",
                 static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.prompt_tokens - r.reused_prompt_tokens),
                 static_cast<long long>(r.reused_prompt_tokens), st.prompt_s,
                 static_cast<long long>(st.generated), st.generate_s,
                 st.generate_s > 0 ? double(st.generated) / st.generate_s : 0.0, how);
  }

  const ChatArgs& a_;
  eng::serving::Engine& e_;
  eng::chat::Style style_;
  eng::serving::BatchDecoder dec_;
  std::vector<eng::chat::Message> messages_;
};

int run_chat(const ChatArgs& a) {
  a.sampler.validate();
  if (a.n_predict < -1)
    throw std::invalid_argument("-n/--n-predict: must be >= 0, or -1 (until the model ends)");
  eng::serving::Engine e(a.engine);
  // The chat format comes from the header: an unrecognised template fails
  // before the weights load.
  const auto jinja = eng::gguf::File::open(e.config().model)->get_string("tokenizer.chat_template");
  const eng::chat::Style style = eng::chat::style_for(jinja.value_or(""), a.chat_template);
  load_engine(e);
  e.attach_driver();
  const bool tty = ::isatty(STDIN_FILENO) == 1;
  if (tty)
    std::fprintf(stderr,
                 "epyctune-engine chat: %s (%s format, context %d). /bye leaves, /clear starts "
                 "over, a line ending in \\ continues; Ctrl-C stops a reply.\n",
                 e.config().model.c_str(),
                 std::string(eng::chat::family_name(style.family)).c_str(), e.n_ctx());
  install_sigint();
  Chat chat(a, e, style);
  std::string turn;
  while (read_turn(tty, turn)) {
    if (turn.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (turn == "/bye") break;
    if (turn == "/clear") {
      chat.clear();
      std::fprintf(stderr, "[chat] cleared\n");
    } else if (turn == "/?" || turn == "/help") {
      std::fprintf(stderr, "/bye leaves, /clear starts over, a line ending in \\ continues\n");
    } else if (turn[0] == '/' && turn.find_first_of(" \n") == std::string::npos) {
      std::fprintf(stderr, "unknown command %s: /bye, /clear, /?\n", turn.c_str());
    } else {
      chat.turn(turn);
    }
  }
  if (const std::string bad = e.check_placement(); !bad.empty())
    throw eng::serving::PlacementMismatch(
        "threads or memory are not where the launch config puts them:\n" + bad);
  return 0;
}

void add_chat_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand(
      "chat", "Chat with the model in its chat template, one line of stdin per turn");
  add_engine_options(cmd, args->engine);
  cmd->add_option("-n,--n-predict,--predict", args->n_predict,
                  "Tokens per reply at most (-1: until the model ends its turn or the context "
                  "is full)")
      ->capture_default_str();
  add_sampling_options(cmd, args->sampler);
  cmd->add_option("--system-prompt,--system", args->system, "System message; also -sys");
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format when the model's is unrecognised: chatml, llama3, deepseek, "
                  "harmony");
  cmd->add_flag("--verbose", args->verbose,
                "After each reply, a line on stderr: prompt tokens computed and reused, reply "
                "speed");
  cmd->add_flag("--conversation")->group("");  // llama-cli's -cnv: a chat always is one
  add_launch_options(cmd, args->engine.launch);
  add_gpu_noops(cmd);
  cmd->callback([args, &global] {
    try {
      global.exit_code = run_chat(*args);
    } catch (const eng::serving::PlacementMismatch& e) {
      std::fprintf(stderr, "epyctune-engine chat: %s\n", e.what());
      global.exit_code = kExitPlacement;
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "epyctune-engine chat: error: %s\n", error_text(e).c_str());
      global.exit_code = 1;
    }
  });
}

const Registrar reg(&add_chat_command);

}  // namespace
}  // namespace epyctune::engine_cli
