"""Render a clip to files: one ``.png``, a numbered ``.png`` sequence, a ``.gif`` or an ``.mp4``.

``render_clip`` is the library entry point behind ``skeletal render``. Posing happens here on the
CPU through the library (:func:`.layout.pose_at`: sample -> world matrices), drawing in
:class:`.renderer.Renderer`. A crowd of N instances stands on a grid, each at its own phase of the
clip, and is drawn with one instanced draw call per primitive.

Video: GIF through imageio's Pillow plugin; MP4 (H.264, yuv420p) through imageio-ffmpeg, whose pip
package ships its own ffmpeg binary. Odd frame sizes are padded by one pixel for MP4 (yuv420p needs
even sizes).
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import INSTALL_HINT, RenderError

FORMATS = (".png", ".gif", ".mp4")


@dataclass
class RenderResult:
    """What was written: ``paths`` (one, or one per frame for a PNG sequence), frame count, size."""

    paths: list[str]
    frames: int
    size: tuple[int, int]
    clip: str
    info: str = ""
    timings: dict[str, float] = field(default_factory=dict)


def parse_size(text: str | tuple[int, int]) -> tuple[int, int]:
    """``"640x480"`` -> (640, 480)."""
    if isinstance(text, (tuple, list)):
        w, h = (int(v) for v in text)
    else:
        m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", str(text))
        if not m:
            raise RenderError(f"size {text!r} is not WIDTHxHEIGHT (e.g. 640x480)")
        w, h = int(m.group(1)), int(m.group(2))
    if not (8 <= w <= 8192 and 8 <= h <= 8192):
        raise RenderError(f"size {w}x{h} is out of range (8..8192 each way)")
    return w, h


def load_model(model):
    """An :class:`skeletal.Asset` from an Asset, a model path, or None (the built-in demo character)."""
    from ..asset import Asset

    if isinstance(model, Asset):
        return model
    if model is None:
        try:
            from ..demo import demo_asset
        except ImportError:
            raise RenderError("no MODEL given and the built-in demo character (skeletal.demo) is not "
                              "available in this installation: give a .gltf or .glb file") from None
        return demo_asset()
    path = os.fspath(model)
    if not os.path.exists(path):
        raise RenderError(f"{path}: no such file")
    try:
        from ..asset import load
    except ImportError as exc:
        raise RenderError(f"cannot load {path}: the glTF reader is not available ({exc})") from None
    return load(path)


def default_output(asset, clip) -> str:
    """``<model>_<clip>.gif`` (``.png`` for a clip without duration), in the current folder."""
    stem = os.path.splitext(os.path.basename(asset.path or "model"))[0] or "model"
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{stem}_{clip.name}").strip("_")
    return name + (".gif" if clip.duration > 0 else ".png")


# -- writers -------------------------------------------------------------------------------------


class _PngWriter:
    """One PNG, or with ``sequence`` ``name_0001.png``, ``name_0002.png``... (numbered from 1)."""

    def __init__(self, path, fps, sequence):
        self.path, self.sequence, self.paths = path, sequence, []

    def append(self, image):
        import imageio.v3 as iio

        if self.sequence:
            stem, ext = os.path.splitext(self.path)
            path = f"{stem}_{len(self.paths) + 1:04d}{ext}"
        else:
            path = self.path
        iio.imwrite(path, image)
        self.paths.append(path)

    def close(self):
        return self.paths


#: A GIF frame's delay is a whole number of hundredths of a second; browsers show delays under 2 as 10.
GIF_MIN_DELAY_CS = 2


def gif_frame_step(fps: float) -> int:
    """Every how many frames a GIF at ``fps`` keeps one: 1 up to 50 fps, 2 up to 100 fps, ...

    >>> gif_frame_step(30), gif_frame_step(60), gif_frame_step(120)
    (1, 2, 3)
    """
    return max(1, math.ceil(fps * GIF_MIN_DELAY_CS / 100.0 - 1e-9))


def gif_delays(count: int, fps: float) -> list[int]:
    """Delays in hundredths of a second for ``count`` GIF frames at ``fps`` (at most 50): each frame
    ends at the hundredth nearest its true end time, so the delays alternate (3, 4, 3 at 30 fps) and
    the average rate is exact.

    >>> gif_delays(6, 30.0)
    [3, 4, 3, 3, 4, 3]
    """
    ends = [round((i + 1) * 100.0 / fps) for i in range(count)]
    return [b - a for a, b in zip([0] + ends[:-1], ends)]


class _GifWriter:
    """Frames streamed into the file as they come, so memory does not grow with the length: each frame
    is compared with the one before, only the rectangle that changed is written (quantised to its own
    256-colour palette by Pillow), and equal frames become one longer delay. The GIF loops forever;
    every frame ends at the hundredth of a second nearest its time (see :func:`gif_delays`)."""

    def __init__(self, path, fps, sequence):
        self.path, self.fps = path, fps
        self._file = open(path, "wb")  # closed in close()
        self._count = 0  # frames received
        self._previous: np.ndarray | None = None  # the last frame received (what a viewer shows)
        self._pending: tuple[np.ndarray, tuple[int, int], int] | None = None  # (pixels, offset, first frame)

    def append(self, image):
        image = np.ascontiguousarray(image[:, :, :3])
        previous = self._previous
        if previous is None:
            self._pending = (image, (0, 0), 0)
        else:
            changed = np.any(image != previous, axis=2)
            rows, cols = np.flatnonzero(changed.any(axis=1)), np.flatnonzero(changed.any(axis=0))
            if rows.size:  # a frame that equals the one before only lengthens its delay
                self._flush(self._count)
                y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
                self._pending = (image[y0:y1, x0:x1].copy(), (int(x0), int(y0)), self._count)
        self._previous = image
        self._count += 1

    def _flush(self, end: int) -> None:
        """Write the pending rectangle, shown from its first frame until frame ``end``."""
        if self._pending is None:
            return
        from PIL import GifImagePlugin
        from PIL import Image as PILImage

        pixels, offset, first = self._pending
        self._pending = None
        delay = round(end * 100.0 / self.fps) - round(first * 100.0 / self.fps)
        frame = PILImage.fromarray(pixels).convert("P", palette=PILImage.Palette.ADAPTIVE)
        if first == 0:
            header, _used = GifImagePlugin.getheader(frame, None, {"loop": 0, "duration": 10 * delay})
            self._file.write(b"".join(header))
            params = {}
        else:
            params = {"include_color_table": True}
        while True:  # a GIF delay holds at most 65535 hundredths: a longer still repeats one pixel
            step = min(delay, 65535)
            self._file.write(b"".join(GifImagePlugin.getdata(frame, offset, duration=10 * step, **params)))
            delay -= step
            if delay <= 0:
                break
            frame = PILImage.fromarray(np.ascontiguousarray(pixels[:1, :1])).convert("P", palette=PILImage.Palette.ADAPTIVE)
            params = {"include_color_table": True}

    def close(self):
        try:
            self._flush(self._count)
            self._file.write(b";")  # the GIF trailer
        finally:
            self._file.close()
        return [self.path]

    def abort(self):
        """Stop writing and remove the unfinished file (the render failed or was interrupted)."""
        self._file.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class _Mp4Writer:
    """H.264 yuv420p through imageio-ffmpeg's bundled ffmpeg, streamed frame by frame."""

    def __init__(self, path, fps, sequence):
        self.path, self.fps, self._gen, self._size = path, fps, None, None

    def append(self, image):
        h, w = image.shape[:2]
        pad_h, pad_w = h % 2, w % 2
        if pad_h or pad_w:
            image = np.pad(image, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
        if self._gen is None:
            try:
                import imageio_ffmpeg
            except ImportError:
                raise RenderError(f"writing .mp4 needs imageio-ffmpeg: {INSTALL_HINT}") from None
            self._size = (image.shape[1], image.shape[0])
            self._gen = imageio_ffmpeg.write_frames(
                self.path, self._size, fps=self.fps, codec="libx264", pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p", macro_block_size=1, quality=7, ffmpeg_log_level="error")
            self._gen.send(None)
        self._gen.send(np.ascontiguousarray(image).tobytes())

    def close(self):
        if self._gen is not None:
            self._gen.close()
        return [self.path]


_WRITERS = {".png": _PngWriter, ".gif": _GifWriter, ".mp4": _Mp4Writer}


# -- the clip ------------------------------------------------------------------------------------


def _ordinal(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def frame_times(clip, fps: float, seconds: float | None, single: bool, start: float = 0.0) -> np.ndarray:
    """Query times of the frames to render: ``start`` only when ``single``; else ``seconds`` (default:
    the clip's duration, end excluded so that a looping GIF does not repeat its first frame) at ``fps``."""
    if single:
        return np.array([start])
    from ..io.budget import frame_count

    duration = clip.duration if seconds is None else float(seconds)
    what = f"clip {clip.name!r}" if seconds is None else "--seconds"
    count = frame_count(duration, fps, what=what, inclusive=False)  # refuses 3e38 s or 1e300 fps at once
    return start + np.arange(count) / fps


def render_clip(model_or_asset=None, clip: str | int | None = None, out_path: str | None = None, fps: float = 30.0,
                size: tuple[int, int] | str = (640, 480), seconds: float | None = None, camera: str | None = None,
                skeleton: bool = False, weights_joint: str | int | None = None, crowd_n: int = 1,
                frames: bool = False, verbose: bool = False, palette_mode: str = "auto", start: float = 0.0,
                progress: bool = True, log: Callable[[str], None] | None = None,
                crossfade: str | None = None, skinning: str = "lbs", ground: str | None = None,
                look_at: str | None = None, jiggle: bool = False, force: bool = False,
                gpu_pose: bool = False) -> RenderResult:
    """Render ``clip`` of a model (path, :class:`skeletal.Asset`, or None for the demo) to ``out_path``.

    The format follows the suffix: ``.png`` (the frame at ``start``; with ``frames=True`` every
    frame as ``name_0001.png``...), ``.gif``, ``.mp4``. ``seconds`` defaults to the clip's duration,
    played looping from ``start``. ``crowd_n`` instances stand on a grid at different phases.
    ``verbose`` logs the GL renderer, the palette path and timings (to ``log``, default stderr); a
    progress bar appears on stderr for renders taking over a second. ``crossfade="Walk:Run@1.0:0.5"``
    plays Walk, then at 1.0 s crossfades to Run over 0.5 s (posed by :class:`skeletal.Mixer`).
    ``skinning``: "lbs" (linear blend) or "dqs" (dual quaternion) skinning in the shaders.
    Without a model and a clip the built-in character walks for 3 seconds. ``ground`` (a spec such
    as ``"terrain:amplitude=0.2"``), ``look_at`` (``"x,y,z"``) and ``jiggle`` add procedural stages
    (see :mod:`skeletal.render.terrain`): feet placed on that ground, drawn under the character.

    Frames are counted before anything is drawn (:func:`skeletal.io.budget.check_output`): more than
    108,000 (an hour at 30 fps) are refused unless ``force``. Frames go to the writer one at a time
    (GIF and MP4 alike), so memory does not grow with the length.
    ``gpu_pose``: the crowd is posed by compute shaders (:class:`~skeletal.render.gpu_pose.GpuCrowd`,
    OpenGL 4.3) and drawn from the GPU's palette buffer; the CPU only advances a clock uniform.
    """
    from ..anim.properties import sample_properties
    from .layout import crowd_phases, grid_offsets, pose_at, rest_clip
    from .renderer import Renderer

    say = log or (lambda text: print(text, file=sys.stderr))
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    from ..io.budget import SamplingError, check_fps, check_output, frame_count

    try:
        fps = check_fps(fps)
    except SamplingError as exc:
        raise RenderError(str(exc)) from None
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise RenderError(f"seconds must be positive and finite, got {seconds}")
    if not math.isfinite(start):
        raise RenderError(f"the start time must be finite, got {start}")
    crowd_n = int(crowd_n)
    if crowd_n < 1:
        raise RenderError(f"crowd size must be at least 1, got {crowd_n}")
    width, height = parse_size(size)
    asset = load_model(model_or_asset)
    if model_or_asset is None and clip is None and crossfade is None:
        clip = "walk"  # the built-in character's signature clip
        seconds = 3.0 if seconds is None else seconds
    fade = parse_crossfade(crossfade) if crossfade else None
    if fade is not None:
        clip = fade[0]
        asset.clip(fade[1])  # both clips must exist
        if seconds is None:
            seconds = fade[2] + fade[3] + max(asset.clip(fade[1]).duration, 1.0)
    the_clip = (asset.clip(clip) if clip is not None else asset.clips[0]) if asset.clips else rest_clip()
    if clip is not None and not asset.clips:
        raise RenderError(f"{asset.name} has no clips (asked for {clip!r})")
    out_path = out_path or default_output(asset, the_clip)
    ext = os.path.splitext(out_path)[1].lower()
    if ext not in _WRITERS:
        raise RenderError(f"cannot write {out_path!r}: the output must end in {', '.join(FORMATS)}")
    if frames and ext != ".png":
        raise RenderError("--frames writes a numbered PNG sequence: give an output ending in .png")
    folder = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(folder):
        raise RenderError(f"cannot write {out_path}: folder {folder} does not exist")
    if weights_joint is not None:
        from .overlays import resolve_joint

        resolve_joint(asset, weights_joint)  # a bad name fails before any GL work
    if ext == ".gif" and gif_frame_step(fps) > 1:
        step = gif_frame_step(fps)
        warnings.warn(f"{os.path.basename(out_path)}: a GIF shows at most {100 // GIF_MIN_DELAY_CS} frames a second "
                      f"(its delays are whole hundredths, at least {GIF_MIN_DELAY_CS}): {fps:g} fps is written as every "
                      f"{_ordinal(step)} frame, {fps / step:g} fps; use .mp4 for the full rate", stacklevel=2)
        fps = fps / step
    timings["load"] = time.perf_counter() - t0

    single = ext == ".png" and not frames
    try:  # counted and sized before any array of times is made
        if not single:
            count = frame_count(the_clip.duration if seconds is None else seconds, fps, inclusive=False,
                                what=f"clip {the_clip.name!r}" if seconds is None else "--seconds")
            check_output(os.path.basename(out_path), count, 3 * width * height, force=force,
                         hint="fewer frames (--seconds, --fps)", streamed=True)
        times = frame_times(the_clip, fps, seconds, single=single, start=start)
    except SamplingError as exc:
        raise RenderError(f"{asset.name}: {exc}") from None
    procedural = ground is not None or look_at is not None or jiggle
    if gpu_pose and (procedural or fade is not None or skeleton or skinning != "lbs"):
        from .gpu_pose import UNSUPPORTED

        raise RenderError(f"--gpu-pose draws a crowd playing one clip with LBS skinning (no --crossfade, --ground, "
                          f"--look-at, --jiggle, --skeleton or --skinning dqs). {UNSUPPORTED}")
    if gpu_pose and palette_mode not in ("auto", "ssbo"):
        raise RenderError(f"--gpu-pose draws from the GPU crowd's storage buffer: --palette ssbo (or auto), not {palette_mode}")
    if procedural:
        from ..errors import SkeletalError
        from ..playback.ground import as_ground
        from .terrain import TerrainRenderer, parse_point

        target = parse_point(look_at) if look_at is not None else None
        try:
            surface = as_ground(ground) if ground is not None else None
        except SkeletalError as exc:
            raise RenderError(f"--ground: {exc}") from None
    if procedural and surface is not None:
        renderer = TerrainRenderer(asset, width, height, ground=surface, palette_mode=palette_mode, instances=crowd_n,
                                   camera=camera, skinning=skinning)
    else:
        renderer = Renderer(asset, width, height, palette_mode=palette_mode, instances=1 if gpu_pose else crowd_n,
                            camera=camera, skinning=skinning)
    try:
        renderer.frame(the_clip)
        lo, hi = renderer.bounds
        offsets = None
        phases = np.zeros(crowd_n)
        if crowd_n > 1:
            size_xyz = hi - lo
            spacing = max(1.2 * float(max(size_xyz[0], size_xyz[2])), 0.5 * float(size_xyz[1]), 1e-3)
            offsets = grid_offsets(crowd_n, spacing)
            phases = crowd_phases(crowd_n, the_clip.duration)
            renderer.set_bounds(lo, hi, offsets)
        timings["setup"] = time.perf_counter() - t0 - timings["load"]
        info = renderer.describe()
        if verbose:
            say(f"skeletal render: {asset.name}, clip {the_clip.name!r} ({the_clip.duration:g} s), "
                f"{len(times)} frame(s) at {fps:g} fps, {width}x{height}, {crowd_n} instance(s)")
            say(f"skeletal render: {info}")
            cam = renderer.camera
            say(f"skeletal render: camera eye {np.round(cam.eye, 3).tolist()} target "
                f"{np.round(cam.target, 3).tolist()} fov {cam.fov:g}")
        writer = _WRITERS[ext](out_path, fps, frames)
        bar = _progress(len(times), os.path.basename(out_path), progress)
        draw_time = 0.0
        pose = _crossfade_poser(asset, fade, phases, float(times[0])) if fade else None
        poser = None
        followed = None
        if renderer.follow_reference is not None:  # --camera follow: the camera moves with the root
            from .camera import motion_node

            followed = motion_node(asset)
        gpu_crowd = None
        if gpu_pose:
            from .gpu_pose import GpuCrowd

            gpu_crowd = GpuCrowd(asset, crowd_n, ctx=renderer.ctx)
            if asset.clips:
                gpu_crowd.play(the_clip, offsets=phases + float(times[0]))
            if verbose:
                say(f"skeletal render: {gpu_crowd.describe()}")
        if procedural:
            from .terrain import ProceduralPoser

            poser = ProceduralPoser(asset, the_clip, phases, float(times[0]), ground=surface, look_at=target,
                                    jiggle=jiggle, offsets=offsets, fade=fade)
        try:
            previous = float(times[0])
            for t in times:
                if gpu_crowd is not None:  # one dispatch: clocks, poses, palettes on the GPU
                    gpu_crowd.update(float(t) - previous)
                    previous = float(t)
                    t1 = time.perf_counter()
                    image = renderer.draw(gpu_crowd, offsets, weights_joint=weights_joint)
                    draw_time += time.perf_counter() - t1
                    writer.append(image)
                    bar.update(1)
                    continue
                if poser is not None:
                    world, morph, placed = poser(float(t))
                    if surface is not None:
                        renderer.shift = poser.shift
                    if followed is not None:
                        renderer.follow(np.asarray(world)[0, followed, :3, 3])
                    t1 = time.perf_counter()
                    image = renderer.draw((world, morph), placed, skeleton=skeleton, weights_joint=weights_joint)
                    draw_time += time.perf_counter() - t1
                    writer.append(image)
                    bar.update(1)
                    continue
                if pose is not None:
                    world, morph = pose(float(t))
                else:
                    world, morph = pose_at(asset, the_clip, t + phases, loop="repeat")
                    if len(asset.properties):  # KHR_animation_pointer: materials, visibility (first instance's)
                        renderer.properties = sample_properties(the_clip, asset.properties, t + phases[:1], loop="repeat")[0]
                if followed is not None:
                    renderer.follow(np.asarray(world)[0, followed, :3, 3])
                t1 = time.perf_counter()
                image = renderer.draw((world, morph), offsets, skeleton=skeleton, weights_joint=weights_joint)
                draw_time += time.perf_counter() - t1
                writer.append(image)
                bar.update(1)
        except BaseException:
            abort = getattr(writer, "abort", None)
            if abort is not None:  # a streamed file cut short is not left behind
                abort()
            raise
        finally:
            bar.close()
            if gpu_crowd is not None:
                gpu_crowd.release()
        paths = writer.close()
    finally:
        renderer.release()
    timings["draw"] = draw_time
    timings["total"] = time.perf_counter() - t0
    if verbose:
        say(f"skeletal render: {len(times)} frame(s) in {timings['total']:.2f} s "
            f"(GPU draw + readback {1000 * draw_time / max(len(times), 1):.1f} ms/frame)")
    return RenderResult(paths, len(times), (width, height), the_clip.name, info, timings)


def parse_crossfade(text: str) -> tuple[str, str, float, float]:
    """``"Walk:Run@1.0:0.5"`` -> ("Walk", "Run", 1.0, 0.5): from clip, to clip, start (s), duration (s).
    Clip names may contain ':' (e.g. ``mixamo:Walk``) only if the text has a single '@'; the last ':'
    before '@' separates the two clips."""
    m = re.fullmatch(r"(.+):(.+)@([-+\d.eE]+)(?::([-+\d.eE]+))?", text.strip())
    if not m:
        raise RenderError(f"--crossfade {text!r} is not FROM:TO@START[:DURATION] (e.g. Walk:Run@1.0:0.5)")
    try:
        at = float(m.group(3))
        duration = float(m.group(4)) if m.group(4) else 0.3
    except ValueError:
        raise RenderError(f"--crossfade {text!r}: start and duration must be numbers") from None
    if at < 0 or duration < 0:
        raise RenderError(f"--crossfade {text!r}: start and duration must not be negative")
    return m.group(1), m.group(2), at, duration


def _crossfade_poser(asset, fade, phases: np.ndarray, first: float):
    """A function t -> (world (B, N, 4, 4), morph (B, M)) playing fade[0], crossfading to fade[1]."""
    from ..playback import Mixer

    source, target, at, duration = fade
    mixer = Mixer(asset, len(phases), events=False)
    mixer.play(source, offset=phases + first)
    state = {"now": first, "faded": False}

    def pose(t: float):
        if not state["faded"] and t >= at:
            mixer.update(max(at - state["now"], 0.0))
            state["now"] = max(at, state["now"])
            mixer.crossfade(target, duration)
            state["faded"] = True
        mixer.update(t - state["now"])
        state["now"] = t
        return mixer.world, mixer.morph_weights

    return pose


def _progress(total: int, label: str, enabled: bool):
    """A tqdm bar on stderr that shows itself only after a second (short renders stay quiet)."""
    try:
        from tqdm import tqdm
    except ImportError:
        enabled = False
    if not enabled or total <= 1:
        class _Quiet:
            def update(self, n):
                pass

            def close(self):
                pass

        return _Quiet()
    return tqdm(total=total, desc=label, unit="frame", delay=1.0, file=sys.stderr, leave=False)
