"""The glTF reader's materials, textures and images: what skeletal draws with (base colour factor and
texture with its KHR_texture_transform, KHR_materials_unlit, KHR_materials_emissive_strength) and the
image bytes (a bufferView of the file, a data URI or a file inside the model's folder; an image that
cannot be read is left empty after one warning, since animation does not need it).

Example::

    >>> _sniff_mime(b"\\x89PNG\\r\\n\\x1a\\n....")
    'image/png'
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from skeletal.document import Image, Material, TextureTransform
from skeletal.io.buffers import BinaryData
from skeletal.io.gltf_checks import _ReaderState
from skeletal.io.jsonobj import JsonObject
from skeletal.io.uris import UriError, read_uri

KHR_TEXTURE_TRANSFORM = "KHR_texture_transform"
KHR_MATERIALS_UNLIT = "KHR_materials_unlit"
KHR_MATERIALS_EMISSIVE_STRENGTH = "KHR_materials_emissive_strength"
#: Extensions that only change how a surface looks, which skeletal does not draw: a file that requires
#: one is still read (its animation is whole) and drawn with the stated fallback, after one warning.
APPEARANCE_FALLBACKS = {
    "KHR_materials_pbrSpecularGlossiness": "its metallic-roughness base colour",
    "KHR_materials_clearcoat": "no clearcoat layer",
    "KHR_materials_sheen": "no sheen",
    "KHR_materials_transmission": "opaque",
    "KHR_materials_diffuse_transmission": "opaque",
    "KHR_materials_volume": "no volume",
    "KHR_materials_ior": "the default index of refraction",
    "KHR_materials_specular": "the default specular",
    "KHR_materials_iridescence": "no iridescence",
    "KHR_materials_anisotropy": "isotropic",
    "KHR_materials_dispersion": "no dispersion",
    "KHR_materials_variants": "the default material of each primitive",
    "KHR_texture_basisu": "the base colour factor where no PNG/JPEG image is given",
    "EXT_texture_webp": "the base colour factor where the image cannot be decoded",
    "EXT_texture_avif": "the base colour factor where the image cannot be decoded",
    "KHR_lights_punctual": "skeletal's own key light (the lights' animation is read)",
    "EXT_lights_image_based": "skeletal's own ambient light",
    "KHR_xmp_json_ld": "metadata not read",
}


class _AppearanceReader(_ReaderState):
    """The material and image readers of :class:`skeletal.io.gltf._GltfReader` (a mixin of it: one
    instance per read)."""

    binary: BinaryData  # the file's buffers and bufferViews
    uri_root: str  # the folder image files may be read from

    # -- materials and images -------------------------------------------------------------------
    def _materials(self) -> list[Material]:
        textures = self.root.objects("textures")
        samplers = len(self.root.array("samplers", []))
        for texture in textures:
            texture.index("sampler", "samplers", samplers, None)
        materials = []
        for i, obj in enumerate(self.root.objects("materials")):
            pbr = obj.object("pbrMetallicRoughness")
            material = Material(
                name=obj.string("name", f"material_{i}"),
                base_color_factor=pbr.numbers("baseColorFactor", np.ones(4), length=4),
                metallic_factor=float(pbr.number("metallicFactor", 1.0)),
                roughness_factor=float(pbr.number("roughnessFactor", 1.0)),
                double_sided=obj.boolean("doubleSided", False),
            )
            if pbr.has("baseColorTexture"):
                info = pbr.object("baseColorTexture")
                texture = textures[info.index("index", "textures", len(textures))]
                material.base_color_texture = self._texture_image(texture)
                material.base_color_texcoord = info.int("texCoord", 0)
                material.base_color_transform = _texture_transform(info)
                if material.base_color_transform is not None and material.base_color_transform.texcoord is not None:
                    material.base_color_texcoord = material.base_color_transform.texcoord  # the override wins
            self._material_extensions(obj, material)
            materials.append(material)
        return materials

    def _material_extensions(self, obj: JsonObject, material: Material) -> None:
        """Emissive, alpha, KHR_materials_unlit and KHR_materials_emissive_strength of one material;
        the appearance extensions it uses that skeletal does not draw go to ``material.fallbacks``."""
        material.emissive_factor = obj.numbers("emissiveFactor", np.zeros(3), length=3)
        material.alpha_mode = obj.string("alphaMode", "OPAQUE")
        if material.alpha_mode not in ("OPAQUE", "MASK", "BLEND"):
            obj.fail(f"unknown alphaMode {material.alpha_mode!r} (expected OPAQUE, MASK or BLEND)", "alphaMode")
        material.alpha_cutoff = obj.number("alphaCutoff", 0.5)
        extensions = obj.object("extensions")
        material.unlit = extensions.has(KHR_MATERIALS_UNLIT)
        if extensions.has(KHR_MATERIALS_EMISSIVE_STRENGTH):
            strength = extensions.object(KHR_MATERIALS_EMISSIVE_STRENGTH).number("emissiveStrength", 1.0)
            if strength < 0:
                extensions.fail(f"emissiveStrength {strength} is negative", f"{KHR_MATERIALS_EMISSIVE_STRENGTH}.emissiveStrength")
            material.emissive_strength = strength
        material.fallbacks = [name for name in extensions.data if name in APPEARANCE_FALLBACKS]

    def _texture_image(self, texture: JsonObject) -> int | None:
        """The image a texture shows: its ``source``, else the ``source`` of an image-format extension
        (KHR_texture_basisu, EXT_texture_webp, ...); None when it has neither."""
        if texture.has("source"):
            return texture.index("source", "images", self.tables.images)
        extensions = texture.object("extensions")
        for name in extensions.data:
            ext = extensions.object(name)
            if ext.has("source"):
                return ext.index("source", "images", self.tables.images)
        return None

    def _images(self) -> list[Image]:
        images = []
        for i, obj in enumerate(self.root.objects("images")):
            mime = obj.string("mimeType", None)
            data: bytes | memoryview | None = None
            if obj.has("bufferView"):  # a view of the file's bytes: Image copies it when first read
                data = self.binary.view(obj.index("bufferView", "bufferViews", len(self.binary.views))).data
            elif obj.has("uri"):
                uri = obj.string("uri")
                try:
                    data, uri_mime = read_uri(uri, self.uri_root)
                    mime = mime or uri_mime
                except UriError as exc:
                    # Images are optional for animation: keep going without this one.
                    warnings.warn(f"{os.path.basename(self.file)}: {obj.where}.uri: {exc}; image data left empty",
                                  stacklevel=3)
            images.append(Image(name=obj.string("name", f"image_{i}"), data=data, mime_type=mime or _sniff_mime(data)))
        return images


def _texture_transform(info: JsonObject) -> TextureTransform | None:
    """The KHR_texture_transform of a texture reference (``baseColorTexture``...), None without one."""
    ext = info.extension(KHR_TEXTURE_TRANSFORM)
    if ext is None:
        return None
    texcoord = ext.int("texCoord", None)
    return TextureTransform(offset=ext.numbers("offset", np.zeros(2), length=2),
                            rotation=float(ext.number("rotation", 0.0)),
                            scale=ext.numbers("scale", np.ones(2), length=2), texcoord=texcoord)


_MAGIC_MIME = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
               (b"\xabKTX 20\xbb", "image/ktx2"))


def _sniff_mime(data: bytes | memoryview | None) -> str | None:
    """The image type told by the data's first bytes, when the file did not say it."""
    if not data:
        return None
    data = bytes(data[:16])
    for magic, mime in _MAGIC_MIME:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
