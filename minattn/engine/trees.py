"""Trees of arrays: nested dicts and lists (params, LoRA adapters, AdamW's moments, a
training run's state), walked the same way everywhere.

    tree_map(f, *trees)     f leaf by leaf over trees of one structure -> a tree of it
    leaves(tree)            the arrays, in the tree's order (dicts in their keys' order)
    paths(tree)             [(path, leaf)]: a path the keys and list indices down to the leaf
    from_paths(items)       the tree back from [(path, leaf)] (a checkpoint's file)
    flatten(tree)           (its leaves, rebuild(new leaves) -> a tree of its structure)
    zip_leaves(*trees)      [(their leaves at one place)] where they are of one structure
    unzip(tree, items, n)   n trees of tree's structure from [(n leaves)]
"""
import numpy as np


def tree_map(f, *trees):
    """Apply f leaf-wise over nested dicts/lists of arrays (all trees share one structure)."""
    if isinstance(trees[0], dict):
        return {k: tree_map(f, *(t[k] for t in trees)) for k in trees[0]}
    if isinstance(trees[0], (list, tuple)):
        return [tree_map(f, *leaves) for leaves in zip(*trees)]
    return f(*trees)


def leaves(tree):
    """The arrays of a nested dict/list tree, in its order."""
    return [leaf for _, leaf in paths(tree)]


def paths(tree, path=()):
    """-> [(path, leaf)]: a path is the keys (str) and list indices (int) down to the leaf."""
    if isinstance(tree, dict):
        return [item for key in tree for item in paths(tree[key], path + (key,))]
    if isinstance(tree, (list, tuple)):
        return [item for i, sub in enumerate(tree) for item in paths(sub, path + (i,))]
    return [(list(path), tree)]


def from_paths(items):
    """[(path, leaf)] -> the tree (lists where every key of a level is a list index); a 0-d
    leaf comes back as a Python number (a step count: an int again)."""
    root = {}
    for path, leaf in items:
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = leaf if np.ndim(leaf) else leaf.item()
    return _lists(root)


def _lists(node):
    # dicts whose keys are all list indices back into lists
    if not isinstance(node, dict):
        return node
    node = {key: _lists(value) for key, value in node.items()}
    if node and all(isinstance(key, int) for key in node):
        return [node[i] for i in range(len(node))]
    return node


def flatten(tree):
    """-> (the leaves of a nested dict/list/tuple tree in order, rebuild(new leaves) -> a tree of
    the same structure)."""
    if isinstance(tree, dict):
        parts = [flatten(v) for v in tree.values()]
        keys = list(tree)
    elif isinstance(tree, (list, tuple)):
        parts, keys = [flatten(v) for v in tree], None
    else:
        return [tree], lambda new: new[0]
    counts = [len(part) for part, _ in parts]

    def rebuild(new):
        items, start = [], 0
        for (_, again), n in zip(parts, counts):
            items.append(again(new[start:start + n]))
            start += n
        return dict(zip(keys, items)) if keys is not None else type(tree)(items)

    return [leaf for part, _ in parts for leaf in part], rebuild



def zip_leaves(*trees):
    """-> [(the first tree's leaf, the second's, ...)] in tree_map's order, where the trees are
    of one structure: dicts with the same keys in the same order, lists or tuples (either) of
    the same lengths, leaves (anything else) at the same places; else None."""
    out = []
    return out if _zip_into(out, trees) else None


def _zip_into(out, trees):
    first = trees[0]
    if isinstance(first, dict):
        keys = list(first)
        for t in trees[1:]:
            if not isinstance(t, dict) or list(t) != keys:
                return False
        for k in keys:
            if not _zip_into(out, tuple([t[k] for t in trees])):
                return False
        return True
    if isinstance(first, (list, tuple)):
        for t in trees[1:]:
            if not isinstance(t, (list, tuple)) or len(t) != len(first):
                return False
        for items in zip(*trees):
            if not _zip_into(out, items):
                return False
        return True
    for t in trees[1:]:
        if isinstance(t, (dict, list, tuple)):
            return False
    out.append(trees)
    return True


def unzip(tree, items, n):
    """-> n trees of tree's structure, as tree_map makes them (tuples as lists), whose leaves
    are the first, second, ... entries of the items (n-tuples, in tree_map's order)."""
    return tuple(_unzip(tree, iter(items), n))


def _unzip(tree, items, n):
    if isinstance(tree, dict):
        parts = [_unzip(sub, items, n) for sub in tree.values()]
        return [dict(zip(tree, (part[i] for part in parts))) for i in range(n)]
    if isinstance(tree, (list, tuple)):
        parts = [_unzip(sub, items, n) for sub in tree]
        return [[part[i] for part in parts] for i in range(n)]
    item = next(items)
    return [item[i] for i in range(n)]
