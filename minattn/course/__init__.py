"""The course: exercise stubs, the properties that grade them, the grader, the classic
mistakes (pitfalls) and `swap`, which puts a student's function in place of minattn's.

    exercises/      the stubs, copied by `python -m minattn exercises DIR`
    properties/     what attention must satisfy, each against a slow reference (needs hypothesis):
                    one file per exercise (ex01_softmax.py, ...), the machinery apart
    contract.py     what every call of a student's function is held to, whatever it computes
    grader.py       `python -m minattn check FILE.py [FILE.py ...] [--part N]`, or a folder
    pitfalls.py     classic bugs as buggy variants, for the grader's worked examples
    swap.py         minattn.swap(name=f): use your own function wherever minattn calls one

Built on the concepts; the concepts never import it.
"""
