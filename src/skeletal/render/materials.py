"""glTF materials as GL state: baseColorFactor (linear RGBA) and baseColorTexture (sRGB RGBA8) through
its KHR_texture_transform, emissive colour, alpha MASK and KHR_materials_unlit.

Images are decoded with imageio (PNG/JPEG through Pillow) once per image; a texture that cannot be
decoded is dropped with a warning and the factor alone is used. Before decoding, the image's header
gives its size, and the decoded bytes are charged to the model file's memory budget
(:mod:`skeletal.io.budget`): a texture bomb (a small PNG declaring 12000x12000 16-bit pixels) is
dropped the same way, the warning naming the size it would need.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..io.budget import BudgetError, FileBudget

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


#: Bytes per pixel as decoded, by Pillow mode (a 16-bit PNG counts 2 bytes a channel, see below).
_MODE_BYTES = {"1": 1, "L": 1, "P": 1, "LA": 2, "La": 2, "PA": 2, "RGB": 3, "YCbCr": 3, "LAB": 3, "HSV": 3, "RGBA": 4,
               "RGBa": 4, "RGBX": 4, "CMYK": 4, "I": 4, "F": 4, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}


def image_header(data: bytes | memoryview) -> tuple[int, int, int]:
    """(width, height, decoded bytes per pixel) from an encoded image's header alone (nothing decoded)."""
    from PIL import Image as PILImage

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's bomb warning: the budget says it better
        with PILImage.open(io.BytesIO(bytes(data))) as image:
            width, height = image.size
            per_pixel = _MODE_BYTES.get(image.mode, 4)
            if image.format == "PNG" and _png_bit_depth(data) == 16:  # imageio keeps 16 bits a channel
                per_pixel = 2 * len(image.getbands())
    return width, height, per_pixel


def _png_bit_depth(data: bytes | memoryview) -> int:
    """The bit depth in a PNG's IHDR (signature 8 bytes, chunk length and type 8, width and height 8)."""
    head = bytes(data[:25])
    return head[24] if len(head) == 25 and head[12:16] == b"IHDR" else 8


def decoded_image_bytes(data: bytes | memoryview) -> tuple[int, int, int]:
    """(width, height, bytes) that decoding ``data`` to RGBA8 costs at its peak (the decoder's own
    pixels plus the RGBA8 copy)."""
    width, height, per_pixel = image_header(data)
    return width, height, width * height * (per_pixel + 4)


def decode_image(data: bytes, budget: FileBudget | None = None, where: str = "image") -> np.ndarray:
    """Encoded image bytes -> (H, W, 4) uint8 RGBA, first row = top of the image. With ``budget``, the
    size its header declares is charged first (:class:`skeletal.io.budget.BudgetError` when over)."""
    import imageio.v3 as iio

    if budget is not None:
        width, height, size = decoded_image_bytes(data)
        budget.charge(size, where, f"a {width}x{height} texture decoded")
    image = np.asarray(iio.imread(data))
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.dtype == np.uint16:  # 16-bit PNGs: v * 255 / 65535 == v // 257, in integers (no float copy)
        image = (image // np.uint16(257)).astype(np.uint8)
    elif image.dtype != np.uint8:
        image = (image.astype(np.float32) * np.float32(255.0 / max(np.iinfo(image.dtype).max, 1))).astype(np.uint8)
    if image.shape[2] == 3:
        image = np.concatenate([image, np.full(image.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return np.ascontiguousarray(image[:, :, :4])


class MaterialCache:
    """GL textures and factors of a document's materials, made on first use."""

    def __init__(self, ctx, document):
        self.ctx = ctx
        self.document = document
        path = getattr(document, "path", None)
        size = os.path.getsize(path) if path and os.path.isfile(path) else 0
        self.budget = FileBudget(path, size)  # decoded textures: the model file's memory budget
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
                pixels = decode_image(image.data, self.budget, f"images[{image_index}]")
            except BudgetError as exc:  # a texture bomb: said with its size, drawn without it
                warnings.warn(f"image {image_index} is not drawn: {exc}; using the base colour", stacklevel=2)
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
