// Step 9, verification, changes nothing: `epyctune verify` plans the knobs of
// the other steps and shows them as a checklist (stack/checklist.hpp). It
// is a step so that the stack reads as the operator runs it, and so that
// `--steps 9` names it.
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

const StepRegistrar registrar({
    .number = 9,
    .name = "verify",
    .title = "Verification checklist (epyctune verify)",
});

}  // namespace

}  // namespace epyctune::stack
