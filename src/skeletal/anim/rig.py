"""The rig: every node of a model in one flat array, parents before children.

This is the seeds' "beautiful array": posing walks it once front to back, because ``parents[i] < i``
holds for every node. All nodes are kept, joints or not, in a scene or not, so a mesh parented to a
joint and a joint hierarchy whose root no scene lists are posed like everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Sequence

import numpy as np

from ..document import Document
from ..errors import ModelError

# Layout of one node's local pose: translation xyz, rotation xyzw, scale xyz.
T_SLICE = slice(0, 3)
R_SLICE = slice(3, 7)
S_SLICE = slice(7, 10)
POSE_WIDTH = 10


@dataclass(frozen=True)
class Rig:
    """Flat node hierarchy in parent-first order.

    Two orders, never to be mixed: **rig order** (parents first: ``names``, ``parents``, ``rest``,
    ``Player.world``, ``Player.local_pose``) and **file order** (the glTF node indices:
    ``node_names``, ``Player.node_world``, ``bake()['node_world']``). ``node_of``/``index_of`` convert;
    :meth:`find` gives a rig index, :meth:`find_node` a file index, both by name.

    Attributes:
        names: node names, rig order (``""`` for unnamed nodes).
        parents: (N,) int32, ``parents[i] < i``, -1 for roots.
        rest: (N, 10) float64 rest local pose ``t(3) q(4) s(3)``, quaternions xyzw.
        node_of: (N,) int32 file (glTF) node index of each rig index.
        index_of: (N,) int32 rig index of each file node index (the inverse permutation).

    >>> rig = Rig.from_parents(["root", "child"], [-1, 0])
    >>> rig.parents.tolist()
    [-1, 0]
    """

    names: tuple[str, ...]
    parents: np.ndarray
    rest: np.ndarray
    node_of: np.ndarray
    index_of: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def find(self, name: str) -> int:
        """Rig index of the first node named ``name`` (indexes ``names``, ``Player.world``); KeyError if none."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no node named {name!r}") from None

    @property
    def node_names(self) -> tuple[str, ...]:
        """Node names in file (glTF node) order: ``node_names[i]`` names ``Player.node_world[i]``.

        >>> rig = Rig.from_parents(["hand", "root"], [1, -1])   # file order: the child first
        >>> rig.names, rig.node_names
        (('root', 'hand'), ('hand', 'root'))
        """
        return tuple(self.names[int(i)] for i in self.index_of)

    def find_node(self, name: str) -> int:
        """File (glTF) node index of the first node named ``name`` (indexes ``Player.node_world``,
        ``bake()['node_world']``); KeyError if none.

        >>> Rig.from_parents(["hand", "root"], [1, -1]).find_node("root")
        1
        """
        return int(self.node_of[self.find(name)])

    def descendants(self, index: int, include_self: bool = True) -> np.ndarray:
        """Boolean mask (N,) of ``index`` and every node below it (one pass, parent-first order)."""
        mask = np.zeros(self.size, dtype=bool)
        mask[index] = True
        for i in range(index + 1, self.size):
            p = self.parents[i]
            if p >= 0 and mask[p]:
                mask[i] = True
        if not include_self:
            mask[index] = False
        return mask

    def to_torch(self, device: Any = None, dtype: Any = None) -> Any:
        """This rig as :class:`skeletal.torch.RigTensors` (hierarchy by depth level, rest pose) on
        ``device``, rest pose in ``dtype`` (default float32). Needs the ``torch`` extra."""
        from ..torch import rig_tensors

        return rig_tensors(self, device=device, dtype=dtype if dtype is not None else _torch_float32())

    @classmethod
    def from_parents(cls, names: Sequence[str], parents: Sequence[int] | np.ndarray,
                     rest: np.ndarray | None = None) -> "Rig":
        """A rig from names and parent indices given in any order (file order), toposorted here."""
        parents = np.asarray(parents, dtype=np.int64)
        n = len(parents)
        if rest is None:
            rest = np.zeros((n, POSE_WIDTH))
            rest[:, 6] = 1.0
            rest[:, 7:10] = 1.0
        order = parent_first_order(parents)
        index_of = np.empty(n, dtype=np.int32)
        index_of[order] = np.arange(n, dtype=np.int32)
        new_parents = np.where(parents[order] >= 0, index_of[np.maximum(parents[order], 0)], -1)
        return cls(
            names=tuple(names[i] for i in order),
            parents=new_parents.astype(np.int32),
            rest=np.ascontiguousarray(np.asarray(rest, dtype=np.float64)[order]),
            node_of=order.astype(np.int32),
            index_of=index_of,
        )

    @classmethod
    def from_document(cls, doc: Document) -> "Rig":
        """The rig of every node of a loaded model."""
        nodes = doc.nodes
        n = len(nodes)
        parents = np.fromiter(map(_PARENT, nodes), dtype=np.int64, count=n)
        rest = np.zeros((n, POSE_WIDTH))
        if n:  # one copy per column block, not three per node
            rest[:, T_SLICE] = list(map(_TRANSLATION, nodes))
            rest[:, R_SLICE] = list(map(_ROTATION, nodes))
            rest[:, S_SLICE] = list(map(_SCALE, nodes))
        try:
            return cls.from_parents([node.name or "" for node in doc.nodes], parents, rest)
        except ValueError as exc:
            raise ModelError(doc.path, "nodes", str(exc)) from None


_PARENT, _TRANSLATION, _ROTATION, _SCALE = (attrgetter(k) for k in ("parent", "translation", "rotation", "scale"))


def _torch_float32():
    import torch

    return torch.float32


def parent_first_order(parents: np.ndarray) -> np.ndarray:
    """A permutation of node indices in which every parent precedes its children.

    Depth-first preorder from the roots in index order, children in index order: siblings' subtrees
    stay contiguous, which keeps masks ("this joint and below") cheap. Raises ValueError on cycles.
    """
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    roots = []
    for i, p in enumerate(parents.tolist()):
        if p < 0:
            roots.append(i)
        elif p >= n:
            raise ValueError(f"node {i} has parent {p}, past the {n} nodes")
        else:
            children[p].append(i)
    order = []
    stack = roots[::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children[i]))
    if len(order) != n:
        missing = sorted(set(range(n)) - set(order))
        raise ValueError(f"nodes {missing[:8]} form a cycle (no root above them)")
    return np.asarray(order, dtype=np.int64)
