#!/usr/bin/env bash
# Mutation test of minattn's core (tests/MUTANTS.md), one module at a time, then the score of
# each module. Run from anywhere; the work directory is mutants/ (git-ignored).
#
#   tests/run_mutants.sh                  every module of setup.cfg's [mutmut], in order
#   tests/run_mutants.sh blockwise masks  only these (minattn.<name>, e.g. engine.checks)
#   JOBS=2 tests/run_mutants.sh           mutmut's --max-children (default 1)
#   tests/run_mutants.sh --score          only print the scores of what has run
#
# Naming modules re-runs their mutants; the scores count every mutant mutmut has a result for.
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(engine.checks masks heads linear dropout blockwise position_wise normalization encoder
     attention multi_head positional rope decoder engine.threads engine.autograd_rules)
if [ "${1:-}" != "--score" ]; then
    modules=("$@")
    [ ${#modules[@]} -gt 0 ] || modules=("${ALL[@]}")
    for module in "${modules[@]}"; do
        echo "== minattn.$module"
        mutmut run --max-children "${JOBS:-1}" "minattn.$module.*" | tail -n 3
    done
fi
python tests/mutant_scores.py
