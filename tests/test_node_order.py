"""Node order (issue 28): ``asset.rig.names`` and ``Player.world`` are in rig order (parents first),
``asset.node_names``, ``Player.node_world`` and ``bake()['node_world']`` in glTF node order. On a file
whose nodes are stored children first the two differ; lookups by name agree whatever the order."""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.anim.rig import Rig

from fixtures.gltf_builder import GltfBuilder
from fixtures.models import quat_axis_angle, unit_f32


@pytest.fixture(scope="module")
def reversed_model(tmp_path_factory):
    """Hand -> Forearm -> Shoulder -> Root stored in that order (each node's parent comes after it)."""
    b = GltfBuilder()
    hand = b.add_node("Hand", translation=[0, 0.5, 0])
    forearm = b.add_node("Forearm", translation=[0, 0.6, 0])
    shoulder = b.add_node("Shoulder", translation=[0.3, 0, 0])
    root = b.add_node("Root", translation=[0, 1.0, 0])
    b.add_children(root, [shoulder])
    b.add_children(shoulder, [forearm])
    b.add_children(forearm, [hand])
    b.add_scene([root])
    t = np.array([0.0, 1.0])
    b.add_animation([{"node": shoulder, "path": "rotation", "times": t,
                      "values": np.array([unit_f32(quat_axis_angle([0, 0, 1], a)) for a in (0, 90)])}], name="lift")
    return b.write_glb(tmp_path_factory.mktemp("order") / "reversed.glb")


def test_names_carry_their_order(reversed_model):
    asset = skeletal.load(reversed_model)
    assert asset.rig.names == ("Root", "Shoulder", "Forearm", "Hand")  # parents first
    assert asset.node_names == ("Hand", "Forearm", "Shoulder", "Root")  # as stored in the file
    assert asset.rig.find("Hand") == 3 and asset.rig.find_node("Hand") == 0
    player = skeletal.Player(asset)
    player.play("lift")
    player.update(0.5)
    for name in asset.node_names:
        by_name = player.world_of(name)
        np.testing.assert_array_equal(by_name, player.node_world[asset.node_names.index(name)])
        np.testing.assert_array_equal(by_name, player.world[asset.rig.find(name)])
    # the trap the lookups avoid: rig.names[i] is not node_world[i]
    assert not np.allclose(player.node_world[asset.rig.find("Hand")], player.world_of("Hand"))
    baked = skeletal.bake(asset, "lift", [0.5])["node_world"][0]
    np.testing.assert_allclose(baked[asset.node_names.index("Hand")], player.world_of("Hand"), atol=1e-9)
    with pytest.raises(KeyError, match="reversed.glb: no node named 'Elbow'"):
        player.world_of("Elbow")


def test_rig_node_names_doc():
    rig = Rig.from_parents(["hand", "root"], [1, -1])
    assert rig.names == ("root", "hand") and rig.node_names == ("hand", "root") and rig.find_node("root") == 1
