"""GPU rendering of skeletal assets with moderngl (headless: EGL, works on Mesa llvmpipe).

Modules, one job each::

    context.py    a headless OpenGL context (EGL first), its renderer/version string
    rawgl.py      the few raw GL entry points moderngl lacks (buffer textures), through ctypes
    palette.py    skin palette upload paths: uniform array, UBO, SSBO, texture; best_available()
    programs.py   GLSL sources from shaders/*.glsl with #include and #define, compiled and cached
    geometry.py   a primitive's vertex data as the shaders want it (influences padded to 4 or 8)
    materials.py  glTF baseColorFactor / baseColorTexture -> GL textures (imageio decodes images)
    layout.py     where each skin and rigid mesh sits in the per-instance palette; CPU posing helpers
    camera.py     camera spec strings, automatic framing from the clip's animated bounds
    overlays.py   skeleton lines and per-vertex weight heat of one joint
    feedback.py   GPU skinning captured by transform feedback (parity tests, debugging)
    renderer.py   Renderer: upload palettes and draw one frame into a numpy image
    gpu_pose.py   GpuCrowd: crowd posing in compute shaders, palettes left on the GPU for the renderer
    anim_texture.py        baked animation textures: clips as palettes per frame, files, error
    anim_texture_draw.py   TextureCrowdRenderer: a crowd drawn from such a texture (a time uniform per frame)
    output.py     render_clip(): frames -> .png / numbered .png / .gif / .mp4
    command.py    the ``skeletal render`` click command

Importing this package, :mod:`.command` or :mod:`.errors` does not import moderngl; the GL modules
import it at their top. Errors are :class:`RenderError` (a :class:`skeletal.SkeletalError`).
"""

from .errors import RenderError

__all__ = ["RenderError", "Renderer", "render_clip", "create_context", "GpuCrowd", "TextureCrowdRenderer",
           "bake_texture"]


def __getattr__(name: str):
    # Lazy: ``skeletal.render.Renderer`` imports moderngl only when asked for.
    if name == "Renderer":
        from .renderer import Renderer

        return Renderer
    if name == "render_clip":
        from .output import render_clip

        return render_clip
    if name == "GpuCrowd":
        from .gpu_pose import GpuCrowd

        return GpuCrowd
    if name == "TextureCrowdRenderer":
        from .anim_texture_draw import TextureCrowdRenderer

        return TextureCrowdRenderer
    if name == "bake_texture":
        from .anim_texture import bake_texture

        return bake_texture
    if name == "create_context":
        from .context import create_context

        return create_context
    raise AttributeError(f"module 'skeletal.render' has no attribute {name!r}")
