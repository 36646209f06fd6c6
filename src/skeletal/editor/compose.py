"""The editor window's frames on a software rasteriser: redraw only what changed.

Why: on llvmpipe (Mesa's CPU rasteriser; 2 cores) every pixel Dear ImGui covers costs a textured,
blended fragment, about 10 ms per full 1280x720 layer, and even a blit into the window is a shader
pass (the window's rows run the other way), ~6 ms for the whole window. Most of an editor frame does
not change from one frame to the next (panels, labels, the tree), and Mesa keeps the window's back
buffer across swaps, so each frame draws over the last one:

1. :class:`Damage` compares this frame's ImGui draw data with the last frame's, per draw list: when
   only vertices moved or changed colour (same indices and commands: playback, scrubbing), the
   triangles touching a changed vertex; otherwise the triangles that appeared or vanished (a 64-bit
   hash of each triangle's corners, texture and clip rectangle); their boxes mark 32x32-pixel tiles,
   joined into a few rectangles (:func:`merge_rects` weighs one more pass against the area);
2. regions whose *texture* changed while their triangles did not (the 3D view, the dope sheet's key
   layer) are added by the caller; any change inside the 3D view redraws the view's rectangle;
3. :meth:`Compositor.compose` rebuilds each rectangle from scratch in the back buffer: scissored
   clear (not under the 3D view, whose opaque picture covers it anyway), the 3D view blitted in
   (scaled up, pixels repeated, when it was drawn smaller), ImGui's draw data drawn with every clip
   rectangle cut down to the rectangle (commands outside it are skipped by ImGui's backend). The
   bottom-right pixel then gets the frame number, which the next frame reads back to know that the
   back buffer was kept.

Rebuilding a rectangle is idempotent, so overlapping rectangles are harmless. A new window size,
an ImGui texture being created or updated, a framebuffer scale other than 1 (HiDPI), or a back
buffer that was not kept (see :meth:`Compositor._kept`) redraw the whole window; more than
:data:`MAX_RECTS` rectangles become their bounding box.

Contract of the draw data (imgui-bundle 1.93, Dear ImGui 1.92): ``ImDrawVert`` = float32 pos[2],
uv[2], uint32 colour (20 bytes); ``ImDrawIdx`` = uint32; clip rectangles in window pixels (x0, y0,
x1, y1), origin top left; GL rectangles below are (x, y, w, h) with the origin bottom left.

>>> comp = Compositor(ctx)                                          # doctest: +SKIP
>>> comp.compose(imgui, render, (1280, 720), view=(view_fbo, (230, 20, 720, 450)))  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..render.rawgl import gl_function
from .damage_kernels import all_boxes, changed_boxes, dirty_tiles

TILE = 32
MAX_RECTS = 8
GIVE_UP = 30  # frames in a row without a kept back buffer before the check stops
PASS_COST = 16384  # pixels: what one more redraw pass costs on llvmpipe, in area (measured ~0.4 ms)
VERTEX = np.dtype([("pos", "<f4", (2,)), ("uv", "<f4", (2,)), ("col", "<u4")])  # ImDrawVert

GL_FRAMEBUFFER, GL_READ_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER = 0x8D40, 0x8CA8, 0x8CA9
GL_SCISSOR_TEST, GL_COLOR_BUFFER_BIT, GL_NEAREST, GL_LINEAR = 0x0C11, 0x4000, 0x2600, 0x2601


def _array(address: int, count: int, dtype) -> np.ndarray:
    """A copy of ``count`` items of ``dtype`` at ``address`` (an ImVector's data)."""
    dtype = np.dtype(dtype)
    if count <= 0 or not address:
        return np.zeros(0, dtype)
    raw = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, np.uint8).copy().view(dtype)


