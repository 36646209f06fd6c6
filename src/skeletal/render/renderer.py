# Over 600 lines: one Renderer owns the GL resources every draw path shares (programs, palette uploads,
# instancing, overlays); splitting it would split their lifetime.
"""The renderer: upload a frame's palettes (one write) and draw the asset into a numpy image.

CPU work stays in the library: the caller (or :mod:`.output`) samples clips and computes world
matrices; :class:`.layout.PaletteLayout` turns them into palettes with :func:`skeletal.skin_palette`.
The GPU skins every vertex (:file:`shaders/skinning.glsl`) and shades it.

Morph targets are applied on the CPU (:func:`skeletal.skin.apply_morphs`) and the morphed bind
positions/normals re-uploaded, only for primitives that have targets and only when their weights
change. Instances whose morph weights differ are drawn one instance per draw call (the palette is
still written once); everything else is one instanced draw call per primitive for all instances.

Two ways to get a frame: :meth:`Renderer.draw` renders and reads the image back;
:meth:`Renderer.render` only draws, into :attr:`Renderer.framebuffer` (a window blits it with
:meth:`Renderer.present`), optionally into a ``viewport`` of it and from precomputed ``palettes``
(a :class:`skeletal.Player`'s, say).

>>> r = Renderer(asset, 320, 240)                                  # doctest: +SKIP
>>> world, morph = pose_at(asset, asset.clip("Walk"), [0.5])       # doctest: +SKIP
>>> image = r.draw((world, morph))         # (240, 320, 3) uint8   # doctest: +SKIP
>>> r.render(player, palettes=player.palettes)  # no readback      # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import moderngl
import numpy as np

from ..anim.pose import world_matrices
from ..skinning.lbs import apply_morphs
from ..anim.properties import material_values, node_visibility
from ..skinning.dqs import gpu_dq_palette
from .bones import BoneDrawer
from .camera import (Camera, CameraSpec, animated_bounds, facing_yaw, follow_bounds, follow_shift, frame, nice_step,
                     parse_camera, path_facing, root_path)
from .context import describe, shared_context
from .errors import RenderError
from .feedback import SKINNING_METHODS, skinning_defines, skinning_rows
from .geometry import PrimitiveData, influences_needed, prepare
from .layout import PaletteLayout
from .lod import cluster_indices, used_vertices
from .materials import MaterialCache, MaterialGL
from .overlays import bone_segments, joint_heat, joint_nodes, resolve_joint, skeleton_vertices
from .palette import MODES, best_available, check_mode, create_store
from .programs import ProgramCache, set_uniform, write_matrix

# Look (display-space colours unless said otherwise).
BACKGROUND_TOP = (0.27, 0.32, 0.40)
BACKGROUND_BOTTOM = (0.74, 0.77, 0.81)
FLOOR_COLOR = (0.80, 0.81, 0.83)
FLOOR_LINE_COLOR = (0.50, 0.54, 0.60)
LIGHT_COLOR = (1.05, 1.0, 0.92)  # linear
SKY_AMBIENT = (0.36, 0.40, 0.47)  # linear
GROUND_AMBIENT = (0.16, 0.14, 0.12)  # linear
SKELETON_COLOR = (1.0, 0.80, 0.10, 1.0)
SKELETON_OUTLINE = (0.08, 0.06, 0.02, 0.9)


@dataclass
class _Primitive:
    """One primitive's GPU state."""

    instance: object  # skeletal.asset.MeshInstance
    source: object  # skeletal.asset.SkinnedPrimitive
    data: PrimitiveData
    material: MaterialGL
    slot: int
    morph_range: tuple[int, int]
    buffers: dict = field(default_factory=dict)
    vao: object = None
    morph_written: np.ndarray | None = None
    cpu: dict | None = None  # cpu_skinning: bind-space inputs and output arrays
    kept: np.ndarray | None = None  # the source's vertices the buffers hold (None: all; see lod)


