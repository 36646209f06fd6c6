"""The renderer's error type (kept apart so that importing it never imports moderngl)."""

from __future__ import annotations

from ..errors import SkeletalError

INSTALL_HINT = (
    "install the system libraries (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) "
    "and the Python packages (pip install moderngl imageio imageio-ffmpeg tqdm pillow)"
)


class RenderError(SkeletalError):
    """Rendering cannot proceed: no OpenGL context, a bad option (camera spec, size, palette mode),
    an output format we cannot write. The message is one line meant for a user."""