class DrawList:
    """One ImGui draw list's triangles as numpy (the arrays of :mod:`.damage_kernels`' contract):
    vertices ``vtx`` (V, 5) uint32 words and ``pos`` the same as float32, indices, commands (clip
    rectangle x0 y0 x1 y1, texture id, index offset, vertex offset, element count) and their first
    five columns' bits."""

    def __init__(self, cl):
        vtx = _array(cl.vtx_buffer.data_address(), cl.vtx_buffer.size(), VERTEX).view(np.uint32).reshape(-1, 5)
        idx = _array(cl.idx_buffer.data_address(), cl.idx_buffer.size(), np.uint32)
        cmds = []
        buf = cl.cmd_buffer
        for k in range(buf.size()):
            c = buf[k]
            r = c.clip_rect
            ref = c.tex_ref  # a texture ImGui owns (its atlas; maybe not uploaded yet) or one of ours
            tex = ref._tex_data.unique_id + 0.5 if ref._tex_data is not None else ref._tex_id
            cmds.append((r.x, r.y, r.z, r.w, float(tex), c.idx_offset, c.vtx_offset, c.elem_count))
        self._set(vtx, idx, cmds)

    @classmethod
    def from_arrays(cls, vtx: np.ndarray, idx: np.ndarray, cmds: np.ndarray) -> "DrawList":
        """A draw list from its arrays (vertices (V, 5) uint32 words, indices, commands (C, 8)); tests."""
        self = cls.__new__(cls)
        self._set(np.ascontiguousarray(vtx, np.uint32).reshape(-1, 5), np.ascontiguousarray(idx, np.uint32), cmds)
        return self

    def _set(self, vtx: np.ndarray, idx: np.ndarray, cmds) -> None:
        self.vtx, self.idx = vtx, idx
        self.pos = vtx.view(np.float32)
        self.cmds = np.asarray(cmds, np.float64).reshape(-1, 8)
        self.cmd_bits = np.ascontiguousarray(self.cmds[:, :5]).view(np.uint64)
        self.shape = self.idx.tobytes() + self.cmds.tobytes() + len(self.vtx).to_bytes(8, "little")
        self.key = self.vtx.tobytes() + self.shape

    def inside(self, rect) -> bool:
        """Whether every command's clip rectangle lies inside window rectangle ``rect`` (x, y, w, h)."""
        x, y, w, h = rect
        c = self.cmds[self.cmds[:, 7] > 0]  # commands that draw
        return bool(len(c)) and bool(np.all((c[:, 0] >= x) & (c[:, 1] >= y) & (c[:, 2] <= x + w) & (c[:, 3] <= y + h)))

    def changed_since(self, old: "DrawList") -> np.ndarray:
        """Boxes of what differs from ``old``: when only vertices moved or recoloured (same indices and
        commands: playback, scrubbing), the triangles touching a changed vertex, before and after;
        otherwise the triangles that appeared or vanished (hashed)."""
        return changed_boxes(self.vtx, self.pos, self.idx, self.cmds, self.cmd_bits,
                             old.vtx, old.pos, old.idx, old.cmds, old.cmd_bits, self.shape == old.shape)

    def boxes(self) -> np.ndarray:
        """Boxes (T, 4) x0 y0 x1 y1 of every triangle, cut to its clip rectangle."""
        return all_boxes(self.vtx, self.pos, self.idx, self.cmds)


