// How many prompt tokens a batched step carries while other requests
// decode. A step's prompt rows delay every decoding request's next token:
// on a host where a pass is bound by compute, 64 prompt rows beside 4
// decoding rows made that step 10x a decode-only one. The pacer measures
// decode-only steps and mixed ones, and sizes the prompt chunk so that a
// mixed step takes about gap_target times a decode-only step as it was
// when the prompt rows began; with nothing decoding, the whole budget goes
// to prompts. A gap_target of 0 turns the pacing off: every step takes the
// whole budget.
#pragma once

namespace epyctune::engine::serving {

// serve's --prefill-gap, and every layer's default below it. A user feels
// the longest gap, which is a mixed pass plus whatever the host adds: on
// two shared vCPUs a stall alone stretched a gap 1.5-2.3x, so 2.5 left too
// little room under 3x the decoders' usual gap. A lower target reads a long
// prompt beside decoders more slowly (1.2-1.45x longer at 2.0 than at 2.5).
inline constexpr double kDefaultPrefillGap = 2.0;

class PrefillPacer {
 public:
  // budget: prompt tokens per step at most; gap_target: 0 (off) or > 1.
  explicit PrefillPacer(int budget, double gap_target = kDefaultPrefillGap);
  // Prompt tokens the next step may take while `decoding` requests decode
  // (0 now and then: a step that times them alone).
  int chunk(int decoding) const;
  // A step ran `decoding` decode rows and `prompt` prompt rows in `seconds`.
  void observed(int decoding, int prompt, double seconds);

 private:
  int budget_;
  double target_;
  int chunk_;              // prompt tokens per step while others decode
  int base_rows_ = -1;     // the decode rows base_s_ was measured at
  double base_s_ = 0;      // decode-only step time (moving average)
  double ref_s_ = 0;       // base_s_ when the prompt rows began (0: none)
  double row_s_ = 0;       // a prompt row's cost beside them (moving average)
  int mixed_ = 0;          // steps with prompt rows since the last without
  int last_prompt_ = 0;    // the last mixed step's prompt rows (0: none yet)
  double last_extra_ = 0;  // and its time over base_s_
};

}  // namespace epyctune::engine::serving
