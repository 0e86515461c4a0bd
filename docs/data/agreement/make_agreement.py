"""Writes train.jsonl and heldout.jsonl beside this file: the fine-tuning demonstration's data
(walkthrough.md, "Fine-tuning: gradients through a real model"; README, "Fine-tuning").

Each example asks for the verb that agrees with a sentence's subject across an "attractor", a
noun of the other number between them (the running example's "The keys to the cabinet ___"),
and the reply is the one word, "is" or "are". The held-out sentences use subjects and attractors
that no training sentence uses, so a model must learn the answer's form and the agreement, not
sentences. Deterministic: `python docs/data/agreement/make_agreement.py` writes the same files.
"""
import json
import random
from pathlib import Path

# (singular, plural) subjects and attractors; the held-out ones are the last few of each list
SUBJECTS = [("key", "keys"), ("book", "books"), ("letter", "letters"), ("picture", "pictures"),
            ("lamp", "lamps"), ("cup", "cups"), ("coat", "coats"), ("map", "maps"),
            ("box", "boxes"), ("ticket", "tickets"), ("bottle", "bottles"), ("chair", "chairs"),
            ("phone", "phones"), ("plant", "plants"), ("shoe", "shoes"), ("glass", "glasses"),
            ("report", "reports"), ("painting", "paintings"), ("toy", "toys"),
            ("drawer", "drawers"), ("candle", "candles"), ("bag", "bags"),
            ("clock", "clocks"), ("blanket", "blankets"), ("pencil", "pencils"),
            ("window", "windows")]
PLACES = [("to the cabinet", "to the cabinets"), ("on the shelf", "on the shelves"),
          ("near the door", "near the doors"), ("for the teacher", "for the teachers"),
          ("by the window", "by the windows"), ("from the garden", "from the gardens"),
          ("under the desk", "under the desks"), ("of the neighbour", "of the neighbours"),
          ("beside the bed", "beside the beds"), ("behind the sofa", "behind the sofas"),
          ("with the red handle", "with the red handles"),
          ("in the old house", "in the old houses")]
ENDINGS = ["on the table", "very old", "missing again", "ready now", "in the kitchen",
           "quite heavy", "still here", "broken", "too small", "new"]
HELD_OUT_SUBJECTS, HELD_OUT_PLACES = 6, 3
QUESTION = 'Fill in the blank with "is" or "are": {sentence}'


def example(rng, subjects, places):
    (one, many), (place_one, place_many) = rng.choice(subjects), rng.choice(places)
    plural = rng.random() < 0.5
    subject, attractor = (many, place_one) if plural else (one, place_many)
    sentence = f"The {subject} {attractor} ___ {rng.choice(ENDINGS)}."
    return {"messages": [{"role": "user", "content": QUESTION.format(sentence=sentence)},
                         {"role": "assistant", "content": "are" if plural else "is"}]}


def main():
    rng = random.Random(52)
    here = Path(__file__).parent
    train = (SUBJECTS[:-HELD_OUT_SUBJECTS], PLACES[:-HELD_OUT_PLACES], 240, "train.jsonl")
    held_out = (SUBJECTS[-HELD_OUT_SUBJECTS:], PLACES[-HELD_OUT_PLACES:], 40, "heldout.jsonl")
    for subjects, places, n, name in (train, held_out):
        lines = {json.dumps(example(rng, subjects, places)) for _ in range(20 * n)}
        lines = sorted(lines)
        rng.shuffle(lines)
        (here / name).write_text("\n".join(lines[:n]) + "\n")


if __name__ == "__main__":
    main()
