"""glTF materials as GL state: baseColorFactor (linear RGBA) and baseColorTexture (sRGB RGBA8) through
its KHR_texture_transform, emissive colour, alpha MASK and KHR_materials_unlit.

Images are decoded with imageio (PNG/JPEG through Pillow) once per image; a texture that cannot be
decoded is dropped with a warning and the factor alone is used.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

DEFAULT_COLOR = np.array([0.72, 0.72, 0.74, 1.0], np.float32)  # meshes without a material


@dataclass
class MaterialGL:
    base_color: np.ndarray  # (4,) float32, linear RGBA
    texture: object | None  # moderngl.Texture or None
    texcoord: int = 0
    double_sided: bool = False  # glTF doubleSided (back faces culled only when a renderer is asked to)
    uv_transform: np.ndarray = field(default_factory=lambda: np.eye(3))  # (3, 3) row-major KHR_texture_transform
    unlit: bool = False  # KHR_materials_unlit
    emissive: np.ndarray = field(default_factory=lambda: np.zeros(3, np.float32))  # (3,) linear RGB, x strength
    alpha_cutoff: float = -1.0  # alphaMode MASK's cutoff; -1: not masked
    index: int | None = None  # the document material it shows (animated factors are looked up by it)


def decode_image(data: bytes) -> np.ndarray:
    """Encoded image bytes -> (H, W, 4) uint8 RGBA, first row = top of the image."""
    import imageio.v3 as iio

    image = np.asarray(iio.imread(data))
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.dtype != np.uint8:  # 16-bit PNGs
        image = (image.astype(np.float64) * (255.0 / max(np.iinfo(image.dtype).max, 1))).astype(np.uint8)
    if image.shape[2] == 3:
        image = np.concatenate([image, np.full(image.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return np.ascontiguousarray(image[:, :, :4])


class MaterialCache:
    """GL textures and factors of a document's materials, made on first use."""

    def __init__(self, ctx, document):
        self.ctx = ctx
        self.document = document
        self._textures: dict[int, object | None] = {}
        self._materials: dict[int | None, MaterialGL] = {}

    def get(self, index: int | None) -> MaterialGL:
        if index not in self._materials:
            self._materials[index] = self._make(index)
        return self._materials[index]

    def _make(self, index):
        materials = self.document.materials
        if index is None or not (0 <= index < len(materials)):
            return MaterialGL(DEFAULT_COLOR.copy(), None)
        m = materials[index]
        color = np.asarray(m.base_color_factor, dtype=np.float32).reshape(4)
        texture = self._texture(m.base_color_texture) if m.base_color_texture is not None else None
        transform = m.base_color_transform.matrix() if m.base_color_transform is not None else np.eye(3)
        emissive = (np.asarray(m.emissive_factor, np.float64) * m.emissive_strength).astype(np.float32)
        cutoff = float(m.alpha_cutoff) if m.alpha_mode == "MASK" else -1.0
        return MaterialGL(color, texture, m.base_color_texcoord, bool(m.double_sided), transform, bool(m.unlit),
                          emissive, cutoff, index)

    def _texture(self, image_index: int):
        if image_index in self._textures:
            return self._textures[image_index]
        import moderngl

        texture = None
        images = self.document.images
        image = images[image_index] if 0 <= image_index < len(images) else None
        if image is not None and image.data:
            try:
                pixels = decode_image(image.data)
            except Exception as exc:  # a corrupt or unsupported image must not stop the render
                warnings.warn(f"image {image_index} ({image.mime_type}) cannot be decoded: {exc}; using the base colour",
                              stacklevel=2)
            else:
                h, w = pixels.shape[:2]
                texture = self.ctx.texture((w, h), 4, pixels.tobytes())
                texture.build_mipmaps()
                texture.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
                texture.repeat_x = texture.repeat_y = True
        self._textures[image_index] = texture
        return texture

    def release(self) -> None:
        for texture in self._textures.values():
            if texture is not None:
                texture.release()
        self._textures.clear()
        self._materials.clear()
