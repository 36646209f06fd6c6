"""docs/images/editor.png: the editor on the demo's walk with a bone selected, colliders, onion skin.

Run under an X server: ``xvfb-run python tools/make_editor_image.py [OUT.png]``.
"""

from __future__ import annotations

import sys



def main(out: str = "docs/images/editor.png") -> None:
    from PIL import Image

    from skeletal.anim.colliders import Collider
    from skeletal.demo import demo_asset
    from skeletal.editor.app import Editor
    from skeletal.editor.model import AddCollider, EditDocument, InsertPoseKeys, KeyColliderVisibility

    doc = EditDocument(demo_asset(), "demo.glb")
    rig = doc.asset.rig
    doc.execute(AddCollider(doc, Collider("head", rig.find("head"), "sphere", "hurt", 0.13, [0, 0.09, 0], [0, 0.09, 0])))
    doc.execute(AddCollider(doc, Collider("torso", rig.find("chest"), "capsule", "hurt", 0.17, [0, -0.2, 0], [0, 0.15, 0])))
    doc.execute(AddCollider(doc, Collider("fist_r", rig.find("right_hand"), "sphere", "hit", 0.07, [0, 0.05, 0], [0, 0.05, 0])))
    doc.execute(KeyColliderVisibility(doc, 1, "fist_r", 0.0, True))
    doc.execute(InsertPoseKeys(doc, 1, 0.3, [rig.find("left_upper_arm")]))
    with Editor(doc, (1280, 720)) as ed:
        ed.select_clip(1)
        ed.state.time = 0.36
        ed.state.selected = rig.find("left_upper_arm")
        ed.state.selected_collider = 2
        ed.state.onion = True
        ed.camera.yaw += 25
        for _ in range(4):
            ed.frame(0.0)
            ed.glfw.swap_buffers(ed.window)
        image = ed.read_screen()
    Image.fromarray(image).quantize(colors=192, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
