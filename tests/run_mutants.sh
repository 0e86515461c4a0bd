#!/usr/bin/env bash
# Mutation test of minattn's core (tests/MUTANTS.md), one module at a time, then the score of
# each module. Run from anywhere; the work directory is mutants/ (git-ignored).
#
#   tests/run_mutants.sh                  every module of setup.cfg's [mutmut], in order
#   tests/run_mutants.sh blockwise masks  only these (minattn.<name>, e.g. engine.checks)
#   tests/run_mutants.sh masks:2/3        the 2nd of 3 parts of a module (its functions split
#                                         into 3 groups of about equal length), run afresh
#   tests/run_mutants.sh --all            every module in one mutmut run (one start-up, the
#                                         fastest way through everything; no per-module times;
#                                         with SURVIVORS=1, every module's survivors)
#   JOBS=2 tests/run_mutants.sh           mutmut's --max-children (default 1)
#   FRESH=1 tests/run_mutants.sh masks    re-run every mutant of the module, not only the
#                                         ones without a result (new, or in changed functions)
#   SURVIVORS=1 tests/run_mutants.sh      re-run only the survivors (after adding or changing
#                                         tests: first forgets which tests reach which function,
#                                         since mutmut tracks tests by name, not by content)
#   tests/run_mutants.sh --score          only print the scores of what has run
#
# BLAS on one thread: each mutant runs in a process forked from mutmut's, and BLAS worker
# threads (or blockwise_attention's, which follow the BLAS limit) inherited across a fork can
# deadlock it, and a deadlocked mutant uses no CPU, so mutmut's CPU-time limit never stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# and no thread count chosen by timing (engine/threads.py): nothing to choose on one thread, and
# the repository's conftest.py, which turns it off for the suite, is not in mutmut's copy
export MINATTN_TIMED_THREADS=0
ALL=(engine.checks engine.decoder_checks masks heads linear dropout blockwise position_wise
     normalization transformer_encoder attention multi_head positional rope rope_scaling softcap
     kv_cache transformer_decoder language_model generation loss engine.threads
     engine.autograd_rules engine.dtypes engine.signatures engine.devices mla sinks differential
     engine.fused_products engine.query_blocks engine.memo causal_linear_attention
     gated_delta_rule gated_deltanet gated_attention engine.recurrence_checks
     engine.hybrid_checks models.llama_layout models.chat_model models.conversation
     head_mask long_context engine.variants engine.param_checks
     families.cohere families.deepseek_v3 families.diffllama families.gemma families.gpt2
     families.granite families.hf families.llama families.neox families.olmo families.phi
     families.phi3 families.qwen3 families.qwen3_next families.smollm3 families.stablelm models.checkpoints.gemma
     models.checkpoints.gguf_metadata models.checkpoints.llama models.checkpoints.olmo2 models.checkpoints.phi3 models.checkpoints.qwen models.checkpoints.smollm3)

# mutmut, its whole output kept in mutants/mutmut-run.log. mutmut first runs the tests without a
# mutant; if one fails (or cannot be collected) there is nothing to measure: mutmut stops ("failed
# to collect stats", "Failed to run clean test"), and so does this script, loudly, naming the
# failing tests, with a non-zero exit and no score.
mutmut_run() {
    mkdir -p mutants
    local log=mutants/mutmut-run.log status=0
    python tests/mutmut_policies.py run --max-children "${JOBS:-1}" "$@" >"$log" 2>&1 || status=$?
    if [ $status -ne 0 ] || grep -qE "failed to collect stats|Failed to run clean test|Failed to collect list of tests|Unable to force test failures" "$log"; then
        {
            echo "== MUTATION RUN STOPPED: the tests do not pass without a mutant (mutmut exit $status);"
            echo "== no mutant was judged and no score is given. Failing or uncollectable tests:"
            grep -E "^(FAILED|ERROR) " "$log" | sort -u | sed 's/^/   /' || echo "   (none named: see $log)"
            echo "== mutmut's last lines ($log):"
            tail -n 5 "$log" | tr '\r' '\n' | grep -v '^[[:space:]]*$' | tail -n 5 | sed 's/^/   /'
        } >&2
        exit $((status ? status : 3))
    fi
    tr '\r' '\n' <"$log" | grep -v '^[[:space:]]*$' | tail -n 3
}
[ -z "${SURVIVORS:-}" ] || rm -f mutants/mutmut-stats.json
if [ "${1:-}" = "--all" ]; then
    start=$SECONDS
    names=()
    if [ -n "${SURVIVORS:-}" ]; then  # every module's survivors, in one run
        for module in "${ALL[@]}"; do
            mapfile -t -O ${#names[@]} names < <(python tests/mutant_scores.py --survivors "minattn.$module")
        done
        echo "== all modules: ${#names[@]} survivors to run again"
    fi
    mutmut_run "${names[@]}"
    echo "== all modules: $((SECONDS - start)) s"
elif [ "${1:-}" != "--score" ]; then
    modules=("$@")
    [ ${#modules[@]} -gt 0 ] || modules=("${ALL[@]}")
    for module in "${modules[@]}"; do
        if [[ "$module" == *:*/* ]]; then
            part=${module#*:}; module=${module%%:*}
            mapfile -t names < <(python tests/mutant_scores.py --chunk "minattn.$module" "${part%/*}" "${part#*/}")
        elif [ -n "${FRESH:-}" ]; then
            names=("minattn.$module.*")
        elif [ -n "${SURVIVORS:-}" ]; then
            mapfile -t names < <(python tests/mutant_scores.py --survivors "minattn.$module")
        else
            mapfile -t names < <(python tests/mutant_scores.py --unchecked "minattn.$module")
        fi
        echo "== minattn.$module: ${#names[@]} to run"
        [ ${#names[@]} -gt 0 ] || continue
        start=$SECONDS
        mutmut_run "${names[@]}"
        echo "== minattn.$module: $((SECONDS - start)) s"
    done
fi
python tests/mutant_scores.py
