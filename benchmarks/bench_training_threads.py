"""The training runs of the command line (the tour's count model, `generate`'s sorting LM,
`induction`'s attention-only model) with each step's BLAS thread count chosen by timing
(engine/threads.py: training_step), against every step on the threads in force (how the tour and
`generate` trained before issue 56) and on one thread, quiet or beside busy processes.

    python benchmarks/bench_training_threads.py [--rounds 3] [--steps 200] [--busy 1]

Each run starts from no timings, as a new process does. Interleaved round by round
(benchmarks/_harness.py); prints the median seconds per run and its spread. `induction` trains
under one_blas_thread() (models/induction.py): its three rows should read alike.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import busy, describe, footer, header, interleaved  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="training steps per run")
    parser.add_argument("--busy", type=int, default=0, help="competing processes, on purpose")
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_info, threadpool_limits

    from minattn.engine import threads
    from minattn.models import count_task, induction, sorting_lm

    trainings = {"tour (count model)": count_task.train_count_model,
                 "generate (sorting LM)": sorting_lm.train_sort_model,
                 "induction": induction.train_induction_model}

    def timed(train):
        def run():
            threads._TUNING.choices.clear()  # a new process's
            train(steps=args.steps)
        return run

    def in_force(train):
        def run():
            threads.TIMED_THREADS = False
            try:
                train(steps=args.steps)
            finally:
                threads.TIMED_THREADS = True
        return run

    def one_thread(train):
        def run():
            with threadpool_limits(1, user_api="blas"):
                train(steps=args.steps)
        return run

    functions = {(name, kind): make(train) for name, train in trainings.items()
                 for kind, make in (("timed", timed), ("in_force", in_force),
                                    ("one_thread", one_thread))}
    n = min(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    header(args.busy)
    print(f"{args.steps} training steps a run, {n} BLAS threads in force, {args.rounds} rounds")
    with busy(args.busy):
        times = interleaved({f"{name}|{kind}": f for (name, kind), f in functions.items()},
                            args.rounds)
    print("| training | chosen by timing | every step on the threads in force | on one thread |")
    print("|---|---|---|---|")
    for name in trainings:
        print(f"| {name} | " + " | ".join(describe(times[f"{name}|{kind}"]) for kind in
                                          ("timed", "in_force", "one_thread")) + " |")
    footer()


if __name__ == "__main__":
    main()
