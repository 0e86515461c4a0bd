"""mutmut 3.8.1, taught to mutate functions that carry minattn's policy decorators.

mutmut 3 never mutates a decorated function (a decorator may have side effects when the
function is copied, or may not be a plain wrapper). In minattn the decorators are the engine
room's policies (`@float16_in_float32`, `@gradient_by_hand`, `@one_blas_thread`, autograd's
`@primitive`, `@contextlib.contextmanager`, engine/variants.py's `@dispatch` and `@implements`,
`@in_query_blocks`, `@in_one_product`), and they sit on the functions the reader comes for:
`softmax`, `scaled_dot_product_attention`, `layer_norm`, `rms_norm`, `linear`, `relu`, `gelu`,
and the variants (a family's block, long-context RoPE, head_mask).
Left alone, mutmut would test everything except the formulas.

These policies are pure wrappers, so they can wrap mutmut's trampoline instead of the function:

    @float16_in_float32("x")          the policies, as written,
    @gradient_by_hand(softmax_vjp)    around
    @_mutmut_mutated(...)             mutmut's trampoline, which calls
    def softmax(x, axis=-1): ...      the original or the active mutant: both undecorated copies

so a mutant of `softmax` runs inside exactly the policies the original runs in. Two patches do
it: the mutation visitor no longer skips a function whose decorators are all policies (the
decorator lines themselves are still never mutated), and the copies behind the trampoline drop
the decorators (which the trampoline already applies once).

    python tests/mutmut_policies.py run [mutant names]    instead of `mutmut run`
    python tests/mutmut_policies.py generate              only (re)write mutants/ and its
                                                          list of mutants (no test runs), so
                                                          that tests/mutant_scores.py can name
                                                          the new ones before a run

(run as a script, not `-m tests.…`: mutmut's pytest must import the `tests` package from its
mutants/ copy, not find this one already imported)

tests/run_mutants.sh calls it; every other mutmut command works unchanged, since only mutant
generation differs. Pinned to mutmut 3.8.1: the patched names are its internals."""
import os
import sys

import libcst as cst
import mutmut
from mutmut.mutation import file_mutation

POLICIES = {"float16_in_float32", "gradient_by_hand", "one_blas_thread", "primitive",
            "contextmanager",
            # engine/variants.py: @dispatch wraps the canonical function (it calls it, or a
            # variant), @implements only registers the variant and returns it as it is; and the
            # engine's @in_query_blocks (attention in blocks of queries) and @in_one_product (one
            # product for several weights) call the function they wrap: each wraps (or
            # registers) the trampoline, which runs the original or the active mutant. Not
            # @by_value (engine/memo.py): its memo would keep the original's results, computed in
            # mutmut's parent process before the fork, and hand them to a mutant. And
            # engine/threads.py's @threads_chosen_by_timing (causal_lm): on one BLAS thread, as
            # tests/run_mutants.sh runs, it calls the function as it is
            "dispatch", "implements", "in_query_blocks", "in_one_product",
            "threads_chosen_by_timing",
            # functools.wraps, on the wrapper a policy's factory returns (the decision it makes at
            # every call): mutated as part of the factory, so its mutants are active only where a
            # test applies the policy inside the test (tests/MUTANTS.md)
            "wraps"}


def _name(decorator):
    node = decorator.decorator
    node = node.func if isinstance(node, cst.Call) else node
    return node.attr.value if isinstance(node, cst.Attribute) else getattr(node, "value", None)


def _only_policies(node):
    return (isinstance(node, cst.FunctionDef) and node.decorators
            and all(_name(d) in POLICIES for d in node.decorators))


_skip = file_mutation.MutationVisitor._skip_node_and_children


def _skip_unless_policies(self, node):
    if _only_policies(node):
        # judge the function as if undecorated (pragmas and name rules still apply)
        return _skip(self, node.with_changes(decorators=()))
    return _skip(self, node)


_arrange = file_mutation.function_trampoline_arrangement


def _arrange_policies_outside(function, mutants, class_name):
    declarations, methods, assignments, names = _arrange(function, mutants, class_name)
    if _only_policies(function):
        # methods[0] is the trampoline (keeps the policies); the rest are the original and the
        # mutants, which the trampoline calls from inside the policies
        methods = [methods[0]] + [m.with_changes(decorators=()) for m in methods[1:]]
    return declarations, methods, assignments, names


def main():
    assert mutmut.__version__ == "3.8.1", f"tests/mutmut_policies.py patches mutmut 3.8.1, not {mutmut.__version__}"
    file_mutation.MutationVisitor._skip_node_and_children = _skip_unless_policies
    file_mutation.function_trampoline_arrangement = _arrange_policies_outside
    from mutmut import __main__ as mutmut_main
    if sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this folder, put first by `python tests/mutmut_policies.py`
    if sys.argv[1:] == ["generate"]:  # the first steps of mutmut's own run, and no more
        mutmut_main.set_mutant_under_test("mutant_generation")
        os.makedirs("mutants", exist_ok=True)
        mutmut_main.copy_src_dir()
        mutmut_main.copy_also_copy_files()
        mutmut_main.setup_source_paths()
        mutmut_main.store_lines_covered_by_tests()
        mutmut_main.create_mutants(os.cpu_count() or 1)
        return
    sys.argv[0] = "mutmut"
    mutmut_main.cli()


if __name__ == "__main__":
    main()
