"""A training run's checkpoints: the trainable tree, AdamW's state, the step, the losses and
the run's settings in one .npz file, written to a file of another name in its folder and renamed
over the last (engine/files.py), so that an interrupted write leaves the last one whole."""
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..engine.files import write_replacing
from ..engine.trees import from_paths, paths

CHECKPOINT = "checkpoint.npz"


class CheckpointRefused(ValueError):
    """A checkpoint.npz that cannot be read back (cut, empty, or not one save_checkpoint wrote),
    with the reason: the commands exit 2 naming it."""


def save_checkpoint(folder, state):
    """Write state to folder/checkpoint.npz: a file of another name in the folder, then renamed
    over the last (engine/files.py), so a crash mid-write leaves the last checkpoint whole."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    flat = paths({"trainable": state["trainable"], "adam": state["adam"]})
    meta = {"step": state["step"], "losses": state["losses"], "paths": [p for p, _ in flat],
            "settings": state.get("settings")}
    arrays = {f"a{i}": np.asarray(a) for i, (_, a) in enumerate(flat)}

    def write(name):
        with open(name, "wb") as file:
            np.savez(file, meta=np.array(json.dumps(meta)), **arrays)
            file.flush()
            os.fsync(file.fileno())

    write_replacing(folder / CHECKPOINT, write)


def load_checkpoint(folder):
    """folder/checkpoint.npz -> the state train() continues from (and its "settings").
    CheckpointRefused where the file is not one save_checkpoint wrote, whole."""
    path = Path(folder) / CHECKPOINT
    try:
        with open(path, "rb") as file, np.load(file, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            tree = from_paths([(p, data[f"a{i}"]) for i, p in enumerate(meta["paths"])])
        state = {"step": meta["step"], "trainable": tree["trainable"], "adam": tree["adam"],
                 "losses": meta["losses"], "settings": meta["settings"]}
    except OSError as error:  # (not there, not readable)
        raise CheckpointRefused(f"{path} cannot be read: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, EOFError,
            zipfile.BadZipFile) as error:  # (cut, empty, another file's)
        raise CheckpointRefused(f"{path} cannot be read back: cut, or not a checkpoint minattn "
                                f"wrote ({type(error).__name__})") from None
    if not (type(state["step"]) is int and state["step"] >= 0 and
            isinstance(state["losses"], list) and
            all(isinstance(x, (int, float)) for x in state["losses"]) and
            isinstance(state["settings"], (dict, type(None)))):
        raise CheckpointRefused(f"{path} is not a checkpoint minattn wrote: its step, losses or "
                                "settings are not a step's")
    return state
