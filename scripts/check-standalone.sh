#!/usr/bin/env bash
# The repository must build, test and document itself alone: no tracked file
# may point outside it at a sibling directory.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\.\./'"shared"
if hits=$(git grep -nI -e "$pattern" -- . 2>/dev/null); then
  echo "check-standalone: tracked files refer to a sibling directory outside the repository:" >&2
  echo "$hits" >&2
  echo "check-standalone: move what they need into the repository (test data under tests/data/)." >&2
  exit 1
fi
echo "check-standalone: no tracked file refers outside the repository"
