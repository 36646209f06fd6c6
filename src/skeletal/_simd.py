"""The vector unit of the CPU that numba compiles for, which is not always the CPU it runs on.

numba targets the host by default, but ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` (numba's own
environment variables) retarget it: ``NUMBA_CPU_NAME=znver3 NUMBA_CPU_FEATURES=`` (empty: the
features that CPU model implies) builds AVX2 code on an AVX-512 host. ``NUMBA_CPU_NAME`` alone does
not: numba then keeps the host's explicit feature list, AVX-512 included. Every kernel choice that
depends on the vector width (the skinning kernel's lanes, the world rows' 512-bit products) asks this
module, so that it follows the compile target, and numba's cache, keyed by CPU name and features,
keeps the two builds apart.

The width is measured, not looked up: a 16 x float32 product is compiled by numba's own target
machine and its assembly read for zmm / ymm registers (a few milliseconds, once per process).

>>> from skeletal._simd import vector_bits, target_cpu
>>> vector_bits() in (0, 128, 256, 512)
True
>>> isinstance(target_cpu(), str)
True
"""

from __future__ import annotations

import functools

#: a 512-bit product in LLVM IR: its assembly names zmm registers where the target has AVX-512,
#: ymm where it has 256-bit vectors (AVX, AVX2), xmm (128-bit) elsewhere
_PROBE = """
define void @skeletal_vector_probe(<16 x float>* %p) {
  %a = load <16 x float>, <16 x float>* %p, align 4
  %b = fmul <16 x float> %a, %a
  store <16 x float> %b, <16 x float>* %p, align 4
  ret void
}
"""


def _codegen():
    from numba.core.registry import cpu_target

    return cpu_target.target_context.codegen()


def target_cpu() -> str:
    """LLVM's name of the CPU numba compiles for (``NUMBA_CPU_NAME`` if set, else the host's)."""
    from numba.core import config

    if config.CPU_NAME:
        return str(config.CPU_NAME)
    import llvmlite.binding as llvm

    return str(llvm.get_host_cpu_name())


def target_is_host() -> bool:
    """False when ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` retargets numba away from this CPU."""
    from numba.core import config

    return config.CPU_NAME is None and config.CPU_FEATURES is None


#: 256-bit integer arithmetic: ymm registers only with AVX2 (AVX splits it into two xmm halves)
_PROBE_AVX2 = """
define void @skeletal_avx2_probe(<8 x i32>* %p) {
  %a = load <8 x i32>, <8 x i32>* %p, align 4
  %b = mul <8 x i32> %a, %a
  store <8 x i32> %b, <8 x i32>* %p, align 4
  ret void
}
"""


def _assembly(source: str) -> str | None:
    """``source`` (LLVM IR) compiled by numba's target machine, as assembly; None if that fails."""
    try:
        import llvmlite.binding as llvm

        tm = _codegen()._tm
        module = llvm.parse_assembly(source)
        module.triple = tm.triple
        return str(tm.emit_assembly(module))
    except Exception:  # a private numba attribute moved: the callers fall back on the feature string
        return None


@functools.lru_cache(maxsize=1)
def vector_bits() -> int:
    """Widest float vector register of numba's compile target: 512, 256, 128, or 0 if unknown."""
    asm = _assembly(_PROBE)
    if asm is None:
        return _bits_from_features()
    for reg, bits in (("zmm", 512), ("ymm", 256), ("xmm", 128), ("v0.4s", 128), ("z0.s", 128)):
        if reg in asm:
            return bits
    return 0


def _bits_from_features() -> int:
    from numba.core import config

    features = config.CPU_FEATURES
    if features is None:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features().flatten()
    flags = set(features.split(","))
    if "+avx512f" in flags:
        return 512
    if "+avx" in flags or "+avx2" in flags:
        return 256
    return 128 if "+sse2" in flags or "+neon" in flags else 0


@functools.lru_cache(maxsize=1)
def isa_name() -> str:
    """The widest SIMD instruction set of the compile target, in words: ``AVX-512``, ``AVX2``, ``AVX``,
    ``SSE``, ``NEON`` or ``scalar``."""
    bits = vector_bits()
    if bits == 512:
        return "AVX-512"
    if bits == 256:
        asm = _assembly(_PROBE_AVX2)
        return "AVX2" if asm is None or "ymm" in asm else "AVX"
    if bits == 128:
        import platform

        return "NEON" if platform.machine().lower() in ("arm64", "aarch64") else "SSE"
    return "scalar"


def float32_lanes(widest: int = 16) -> int:
    """float32 lanes of one vector register of the compile target, at most ``widest`` and at least 4."""
    return max(4, min(widest, vector_bits() // 32))
