"""Subject-verb agreement pairs with attractors, written for minattn (walkthrough.md, "Patching:
where *plural* travels"; docs/agreement_patching.py runs them).

Each base sentence has a subject and, between it and the verb, an attractor: a noun in a
prepositional phrase or a relative clause, of either number. Its two versions differ in the
number of the subject only, so they have the same tokens but one (SmolLM2's tokenizer: checked
by tests/test_cli_patch.py). PAIRS holds each base both ways round: the plural version clean
(answer " are", wrong " is"), and the singular version clean (answer " is", wrong " are").
"""

# (plural version, singular version, the attractor's number, its construction)
BASES = [
    ("The keys to the cabinet", "The key to the cabinet", "singular", "prepositional phrase"),
    ("The keys to the cabinets", "The key to the cabinets", "plural", "prepositional phrase"),
    ("The books on the shelf", "The book on the shelf", "singular", "prepositional phrase"),
    ("The books on the shelves", "The book on the shelves", "plural", "prepositional phrase"),
    ("The dogs near the house", "The dog near the house", "singular", "prepositional phrase"),
    ("The dogs near the houses", "The dog near the houses", "plural", "prepositional phrase"),
    ("The letters from the teacher", "The letter from the teacher", "singular",
     "prepositional phrase"),
    ("The letters from the teachers", "The letter from the teachers", "plural",
     "prepositional phrase"),
    ("The windows of the car", "The window of the car", "singular", "prepositional phrase"),
    ("The windows of the cars", "The window of the cars", "plural", "prepositional phrase"),
    ("The roads to the city", "The road to the city", "singular", "prepositional phrase"),
    ("The roads to the cities", "The road to the cities", "plural", "prepositional phrase"),
    ("The pictures on the wall", "The picture on the wall", "singular", "prepositional phrase"),
    ("The pictures on the walls", "The picture on the walls", "plural", "prepositional phrase"),
    ("The flowers in the garden", "The flower in the garden", "singular",
     "prepositional phrase"),
    ("The flowers in the gardens", "The flower in the gardens", "plural",
     "prepositional phrase"),
    ("The boys that the girl likes", "The boy that the girl likes", "singular",
     "relative clause"),
    ("The boys that the girls like", "The boy that the girls like", "plural", "relative clause"),
    ("The doctors who the patient trusts", "The doctor who the patient trusts", "singular",
     "relative clause"),
    ("The doctors who the patients trust", "The doctor who the patients trust", "plural",
     "relative clause"),
    ("The cats that the dog chased", "The cat that the dog chased", "singular",
     "relative clause"),
    ("The cats that the dogs chased", "The cat that the dogs chased", "plural",
     "relative clause"),
    ("The students who the teacher helps", "The student who the teacher helps", "singular",
     "relative clause"),
    ("The students who the teachers help", "The student who the teachers help", "plural",
     "relative clause"),
]

# (clean, corrupted, answer, wrong, attractor number, construction): each base both ways round
PAIRS = [pair for plural, singular, attractor, kind in BASES for pair in (
    (plural, singular, " are", " is", attractor, kind),
    (singular, plural, " is", " are", attractor, kind))]