class Damage:
    """Where one ImGui frame differs from the previous one (see the module docstring)."""

    def __init__(self, tile: int = TILE):
        self.tile = int(tile)
        self._last: list[DrawList] = []

    def update(self, draw_data, covered=None) -> list[np.ndarray]:
        """Take this frame's draw data; return boxes (K, 4) (x0 y0 x1 y1, window pixels) that changed.
        ``covered``: a window rectangle (x, y, w, h) redrawn whole this frame anyway (the 3D view when
        it was rendered again); a draw list clipped inside it this frame and the last is not compared
        (the skeleton overlay, which moves every frame while playing)."""
        return self.update_lists([DrawList(draw_data.cmd_lists[i]) for i in range(draw_data.cmd_lists_count)], covered)

    def update_lists(self, lists: list[DrawList], covered=None) -> list[np.ndarray]:
        """:meth:`update` on draw lists already copied."""
        boxes = []
        for k in range(max(len(lists), len(self._last))):
            new = lists[k] if k < len(lists) else None
            old = self._last[k] if k < len(self._last) else None
            if new is not None and old is not None:
                if covered is not None and new.inside(covered) and old.inside(covered):
                    continue
                if new.key != old.key:
                    boxes.append(new.changed_since(old))
            else:
                boxes.append((new or old).boxes())
        self._last = lists
        return boxes

    def reset(self) -> None:
        self._last = []

    def rects(self, boxes: list[np.ndarray], size: tuple[int, int]) -> list[tuple[int, int, int, int]]:
        """Boxes -> at most :data:`MAX_RECTS` rectangles (x, y, w, h; window pixels, top left) covering
        their tiles: runs of dirty tiles per tile row, merged with identical runs below."""
        w, h = size
        t = self.tile
        gw, gh = -(-w // t), -(-h // t)
        b = np.concatenate([np.asarray(x, np.float64).reshape(-1, 4) for x in boxes]) if boxes else np.zeros((0, 4))
        if not len(b):
            return []
        dirty = dirty_tiles(np.ascontiguousarray(b), float(t), gw, gh)  # empty boxes (cut by their clip) skipped
        edge = np.diff(np.pad(dirty.astype(np.int8), ((0, 0), (1, 1))), axis=1)  # +1 run start, -1 run end
        rows, starts = np.nonzero(edge == 1)
        ends = np.nonzero(edge == -1)[1]  # same order: row by row, left to right
        rects, open_runs = [], {}  # (a, c) -> (top row, last row) of a run continuing downwards
        for gy, a, c in zip(rows.tolist(), starts.tolist(), ends.tolist()):
            top, last = open_runs.get((a, c), (gy, gy - 1))
            if last != gy - 1:  # the same columns again after a gap: a new rectangle
                rects.append((a * t, top * t, min(c * t, w) - a * t, min((last + 1) * t, h) - top * t))
                top = gy
            open_runs[(a, c)] = (top, gy)
        for (a, c), (top, last) in open_runs.items():
            rects.append((a * t, top * t, min(c * t, w) - a * t, min((last + 1) * t, h) - top * t))
        rects = merge_rects(rects)
        if len(rects) > MAX_RECTS:
            xs0 = min(r[0] for r in rects)
            ys0 = min(r[1] for r in rects)
            xs1 = max(r[0] + r[2] for r in rects)
            ys1 = max(r[1] + r[3] for r in rects)
            rects = [(xs0, ys0, xs1 - xs0, ys1 - ys0)]
        return rects


def _contains(outer, inner) -> bool:
    """Whether window rectangle ``inner`` (x, y, w, h) lies inside ``outer``."""
    ox, oy, ow, oh = outer
    x, y, w, h = inner
    return ox <= x and oy <= y and x + w <= ox + ow and y + h <= oy + oh


def merge_rects(rects: list[tuple[int, int, int, int]], pass_cost: int = PASS_COST) -> list:
    """Join rectangles while one pass over their bounding box costs less than two passes: a pass
    costs ``pass_cost`` pixels' worth of work (ImGui's draw lists sent again) plus its area."""
    rects = list(rects)
    while len(rects) > 1:
        best = None
        for i in range(len(rects)):
            ax, ay, aw, ah = rects[i]
            for j in range(i + 1, len(rects)):
                bx, by, bw, bh = rects[j]
                x0, y0 = min(ax, bx), min(ay, by)
                x1, y1 = max(ax + aw, bx + bw), max(ay + ah, by + bh)
                gain = aw * ah + bw * bh + pass_cost - (x1 - x0) * (y1 - y0)
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, i, j, (x0, y0, x1 - x0, y1 - y0))
        if best is None:
            break
        _, i, j, union = best
        rects = [r for k, r in enumerate(rects) if k not in (i, j)] + [union]
    return rects