class Renderer:
    """Draws one asset (any number of instances) into (height, width, 3) uint8 images.

    Args:
        asset: a :class:`skeletal.Asset`.
        width, height: image size in pixels.
        palette_mode: "auto" (see :func:`.palette.best_available`) or one of uniform, ubo, ssbo, texture.
        skinning: "lbs" (linear blend skinning) or "dqs" (dual quaternion skinning, scale-separated:
            see :mod:`skeletal.skin_dq`; its palette has 4 rows per joint, through the same upload paths).
        instances: how many instances to make room for up front (more are accommodated later).
        samples: MSAA samples (clamped to what the driver allows; 0 or 1 = none).
        camera: a :class:`.camera.CameraSpec` or spec string; framed by :meth:`frame`.
        clip: the clip whose animated bounds frame the camera (None: rest pose).
        ground: draw the ground grid and contact shadows.
        cull: cull the back faces of primitives whose material is not doubleSided (as glTF specifies;
            the default draws every face from both sides). Halves the triangles a CPU rasteriser sets up.
        cpu_skinning: skin positions and normals on the CPU (:func:`skeletal.skin_into`, numba) and
            upload them each frame, with a vertex shader that only projects: on llvmpipe, whose vertex
            stage runs on the calling thread, this is about twice as fast for one character. One
            instance and "lbs" only.
        lod: draw triangle lists with about ``1/lod`` of their triangles (:func:`.lod.cluster_indices`,
            vertex clustering of the bind pose, vertices of different heaviest joints kept apart); the
            vertex buffers are the full mesh's, or with ``cpu_skinning`` (and no morph targets) only the
            vertices the coarse triangles use. For views that move (the editor's playing view); 1 (the
            default) draws the full mesh.
        ctx: a moderngl context (default: the process-wide headless one).
    """

    def __init__(self, asset, width: int = 640, height: int = 480, *, palette_mode: str = "auto",
                 instances: int = 1, samples: int = 4, camera: CameraSpec | str | None = None,
                 clip=None, ground: bool = True, ctx=None, skinning: str = "lbs", cull: bool = False,
                 cpu_skinning: bool = False, lod: float = 1.0):
        if not (1 <= int(width) <= 16384 and 1 <= int(height) <= 16384):
            raise RenderError(f"image size {width}x{height} is out of range (1..16384)")
        if palette_mode != "auto" and palette_mode not in MODES:
            raise RenderError(f"palette mode {palette_mode!r} is not one of auto, {', '.join(MODES)}")
        if skinning not in SKINNING_METHODS:
            raise RenderError(f"skinning {skinning!r} is not one of {', '.join(SKINNING_METHODS)}")
        if cpu_skinning and (skinning != "lbs" or int(instances) != 1):
            raise RenderError("cpu_skinning draws one instance with linear blend skinning")
        asset.require_nodes("draw")
        self.skinning = skinning
        self.cull = bool(cull)
        self.cpu_skinning = bool(cpu_skinning)
        self.lod = max(float(lod), 1.0)
        self.asset = asset
        #: The animated properties (KHR_animation_pointer, (M,) laid out by ``asset.properties``) the
        #: frames are drawn with: material colours, emissive, alpha cutoff, texture transform, node
        #: visibility. None: the file's values. A Player or Mixer drawn as the state sets it itself.
        self.properties: np.ndarray | None = None
        # KHR_node_visibility: whether any node is hidden without animation (then every frame checks)
        self._static_hidden = any(not n.visible for n in asset.document.nodes)
        self.width, self.height = int(width), int(height)
        self.ctx = ctx or shared_context()
        self.palette_mode = palette_mode
        self.layout = PaletteLayout(asset)
        self.ground = ground
        self.camera_spec = parse_camera(camera)
        self.facing = facing_yaw(asset)
        self._programs = ProgramCache(self.ctx)
        self._materials = MaterialCache(self.ctx, asset.document)
        max_k = max((p.joints.shape[1] for m in asset.mesh_instances for p in m.primitives if p.joints is not None),
                    default=4)
        self.influences = influences_needed(max_k)
        self.store = None
        self._palette_source = None  # a GpuCrowd while its frame is drawn (its own palette buffer)
        self.palette_choice = None
        self._offsets_buffer = None
        self._offsets_capacity = 0
        self._ensure_capacity(max(1, int(instances)))
        self._segments = bone_segments(asset)
        self._joints = joint_nodes(asset)
        self._heat_joint: int | None = None
        self._primitives = [self._upload(m, p) for m in asset.mesh_instances for p in m.primitives]
        # A skeleton-only asset (BVH) is drawn as bone capsules (see .bones).
        self._bones = BoneDrawer(self.ctx, self._programs, asset) if not self._primitives else None
        self._make_fixed_geometry()
        self._make_framebuffers(samples)
        self.frame(clip)

    # -- setup ----------------------------------------------------------------------------------

    def _ensure_capacity(self, n_instances: int, palettes: bool = True) -> None:
        """A palette store (unless ``palettes`` is False: a GPU crowd brings its own) and an offsets
        buffer big enough for ``n_instances`` instances."""
        needed = n_instances * self.layout.joint_count
        if self.store is None or (palettes and self.store.capacity < needed):
            rows = skinning_rows(self.skinning)
            if self.palette_mode == "auto":
                choice = best_available(self.ctx, needed, rows)
            else:
                choice = check_mode(self.ctx, self.palette_mode, needed, rows)
            if self.store is not None:
                self.store.release()
            self.store = create_store(self.ctx, choice.mode, needed, rows_per_matrix=rows)
            self.palette_choice = choice
            self.mesh_program = self._programs.get(
                "mesh.vert.glsl", "mesh.frag.glsl",
                {**self.store.defines, **skinning_defines(self.skinning), "INFLUENCES": self.influences,
                 **({"SKINNING_NONE": 1} if self.cpu_skinning else {})})
            self._invalidate_vaos()
        if n_instances > self._offsets_capacity:
            if self._offsets_buffer is not None:
                self._offsets_buffer.release()
            self._offsets_capacity = max(n_instances, 2 * self._offsets_capacity)
            self._offsets_buffer = self.ctx.buffer(reserve=self._offsets_capacity * 12, dynamic=True)
            self._shadow_centers = self.ctx.buffer(reserve=self._offsets_capacity * 12, dynamic=True)
            self._invalidate_vaos()

    def _invalidate_vaos(self) -> None:
        for prim in getattr(self, "_primitives", []):
            if prim.vao is not None:
                prim.vao.release()
                prim.vao = None
        if getattr(self, "_shadow_vao", None) is not None:
            self._shadow_vao.release()
            self._shadow_vao = None

    def _upload(self, instance, source) -> _Primitive:
        material = self._materials.get(source.source.material)
        data = prepare(source, self.influences, material.texcoord)
        kept = None
        if self.lod > 1.0 and data.mode == 4:
            heaviest = data.joints[np.arange(data.vertex_count), np.argmax(data.weights, axis=1)]
            coarse = cluster_indices(data.positions, data.indices, self.lod, heaviest)
            if len(coarse):  # never an empty buffer (moderngl refuses one): a primitive keeps its triangles
                data = replace(data, indices=coarse)
            if len(coarse) and self.cpu_skinning and source.morph_positions is None and source.morph_normals is None:
                kept, indices = used_vertices(data.indices, data.vertex_count)  # skin only what is drawn
                data = replace(data, positions=data.positions[kept], normals=data.normals[kept], uv=data.uv[kept],
                               joints=data.joints[kept], weights=data.weights[kept], indices=indices)
        ctx = self.ctx
        buffers = {
            "a_position": ctx.buffer(data.positions.tobytes(),
                                     dynamic=source.morph_positions is not None or self.cpu_skinning),
            "a_normal": ctx.buffer(data.normals.tobytes(),
                                   dynamic=source.morph_normals is not None or self.cpu_skinning),
            "a_uv": ctx.buffer(data.uv.tobytes()),
            "a_heat": ctx.buffer(np.zeros(data.vertex_count, np.float32).tobytes()),
        }
        for k in range(self.influences // 4):
            buffers[f"a_joints{k}"] = ctx.buffer(np.ascontiguousarray(data.joints[:, 4 * k:4 * k + 4]).tobytes())
            buffers[f"a_weights{k}"] = ctx.buffer(np.ascontiguousarray(data.weights[:, 4 * k:4 * k + 4]).tobytes())
        if data.indices is not None:
            buffers["indices"] = ctx.buffer(data.indices.tobytes())
        rig_node = int(self.asset.rig.index_of[instance.node])
        morph_range = (int(self.asset.morph_start[rig_node]), int(self.asset.morph_start[rig_node + 1]))
        return _Primitive(instance, source, data, material, self.layout.slot_of(instance, source), morph_range, buffers,
                          kept=kept)

    def _vao(self, prim: _Primitive):
        if prim.vao is None:
            formats = {"a_position": "3f", "a_normal": "3f", "a_uv": "2f", "a_heat": "1f"}
            content = [(buf, formats.get(name) or ("4i" if name.startswith("a_joints") else "4f"), name)
                       for name, buf in prim.buffers.items() if name != "indices"]
            content.append((self._offsets_buffer, "3f/i", "a_offset"))
            content += self._instance_attributes()
            prim.vao = self.ctx.vertex_array(self.mesh_program, content, index_buffer=prim.buffers.get("indices"),
                                             index_element_size=4, skip_errors=True)
        return prim.vao

    def _instance_attributes(self) -> list:
        """More per-instance vertex attributes of the mesh program (buffer, format, name); none here
        (a baked-texture crowd adds its clips and clocks: :mod:`.anim_texture_draw`)."""
        return []

    def _make_fixed_geometry(self) -> None:
        ctx = self.ctx
        self._bg_program = self._programs.get("background.vert.glsl", "background.frag.glsl")
        self._bg_vao = ctx.vertex_array(self._bg_program, [])
        corners = np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32)
        self._quad = ctx.buffer(corners.tobytes())
        self._ground_program = self._programs.get("ground.vert.glsl", "ground.frag.glsl")
        self._ground_vao = ctx.vertex_array(self._ground_program, [(self._quad, "2f", "a_corner")])
        self._shadow_program = self._programs.get("shadow.vert.glsl", "shadow.frag.glsl")
        self._shadow_vao = None
        self._overlay_program = self._programs.get("overlay.vert.glsl", "overlay.frag.glsl")
        self._overlay_buffer = None

    def _make_framebuffers(self, samples: int) -> None:
        ctx, size = self.ctx, (self.width, self.height)
        self.samples = 0 if samples <= 1 else min(int(samples), int(ctx.max_samples))
        if self.samples < 2:
            self.samples = 0
        self._resolved = ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4)],
                                         depth_attachment=ctx.depth_renderbuffer(size))
        if self.samples:
            self._target = ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4, samples=self.samples)],
                                           depth_attachment=ctx.depth_renderbuffer(size, samples=self.samples))
        else:
            self._target = self._resolved
        self._unresolved = False  # whether _target holds a frame _resolved does not have yet

    def _release_framebuffers(self) -> None:
        for fbo in {self._target, self._resolved}:
            for attachment in list(fbo.color_attachments) + [fbo.depth_attachment]:
                if attachment is not None:
                    attachment.release()
            fbo.release()

    @property
    def framebuffer(self):
        """The moderngl framebuffer :meth:`render` draws into (``width`` x ``height``; RGBA8 colour
        and depth). With MSAA it is multisampled: blit it with ``ctx.copy_framebuffer(dst,
        renderer.framebuffer)`` (:meth:`present`), which resolves the samples; :meth:`read` gives its
        pixels. It is replaced by :meth:`resize`."""
        return self._target

    def resize(self, width: int, height: int) -> None:
        """Draw ``width`` x ``height`` frames from now on: new framebuffers (the old frame is gone)
        and the camera framed again for the new aspect, on the same bounds."""
        width, height = int(width), int(height)
        if not (1 <= width <= 16384 and 1 <= height <= 16384):
            raise RenderError(f"image size {width}x{height} is out of range (1..16384)")
        if (width, height) == (self.width, self.height):
            return
        self._release_framebuffers()
        self.width, self.height = width, height
        self._make_framebuffers(self.samples)
        lo, hi = self.bounds
        self.set_bounds(lo, hi, self._framed_offsets)

    # -- camera ---------------------------------------------------------------------------------

    def frame(self, clip=None, offsets=None, camera: CameraSpec | str | None = None) -> Camera:
        """Point the camera at the animated bounds of ``clip`` (rest pose if None), spread over the
        instance ``offsets`` (I, 3) if given, and size the ground grid to match."""
        if camera is not None:
            self.camera_spec = parse_camera(camera)
        # The front is where the clip turns the character (a retargeted clip may turn it from its bind pose).
        self.facing = facing_yaw(self.asset, clip)
        self.follow_reference = None
        if self.camera_spec.follow and clip is not None:  # framed on the character, moved with its root
            lo, hi, self.follow_reference = follow_bounds(self.asset, clip)
            self.set_bounds(lo, hi, offsets)
            path = root_path(self.asset, clip, np.linspace(0.0, clip.duration, 16))
            self._ground_half += float(np.ptp(path[:, [0, 2]], axis=0).max())  # the grid under the whole walk
            return self.camera
        else:  # the whole path, seen from its side when the clip travels
            lo, hi = animated_bounds(self.asset, clip)
            self.facing = path_facing(self.asset, clip, self.facing, lo, hi, self.camera_spec.yaw)
        self.set_bounds(lo, hi, offsets)
        return self.camera

    def follow(self, root) -> None:
        """With a ``follow`` camera, move the framed camera with the root at ``root`` (3,) world: the
        camera keeps its offset from the character (see :func:`.camera.follow_bounds`)."""
        if self.follow_reference is None:
            return
        if self._followed_from is None:
            self._followed_from = (self.camera.eye.copy(), self.camera.target.copy())
        base = self._followed_from
        d = follow_shift(self.follow_reference, root)
        self.camera.eye, self.camera.target = base[0] + d, base[1] + d

    def set_bounds(self, lo, hi, offsets=None) -> None:
        """Frame the box ``lo``..``hi`` of one instance (world units), repeated at ``offsets``."""
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        self.bounds = (lo.copy(), hi.copy())
        self._followed_from = None  # a follow camera starts again from the new framing
        self._framed_offsets = None if offsets is None else np.array(offsets, np.float64)
        if offsets is not None and len(offsets):
            offsets = np.asarray(offsets, np.float64)
            lo, hi = lo + offsets.min(axis=0), hi + offsets.max(axis=0)
        self.camera = frame(self.camera_spec, lo, hi, self.width / self.height, facing=self.facing)
        size = hi - lo
        single = self.bounds[1] - self.bounds[0]
        height = max(float(single[1]), float(np.linalg.norm(single)) * 0.3, 1e-3)
        self._ground_y = float(lo[1])
        self._ground_center = np.array([self.camera.target[0], self._ground_y, self.camera.target[2]])
        self._ground_half = 1.6 * float(np.linalg.norm(size)) + 2.0 * height
        self._grid_cell = nice_step(height / 4.0)
        self._shadow_radius = max(0.55 * float(max(single[0], single[2])), 0.25 * height)

    # -- drawing --------------------------------------------------------------------------------

    def draw(self, state, instances=None, *, skeleton: bool = False, weights_joint: str | int | None = None,
             palettes=None, viewport: tuple[int, int, int, int] | None = None) -> np.ndarray:
        """Render one frame and read it back: (height, width, 3) uint8 RGB, row 0 at the top (the
        ``viewport``'s size when one is given). Arguments as for :meth:`render`.

        ``state``: ``(world, morph)`` with world (N, 4, 4) or (I, N, 4, 4) row-major rig-order world
        matrices and morph (M,) or (I, M) weights (None: rest weights); a bare world array; or an
        object with ``world`` and ``morph`` (or ``morph_weights``) attributes, a Player for one.
        ``instances``: (I, 3) placements, or None (one instance per world pose, all at the origin).
        A single pose with several placements is shared by them. ``skeleton`` draws the joints on
        top; ``weights_joint`` (name or glTF node index) shades every mesh by that joint's weights
        instead of its material.
        """
        self.render(state, instances, skeleton=skeleton, weights_joint=weights_joint, palettes=palettes,
                    viewport=viewport)
        return self.read(viewport)

    def render(self, state, instances=None, *, skeleton: bool = False, weights_joint: str | int | None = None,
               palettes=None, viewport: tuple[int, int, int, int] | None = None,
               finish: bool = False) -> dict[str, float]:
        """Draw one frame into :attr:`framebuffer`, without reading it back.

        ``state``, ``instances``, ``skeleton``, ``weights_joint``: as for :meth:`draw`. ``state`` may be a
        :class:`~skeletal.render.gpu_pose.GpuCrowd`: its palettes, posed on the GPU by its last update,
        are drawn from its own buffer (nothing uploaded but the placements; LBS, the ssbo path).
        ``palettes``: skinning matrices already computed for this pose, instead of computing them
        from the world matrices: a list of one (J_s, 4, 4) or (I, J_s, 4, 4) array per skin, as
        :attr:`skeletal.Player.palettes` gives them (rigid meshes still take their node's world
        matrix), or one array, the whole (J, 3|4, 4) / (I, J, 3|4, 4) palette in the layout's slot
        order (:class:`.layout.PaletteLayout`). ``viewport``: (x, y, width, height) in framebuffer pixels,
        y up (GL's convention), to draw into part of the framebuffer (the rest is cleared to black);
        the camera's aspect should match it. ``finish``: wait for the GPU to finish the frame, so
        that the "draw" time covers the GPU's work too.

        Returns CPU seconds: ``palette`` (arranging or computing the palettes), ``upload`` (writing
        palettes, placements and heat weights) and ``draw`` (issuing the draw calls, and with
        ``finish`` waiting for them).
        """
        t0 = time.perf_counter()
        gpu = state if getattr(state, "palette_buffer", None) is not None else None  # a GpuCrowd
        self._palette_source = gpu
        if gpu is not None:
            return self._render_gpu_crowd(gpu, instances, weights_joint, viewport, finish, skeleton, palettes, t0)
        world, morph = self._pose_arrays(state)
        followed = getattr(state, "property_values", None)  # a Player (M,) or Mixer (B, M): instance 0's
        if followed is not None and np.size(followed):
            self.properties = np.asarray(followed, np.float64).reshape(-1, np.shape(followed)[-1])[0]
        offsets = self._placements(instances, len(world))
        n = len(offsets)
        if len(world) == 1 and n > 1:
            world = np.broadcast_to(world, (n,) + world.shape[1:])
            morph = np.broadcast_to(morph, (n,) + morph.shape[1:])
        elif len(world) != n:
            raise RenderError(f"{len(world)} poses for {n} instance placements")
        if self.cpu_skinning and n != 1:
            raise RenderError(f"cpu_skinning draws one instance, got {n}")
        self._ensure_capacity(n)
        palette = self.layout.palettes(world) if palettes is None else self._arrange_palettes(palettes, world)
        if self.skinning == "dqs":
            palette = gpu_dq_palette(palette)  # (I, J, 4, 4): qr, qd, scale/shear rows
        self._cpu_palette = palette[0] if self.cpu_skinning else None
        heat = self._resolve_heat(weights_joint)
        t1 = time.perf_counter()

        # One palette write for the whole frame, then the per-instance placements.
        self.store.write(palette)
        self._offsets_buffer.write(offsets.tobytes())
        self._set_heat_joint(heat)
        t2 = time.perf_counter()
        return self._draw_frame(world, morph, offsets, viewport, skeleton, finish, t0, t1, t2)

    def _render_gpu_crowd(self, crowd, instances, weights_joint, viewport, finish, skeleton, palettes,
                          t0: float) -> dict[str, float]:
        """:meth:`render` of a :class:`~skeletal.render.gpu_pose.GpuCrowd`: its palettes are already in a
        GPU buffer (posed by its last update), bound as the skinning shader's storage block; nothing is
        uploaded but the placements. Shadows sit under each placement at the rest pose's centre."""
        if skeleton or palettes is not None or self.skinning != "lbs" or self.cpu_skinning:
            raise RenderError("a GPU-posed crowd is drawn with linear blend skinning from its own palettes "
                              "(no skeleton overlay, palettes, DQS or CPU skinning)")
        if self._bones is not None:
            raise RenderError(f"{self.asset.name} has no mesh to skin (its bones are drawn from CPU poses): "
                              "draw it without GPU posing")
        if self.store.mode != "ssbo":
            raise RenderError(f"a GPU-posed crowd needs the ssbo palette path; this renderer uses {self.store.mode}")
        if crowd.joint_count != self.layout.joint_count or crowd.ctx is not self.ctx:
            raise RenderError("the GPU crowd was made for another model or OpenGL context than this renderer's")
        offsets = self._placements(instances, crowd.count)
        if len(offsets) != crowd.count:
            raise RenderError(f"{len(offsets)} placements for a GPU crowd of {crowd.count} instances")
        self._ensure_capacity(crowd.count, palettes=False)
        rest = self.asset.rig.rest.astype(np.float64)
        world = world_matrices(self.asset.rig.parents, rest)[None]  # (1, N, 4, 4): the shadows' centre only
        morph = np.broadcast_to(self.asset.rest_morph, (crowd.count, len(self.asset.rest_morph)))
        self._cpu_palette = None
        heat = self._resolve_heat(weights_joint)
        t1 = time.perf_counter()
        self._offsets_buffer.write(offsets.tobytes())
        self._set_heat_joint(heat)
        t2 = time.perf_counter()
        return self._draw_frame(world, morph, offsets, viewport, False, finish, t0, t1, t2)

    def _draw_frame(self, world, morph, offsets, viewport, skeleton, finish, t0, t1, t2) -> dict[str, float]:
        """The draw calls of :meth:`render` once palettes and placements are in place."""
        ctx = self.ctx
        self._target.use()
        ctx.viewport = (0, 0, self.width, self.height)
        self._target.clear(0.0, 0.0, 0.0, 1.0, depth=1.0)
        if viewport is not None:
            ctx.viewport = self._check_viewport(viewport)
        view_proj = self.camera.view_projection
        self._draw_background()
        if self.ground:
            self._draw_ground(view_proj)
            self._draw_shadows(view_proj, world, offsets)
        self._draw_meshes(view_proj, morph, offsets)
        if self._bones is not None:
            self._bones.draw(view_proj, world, offsets, self._lighting())
        if skeleton:
            self._draw_skeleton(view_proj, world, offsets)
        if finish:
            ctx.finish()
        self._unresolved = self._target is not self._resolved
        return {"palette": t1 - t0, "upload": t2 - t1, "draw": time.perf_counter() - t2}

    def read(self, viewport: tuple[int, int, int, int] | None = None) -> np.ndarray:
        """The last rendered frame (or the ``viewport`` part of it, GL pixels, y up) as
        (height, width, 3) uint8 RGB, row 0 at the top."""
        self._resolve()
        x, y, w, h = (0, 0, self.width, self.height) if viewport is None else self._check_viewport(viewport)
        pixels = self._resolved.read(viewport=(x, y, w, h), components=3, alignment=1)
        image = np.frombuffer(pixels, np.uint8).reshape(h, w, 3)
        return np.ascontiguousarray(image[::-1])  # GL rows start at the bottom

    def present(self, target) -> None:
        """Copy the last frame to ``target``, a framebuffer of the same size (a window's
        ``ctx.screen``), resolving MSAA on the way (one blit)."""
        self.ctx.copy_framebuffer(target, self._target)

    def _resolve(self) -> None:
        if self._unresolved:
            self.ctx.copy_framebuffer(self._resolved, self._target)  # MSAA resolve
            self._unresolved = False

    def _check_viewport(self, viewport) -> tuple[int, int, int, int]:
        x, y, w, h = (int(v) for v in viewport)
        if w < 1 or h < 1 or x < 0 or y < 0 or x + w > self.width or y + h > self.height:
            raise RenderError(f"viewport {(x, y, w, h)} is not inside the {self.width}x{self.height} framebuffer")
        return x, y, w, h

    def _resolve_heat(self, weights_joint) -> int | None:
        """Rig index of the heat-map's joint (a name is looked up once per change)."""
        if weights_joint is None:
            return None
        if getattr(self, "_heat_key", None) != weights_joint:
            self._heat_rig = resolve_joint(self.asset, weights_joint)
            self._heat_key = weights_joint
        return self._heat_rig

    def _arrange_palettes(self, palettes, world: np.ndarray) -> np.ndarray:
        """Precomputed palettes -> (I, J, 3, 4) float32 in the layout's slot order (see :meth:`render`)."""
        layout, n = self.layout, len(world)
        if isinstance(palettes, np.ndarray):  # the whole palette, in slot order
            whole = palettes if palettes.ndim == 4 else palettes[None]
            if whole.ndim != 4 or whole.shape[1] != layout.joint_count or whole.shape[2:] not in ((3, 4), (4, 4)) \
                    or len(whole) not in (1, n):
                raise RenderError(f"palettes of shape {palettes.shape}: expected ({n}, {layout.joint_count}, 3, 4) "
                                  f"or a list of one (J, 4, 4) array per skin")
            out = np.empty((n, layout.joint_count, 3, 4), np.float32)
            out[:] = whole[:, :, :3, :]
            return out
        per_skin = list(palettes)  # one array per skin, as Player.palettes
        if len(per_skin) != len(self.asset.skins):
            raise RenderError(f"{len(per_skin)} skin palettes for a model with {len(self.asset.skins)} skins")
        out = np.empty((n, layout.joint_count, 3, 4), np.float32)
        for binding, start, palette in zip(self.asset.skins, layout.skin_offset, per_skin):
            palette = np.asarray(palette)
            if palette.ndim == 3:
                palette = palette[None]
            count = len(binding.joints)
            if palette.shape[1:] not in ((count, 4, 4), (count, 3, 4)) or len(palette) not in (1, n):
                raise RenderError(f"a palette of shape {palette.shape} for a skin of {count} joints and {n} instances")
            out[:, start:start + count] = palette[:, :, :3, :]
        if layout.rigid_slot:
            rig_nodes = [int(self.asset.rig.index_of[node]) for node in layout.rigid_slot]
            slots = list(layout.rigid_slot.values())
            out[:, slots] = world[:, rig_nodes, :3, :]
        return out

    def _pose_arrays(self, state) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(state, (tuple, list)) and len(state) == 2:
            world, morph = state
        elif isinstance(state, np.ndarray):
            world, morph = state, None
        else:
            world = getattr(state, "world", None)
            if world is None:
                world = getattr(state, "world_matrices", None)
            morph = getattr(state, "morph", None)
            if morph is None:
                morph = getattr(state, "morph_weights", None)  # a Player
            if world is None:
                raise RenderError(f"cannot draw {type(state).__name__}: give (world, morph) or an object with .world and .morph")
        world = np.asarray(world, dtype=np.float64)
        n_nodes = len(self.asset.rig)
        if world.ndim == 3:
            world = world[None]
        if world.ndim != 4 or world.shape[1:] != (n_nodes, 4, 4):
            raise RenderError(f"world matrices must have shape (I, {n_nodes}, 4, 4), got {world.shape}")
        rest = self.asset.rest_morph
        morph = np.broadcast_to(rest, (len(world), len(rest))) if morph is None else np.asarray(morph, np.float64)
        if morph.ndim == 1:
            morph = morph[None]
        if morph.shape[-1] != len(rest):
            raise RenderError(f"morph weights must have {len(rest)} values per instance, got {morph.shape}")
        morph = np.broadcast_to(morph, (len(world), len(rest)))
        return world, morph

    @staticmethod
    def _placements(instances, n_poses: int) -> np.ndarray:
        if instances is None:
            return np.zeros((n_poses, 3), np.float32)
        if isinstance(instances, (int, np.integer)):
            return np.zeros((int(instances), 3), np.float32)
        offsets = np.ascontiguousarray(instances, dtype=np.float32).reshape(-1, 3)
        if not len(offsets):
            raise RenderError("no instances to draw")
        return offsets

    def _set_heat_joint(self, joint: int | None) -> None:
        if joint == self._heat_joint:
            return
        for prim in self._primitives:
            heat = joint_heat(self.asset, prim.instance, prim.source, joint)
            prim.buffers["a_heat"].write((heat if prim.kept is None else heat[prim.kept]).tobytes())
        self._heat_joint = joint

    def _draw_background(self) -> None:
        self.ctx.disable(moderngl.DEPTH_TEST | moderngl.BLEND | moderngl.CULL_FACE)
        set_uniform(self._bg_program, "u_top_color", BACKGROUND_TOP)
        set_uniform(self._bg_program, "u_bottom_color", BACKGROUND_BOTTOM)
        self._bg_vao.render(moderngl.TRIANGLES, vertices=3)

    def _draw_ground(self, view_proj) -> None:
        ctx, program = self.ctx, self._ground_program
        ctx.enable(moderngl.DEPTH_TEST | moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        write_matrix(program, "u_view_proj", view_proj)
        set_uniform(program, "u_center", tuple(self._ground_center))
        set_uniform(program, "u_half_size", self._ground_half)
        set_uniform(program, "u_cell", self._grid_cell)
        set_uniform(program, "u_floor_color", FLOOR_COLOR)
        set_uniform(program, "u_line_color", FLOOR_LINE_COLOR)
        self._ground_vao.render(moderngl.TRIANGLE_STRIP)

    def _draw_shadows(self, view_proj, world, offsets) -> None:
        ctx, program = self.ctx, self._shadow_program
        centers = world[:, self._joints][..., :3, 3].mean(axis=1) + offsets  # (I, 3)
        self._shadow_centers.write(centers.astype(np.float32).tobytes())
        if self._shadow_vao is None:
            self._shadow_vao = ctx.vertex_array(program, [(self._quad, "2f", "a_corner"),
                                                          (self._shadow_centers, "3f/i", "a_center")])
        ctx.disable(moderngl.DEPTH_TEST)
        ctx.enable(moderngl.BLEND)
        write_matrix(program, "u_view_proj", view_proj)
        set_uniform(program, "u_ground_y", self._ground_y)
        set_uniform(program, "u_radius", self._shadow_radius)
        set_uniform(program, "u_strength", 0.45)
        self._shadow_vao.render(moderngl.TRIANGLE_STRIP, instances=len(offsets))

    def _light_direction(self) -> np.ndarray:
        """Key light from above, slightly in front of and to the left of the camera."""
        cam = self.camera
        back = cam.eye - cam.target
        back /= np.linalg.norm(back)
        right = np.cross([0.0, 1.0, 0.0], back)
        right = right / np.linalg.norm(right) if np.linalg.norm(right) > 1e-9 else np.array([1.0, 0.0, 0.0])
        light = 0.55 * back - 0.45 * right + np.array([0.0, 0.9, 0.0])
        return light / np.linalg.norm(light)

    def _lighting(self) -> dict:
        return {"u_light_dir": tuple(self._light_direction()), "u_light_color": LIGHT_COLOR,
                "u_sky_color": SKY_AMBIENT, "u_ground_color": GROUND_AMBIENT,
                "u_camera_position": tuple(self.camera.eye)}

    def _draw_meshes(self, view_proj, morph, offsets) -> None:
        ctx, program = self.ctx, self.mesh_program
        n_instances = len(offsets)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
        (self._palette_source or self.store).bind(program)  # a GPU crowd's own buffer
        write_matrix(program, "u_view_proj", view_proj)
        set_uniform(program, "u_joint_stride", self.layout.joint_count)
        set_uniform(program, "u_light_dir", tuple(self._light_direction()))
        set_uniform(program, "u_light_color", LIGHT_COLOR)
        set_uniform(program, "u_sky_color", SKY_AMBIENT)
        set_uniform(program, "u_ground_color", GROUND_AMBIENT)
        set_uniform(program, "u_camera_position", tuple(self.camera.eye))
        set_uniform(program, "u_heat_mode", self._heat_joint is not None)
        set_uniform(program, "u_base_texture", 0)
        if self.cpu_skinning:
            self._skin_on_cpu(morph[0])
        values = self.properties if self.properties is not None and len(self.asset.properties) else None
        visible = node_visibility(self.asset, values) if (values is not None or self._static_hidden) else None
        for prim in self._primitives:
            if visible is not None and not visible[prim.instance.node]:
                continue  # KHR_node_visibility: hidden (itself or an ancestor)
            material = prim.material
            if self.cull and not material.double_sided:
                ctx.enable(moderngl.CULL_FACE)
            else:
                ctx.disable(moderngl.CULL_FACE)
            base_color, emissive, cutoff, uv = material.base_color, material.emissive, material.alpha_cutoff, material.uv_transform
            if values is not None and material.index is not None:  # animated material values
                look = material_values(self.asset, material.index, values)
                base_color, emissive, cutoff, uv = look["base_color"], look["emissive"], look["alpha_cutoff"], look["uv"]
            set_uniform(program, "u_base_color", tuple(float(c) for c in base_color))
            set_uniform(program, "u_has_texture", material.texture is not None)
            # mat3 uniforms are column-major: the row-major matrix transposed, flattened
            set_uniform(program, "u_uv_transform", tuple(float(v) for v in np.asarray(uv).T.reshape(-1)))
            set_uniform(program, "u_unlit", material.unlit)
            set_uniform(program, "u_emissive", tuple(float(c) for c in emissive))
            set_uniform(program, "u_alpha_cutoff", float(cutoff))
            if material.texture is not None:
                material.texture.use(location=0)
            set_uniform(program, "u_joint_offset", prim.slot)
            vao = self._vao(prim)
            m0, m1 = prim.morph_range
            weights = morph[:, m0:m1]
            if prim.source.morph_positions is None or m1 == m0 or np.all(weights == weights[:1]):
                if prim.source.morph_positions is not None and m1 > m0:
                    self._write_morphed(prim, weights[0])
                set_uniform(program, "u_instance_base", 0)
                set_uniform(program, "u_placement_shift", (0.0, 0.0, 0.0))
                vao.render(prim.data.mode, instances=n_instances)
            else:  # different morph weights per instance: one draw per instance
                for i in range(n_instances):
                    self._write_morphed(prim, weights[i])
                    set_uniform(program, "u_instance_base", i)
                    set_uniform(program, "u_placement_shift", tuple(float(v) for v in offsets[i] - offsets[0]))
                    vao.render(prim.data.mode, instances=1)
        set_uniform(program, "u_instance_base", 0)
        set_uniform(program, "u_placement_shift", (0.0, 0.0, 0.0))
        ctx.disable(moderngl.CULL_FACE)

    def _skin_on_cpu(self, morph: np.ndarray) -> None:
        """cpu_skinning: every primitive's positions and normals skinned by this frame's palette
        (instance 0, already computed by :meth:`render`) into its vertex buffers."""
        from ..skinning.lbs import skin_into

        palette = self._cpu_palette
        for prim in self._primitives:
            d = prim.data
            if prim.cpu is None:
                count = int(d.joints.max()) + 1 if len(d.joints) else 1
                prim.cpu = {"count": count, "positions": d.positions, "normals": d.normals,
                            "out_p": np.empty_like(d.positions), "out_n": np.empty_like(d.normals)}
            c = prim.cpu
            m0, m1 = prim.morph_range
            if prim.source.morph_positions is not None and m1 > m0:
                self._write_morphed(prim, morph[m0:m1])
            skin_into(palette[prim.slot:prim.slot + c["count"]], d.joints, d.weights, c["positions"], c["normals"],
                      None, c["out_p"], c["out_n"])
            prim.buffers["a_position"].write(c["out_p"])
            prim.buffers["a_normal"].write(c["out_n"])

    def _write_morphed(self, prim: _Primitive, weights: np.ndarray) -> None:
        """Bind-space positions (and normals) with the morph targets applied (CPU, :func:`apply_morphs`)."""
        if prim.morph_written is not None and np.array_equal(prim.morph_written, weights):
            return
        src = prim.source
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        positions = np.empty_like(prim.data.positions)
        apply_morphs(prim.data.positions, src.morph_positions, weights, positions)
        if prim.cpu is not None:  # skinned on the CPU from these (see _skin_on_cpu)
            prim.cpu["positions"] = positions
        else:
            prim.buffers["a_position"].write(positions.tobytes())
        if src.morph_normals is not None:
            normals = np.empty_like(prim.data.normals)
            apply_morphs(prim.data.normals, src.morph_normals, weights, normals)
            if prim.cpu is not None:
                prim.cpu["normals"] = normals
            else:
                prim.buffers["a_normal"].write(normals.tobytes())
        prim.morph_written = weights.copy()

    def _draw_skeleton(self, view_proj, world, offsets) -> None:
        ctx, program = self.ctx, self._overlay_program
        lines, points = skeleton_vertices(world, self._segments, self._joints, offsets)
        data = np.concatenate([lines, points]).astype(np.float32)
        if not len(data):
            return
        if self._overlay_buffer is None or self._overlay_buffer.size < data.nbytes:
            if self._overlay_buffer is not None:
                self._overlay_buffer.release()
            self._overlay_buffer = ctx.buffer(reserve=max(data.nbytes, 4096), dynamic=True)
        self._overlay_buffer.write(data.tobytes())
        vao = ctx.vertex_array(program, [(self._overlay_buffer, "3f", "a_position")])
        ctx.disable(moderngl.DEPTH_TEST)
        ctx.enable(moderngl.BLEND | moderngl.PROGRAM_POINT_SIZE)
        write_matrix(program, "u_view_proj", view_proj)
        scale = max(1.0, min(self.width, self.height) / 240.0)  # thicker lines on bigger images
        for color, widen in ((SKELETON_OUTLINE, 2.0), (SKELETON_COLOR, 0.0)):
            set_uniform(program, "u_color", color)
            set_uniform(program, "u_round", False)
            ctx.line_width = 1.5 * scale + widen
            if len(lines):
                vao.render(moderngl.LINES, vertices=len(lines))
            set_uniform(program, "u_round", True)
            set_uniform(program, "u_point_size", 4.0 * scale + widen)
            vao.render(moderngl.POINTS, vertices=len(points), first=len(lines))
        ctx.line_width = 1.0
        ctx.disable(moderngl.PROGRAM_POINT_SIZE)
        vao.release()

    # -- information and cleanup -----------------------------------------------------------------

    def describe(self) -> str:
        """One paragraph: GL renderer, palette path and why, MSAA."""
        return (f"{describe(self.ctx)}; {self.skinning.upper()} skinning; {self.palette_choice.explain()}; "
                f"store {self.store.describe()}; "
                f"{self.layout.joint_count} palette matrices per instance, {self.influences} influences; "
                f"MSAA {self.samples or 'off'}")

    def release(self) -> None:
        """Free every GL object this renderer made (the shared context stays)."""
        self._invalidate_vaos()
        for prim in self._primitives:
            for buf in prim.buffers.values():
                buf.release()
        self._primitives = []
        if self._bones is not None:
            self._bones.release()
        for obj in (self._bg_vao, self._ground_vao, self._quad, self._overlay_buffer, self._offsets_buffer,
                    self._shadow_centers):
            if obj is not None:
                obj.release()
        self.store.release()
        self._materials.release()
        self._programs.release()
        self._release_framebuffers()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