class Compositor:
    """Scissored redraw of the damaged rectangles straight into the window's back buffer (module
    docstring), when the back buffer still holds the last frame; the whole window otherwise."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.damage = Damage()
        self.size = (0, 0)
        self.frame = 0
        self.last_rects: list[tuple[int, int, int, int]] = []
        self.redrawn_pixels = 0
        self.misses = 0  # frames in a row whose back buffer was not kept
        self.kept_frames = 0  # frames drawn on top of the previous one (back buffer kept)
        self.full_frames = 0  # frames drawn whole (first, resized, buffer not kept, textures updating)
        u, i, f = ctypes.c_uint, ctypes.c_int, ctypes.c_float
        self._bind = gl_function(ctx, "glBindFramebuffer", u, u)
        self._blit = gl_function(ctx, "glBlitFramebuffer", i, i, i, i, i, i, i, i, u, u)
        self._enable = gl_function(ctx, "glEnable", u)
        self._disable = gl_function(ctx, "glDisable", u)
        self._scissor = gl_function(ctx, "glScissor", i, i, i, i)
        self._clear_color = gl_function(ctx, "glClearColor", f, f, f, f)
        self._clear = gl_function(ctx, "glClear", u)
        self._flush = gl_function(ctx, "glFlush")
        self._kept_now = None  # check_kept()'s answer for the coming compose()
        # A view drawn smaller (moving) is scaled up by repeating pixels: at the editor's 2x that looks
        # as sharp as the coarse picture is, where filtering blurs it, and it costs llvmpipe ~1.3 ms less
        # a playing frame (measured in the editor's frame time, interleaved A/B).
        self.smooth_upscale = False

    def flush(self) -> None:
        """Start rasterising the GL work queued so far and return (llvmpipe, Mesa 22.3: 0.04 ms; its
        threads rasterise while this thread goes on with Python)."""
        self._flush()

    def check_kept(self, size: tuple[int, int]) -> None:
        """Read the back buffer's frame number now, for this frame's :meth:`compose`: a read waits for
        every queued GL command, so the editor reads it right after the swap, when the rasteriser has
        had the panels' Python to finish the 3D view queued before them."""
        self._kept_now = self._kept(int(size[0]), int(size[1]))

    @staticmethod
    def _code(n: int) -> tuple[int, int, int]:
        return n & 255, (n >> 8) & 255, 0x80 | ((n >> 16) & 127)

    def _kept(self, w: int, h: int) -> bool:
        """Whether the back buffer still holds the frame drawn last: a window's back buffer is undefined
        after a swap, but Mesa's software rasteriser keeps it. The bottom-right pixel carries the frame
        number (written by :meth:`compose`); it is read back here before anything is drawn."""
        if self.frame == 0 or (w, h) != self.size or self.misses >= GIVE_UP:
            return False
        px = self.ctx.screen.read(viewport=(w - 1, 0, 1, 1), components=3, alignment=1)
        kept = tuple(px) == self._code(self.frame)
        self.misses = 0 if kept else self.misses + 1  # a driver that never keeps it: stop asking (a read stalls)
        return kept

    def compose(self, imgui, render_draw_data, size: tuple[int, int], *, view=None,
                extra: list[tuple[float, float, float, float]] = (), full: bool = False) -> list:
        """Draw this frame's changes into the window's back buffer.

        ``render_draw_data(draw_data)``: ImGui's GL backend. ``view``: (framebuffer, (x, y, w, h)) the 3D
        view's single-sample framebuffer and its place in the window (scaled to fit). ``extra``: window
        rectangles (x, y, w, h) whose pictures changed. ``full``: redraw everything. Returns the
        rectangles redrawn (x, y, w, h, top-left origin)."""
        w, h = int(size[0]), int(size[1])
        draw_data = imgui.get_draw_data()
        covered = None  # the view, when the caller says its picture changed: redrawn whole below
        if view is not None and any(_contains(e, view[1]) for e in extra):
            covered = view[1]
        boxes = self.damage.update(draw_data, covered)
        textures = draw_data.textures
        busy = any(t.status != imgui.ImTextureStatus.ok for t in textures) if textures is not None else False
        scale = draw_data.framebuffer_scale
        full = full or busy or (scale.x, scale.y) != (1.0, 1.0)  # damage is in ImGui units = pixels only at 1
        kept, self._kept_now = self._kept_now, None
        if full or not (self._kept(w, h) if kept is None else kept):
            rects = [(0, 0, w, h)]
            self.full_frames += 1
        else:
            boxes += [np.array([[x, y, x + rw, y + rh]], np.float64) for x, y, rw, rh in extra]
            b = np.concatenate([np.zeros((0, 4))] + [np.asarray(x, np.float64).reshape(-1, 4) for x in boxes])
            view_dirty = False
            if view is not None:  # changes inside the 3D view: the view is redrawn as one rectangle
                vx, vy, vw, vh = view[1]
                inside = (b[:, 0] >= vx - 1) & (b[:, 1] >= vy - 1) & (b[:, 2] <= vx + vw + 1) & (b[:, 3] <= vy + vh + 1)
                inside &= (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
                view_dirty = bool(inside.any())
                b = b[~inside]
            rects = self.damage.rects([b], (w, h))
            if view_dirty:
                rects.append((int(vx), int(vy), int(vw), int(vh)))
            self.kept_frames += 1
        self.size = (w, h)
        self.last_rects = rects
        self.redrawn_pixels = int(sum(r[2] * r[3] for r in rects))
        if rects:
            self._redraw(draw_data, rects, render_draw_data, view)
        self.frame += 1
        self._bind(GL_FRAMEBUFFER, 0)
        self._enable(GL_SCISSOR_TEST)
        self._scissor(w - 1, 0, 1, 1)
        self._clear_color(*(c / 255.0 for c in self._code(self.frame)), 1.0)
        self._clear(GL_COLOR_BUFFER_BIT)
        self._disable(GL_SCISSOR_TEST)
        self.ctx.screen.use()  # moderngl's idea of the bound framebuffer and viewport, again true
        self.ctx.viewport = (0, 0, w, h)
        return rects

    def _redraw(self, draw_data, rects, render_draw_data, view) -> None:
        w, h = self.size
        lists = [draw_data.cmd_lists[i] for i in range(draw_data.cmd_lists_count)]
        cmds = [[cl.cmd_buffer[k] for k in range(cl.cmd_buffer.size())] for cl in lists]
        clips = [[(c.clip_rect.x, c.clip_rect.y, c.clip_rect.z, c.clip_rect.w) for c in row] for row in cmds]
        ImVec4 = type(cmds[0][0].clip_rect) if cmds and cmds[0] else None
        for x, y, rw, rh in rects:
            self._bind(GL_FRAMEBUFFER, 0)
            self._enable(GL_SCISSOR_TEST)
            self._scissor(int(x), int(h - y - rh), int(rw), int(rh))
            if view is None or not _contains(view[1], (x, y, rw, rh)):  # else the view's opaque picture covers it
                self._clear_color(0.0, 0.0, 0.0, 1.0)
                self._clear(GL_COLOR_BUFFER_BIT)
            if view is not None:
                fbo, (vx, vy, vw, vh) = view
                if x < vx + vw and vx < x + rw and y < vy + vh and vy < y + rh:
                    sw, sh = fbo.size
                    same = (sw, sh) == (int(vw), int(vh))
                    self._bind(GL_READ_FRAMEBUFFER, fbo.glo)
                    self._bind(GL_DRAW_FRAMEBUFFER, 0)
                    self._blit(0, 0, sw, sh, int(vx), int(h - vy - vh), int(vx + vw), int(h - vy),
                               GL_COLOR_BUFFER_BIT, GL_LINEAR if self.smooth_upscale and not same else GL_NEAREST)
                    self._bind(GL_FRAMEBUFFER, 0)
            self._disable(GL_SCISSOR_TEST)
            if ImVec4 is not None:
                for row, orig in zip(cmds, clips):
                    for c, (a, b, cc, d) in zip(row, orig):
                        c.clip_rect = ImVec4(max(a, x), max(b, y), min(cc, x + rw), min(d, y + rh))
                render_draw_data(draw_data)
        if ImVec4 is not None:
            for row, orig in zip(cmds, clips):
                for c, r in zip(row, orig):
                    c.clip_rect = ImVec4(*r)

    def release(self) -> None:
        self.damage.reset()
        self.frame = 0
