"""The Assimp C library through cffi: struct layouts, a sandboxed file system, one import call.

Why our own declarations: the ``impasse`` bindings (5.4.x) declare ``aiBone`` as
``mName, mArmature, mNode, mNumWeights, mWeights, mOffsetMatrix``, but Assimp 5.x (Debian's
``libassimp5`` 5.2.5 included) lays it out as ``mName, mNumWeights, mArmature, mNode, mWeights,
mOffsetMatrix``: through impasse every bone's weight count and offset matrix are read from the wrong
bytes. And Assimp 5.3 added an ``mInterpolation`` field to the key structs, which changes their size.
So this module declares only the struct *prefixes* skeletal reads (it never allocates an Assimp
struct, so trailing fields need not be declared), picks the key layout by the library's version, and
sanity-checks what it reads (:mod:`skeletal.io.assimp` checks counts, indices and matrices).

The sandbox: every file Assimp opens (the model itself, a Collada/OBJ side file, an MD5 animation,
an external texture) goes through :class:`_FileSystem`'s callbacks, which serve bytes from memory and
refuse any path outside the model's folder. The model's own bytes are the ones skeletal pre-validated
(:mod:`skeletal.io.fbx_check`), so the library never sees a different file.

Only ``cffi`` (ABI mode, no compiler) and the shared library are needed; they are imported on first
use, so a glTF user without them notices nothing. Library search: ``$SKELETAL_ASSIMP_LIBRARY``, then
``ctypes.util.find_library("assimp")``, then the usual sonames.
"""

from __future__ import annotations

import ctypes.util
import os
import threading
from dataclasses import dataclass

from skeletal.errors import ModelError
from skeletal.io.files import open_regular

INSTALL_HINT = ("install the Assimp library and its Python binding: apt-get install libassimp5 "
                "(or brew install assimp) and pip install 'skeletal[assimp]'")

_COMMON = """
struct aiString { uint32_t length; char data[1024]; };
struct aiMatrix4x4 { float m[16]; };
struct aiVector3D { float x, y, z; };
struct aiColor4D { float r, g, b, a; };
struct aiQuaternion { float w, x, y, z; };
struct aiVertexWeight { unsigned int mVertexId; float mWeight; };
struct aiFace { unsigned int mNumIndices; unsigned int *mIndices; };
struct aiMetadataEntry { int mType; void *mData; };
struct aiMetadata { unsigned int mNumProperties; struct aiString *mKeys; struct aiMetadataEntry *mValues; };
struct aiNode {
    struct aiString mName; struct aiMatrix4x4 mTransformation; struct aiNode *mParent;
    unsigned int mNumChildren; struct aiNode **mChildren;
    unsigned int mNumMeshes; unsigned int *mMeshes; struct aiMetadata *mMetaData;
};
struct aiBone {
    struct aiString mName; unsigned int mNumWeights; void *mArmature; void *mNode;
    struct aiVertexWeight *mWeights; struct aiMatrix4x4 mOffsetMatrix;
};
struct aiAnimMesh {
    struct aiString mName; struct aiVector3D *mVertices; struct aiVector3D *mNormals;
    struct aiVector3D *mTangents; struct aiVector3D *mBitangents; struct aiColor4D *mColors[8];
    struct aiVector3D *mTextureCoords[8]; unsigned int mNumVertices; float mWeight;
};
struct aiMesh {
    unsigned int mPrimitiveTypes; unsigned int mNumVertices; unsigned int mNumFaces;
    struct aiVector3D *mVertices; struct aiVector3D *mNormals; struct aiVector3D *mTangents;
    struct aiVector3D *mBitangents; struct aiColor4D *mColors[8]; struct aiVector3D *mTextureCoords[8];
    unsigned int mNumUVComponents[8]; struct aiFace *mFaces; unsigned int mNumBones;
    struct aiBone **mBones; unsigned int mMaterialIndex; struct aiString mName;
    unsigned int mNumAnimMeshes; struct aiAnimMesh **mAnimMeshes; unsigned int mMethod;
};
struct aiMeshMorphKey { double mTime; unsigned int *mValues; double *mWeights; unsigned int mNumValuesAndWeights; };
struct aiMeshMorphAnim { struct aiString mName; unsigned int mNumKeys; struct aiMeshMorphKey *mKeys; };
struct aiNodeAnim {
    struct aiString mNodeName; unsigned int mNumPositionKeys; struct aiVectorKey *mPositionKeys;
    unsigned int mNumRotationKeys; struct aiQuatKey *mRotationKeys;
    unsigned int mNumScalingKeys; struct aiVectorKey *mScalingKeys;
};
struct aiAnimation {
    struct aiString mName; double mDuration; double mTicksPerSecond;
    unsigned int mNumChannels; struct aiNodeAnim **mChannels;
    unsigned int mNumMeshChannels; void **mMeshChannels;
    unsigned int mNumMorphMeshChannels; struct aiMeshMorphAnim **mMorphMeshChannels;
};
struct aiTexture {
    unsigned int mWidth; unsigned int mHeight; char achFormatHint[9]; void *pcData; struct aiString mFilename;
};
struct aiScene {
    unsigned int mFlags; struct aiNode *mRootNode;
    unsigned int mNumMeshes; struct aiMesh **mMeshes;
    unsigned int mNumMaterials; void **mMaterials;
    unsigned int mNumAnimations; struct aiAnimation **mAnimations;
    unsigned int mNumTextures; struct aiTexture **mTextures;
    unsigned int mNumLights; void **mLights;
    unsigned int mNumCameras; void **mCameras;
    struct aiMetadata *mMetaData;
};
struct aiFile;
struct aiFileIO;
typedef size_t (*aiFileWriteProc)(struct aiFile*, const char*, size_t, size_t);
typedef size_t (*aiFileReadProc)(struct aiFile*, char*, size_t, size_t);
typedef size_t (*aiFileTellProc)(struct aiFile*);
typedef void (*aiFileFlushProc)(struct aiFile*);
typedef int (*aiFileSeek)(struct aiFile*, size_t, int);
typedef struct aiFile* (*aiFileOpenProc)(struct aiFileIO*, const char*, const char*);
typedef void (*aiFileCloseProc)(struct aiFileIO*, struct aiFile*);
struct aiFileIO { aiFileOpenProc OpenProc; aiFileCloseProc CloseProc; char *UserData; };
struct aiFile {
    aiFileReadProc ReadProc; aiFileWriteProc WriteProc; aiFileTellProc TellProc; aiFileTellProc FileSizeProc;
    aiFileSeek SeekProc; aiFileFlushProc FlushProc; char *UserData;
};
struct aiPropertyStore { char sentinel; };
unsigned int aiGetVersionMajor(void);
unsigned int aiGetVersionMinor(void);
unsigned int aiGetVersionRevision(void);
const struct aiScene *aiImportFileExWithProperties(const char *pFile, unsigned int pFlags,
    struct aiFileIO *pFS, const struct aiPropertyStore *pProps);
void aiReleaseImport(const struct aiScene *pScene);
const char *aiGetErrorString(void);
struct aiPropertyStore *aiCreatePropertyStore(void);
void aiReleasePropertyStore(struct aiPropertyStore *p);
void aiSetImportPropertyInteger(struct aiPropertyStore *store, const char *szName, int value);
int aiGetMaterialColor(const void *pMat, const char *pKey, unsigned int type, unsigned int index, struct aiColor4D *pOut);
int aiGetMaterialString(const void *pMat, const char *pKey, unsigned int type, unsigned int index, struct aiString *pOut);
int aiGetMaterialFloatArray(const void *pMat, const char *pKey, unsigned int type, unsigned int index, float *pOut, unsigned int *pMax);
"""
# Assimp 5.3 added ``aiAnimInterpolation mInterpolation`` to the key structs.
_KEYS_52 = """
struct aiVectorKey { double mTime; struct aiVector3D mValue; };
struct aiQuatKey { double mTime; struct aiQuaternion mValue; };
"""
_KEYS_53 = """
struct aiVectorKey { double mTime; struct aiVector3D mValue; int mInterpolation; };
struct aiQuatKey { double mTime; struct aiQuaternion mValue; int mInterpolation; };
"""

# Post-processing flags (postprocess.h).
JOIN_IDENTICAL_VERTICES = 0x2
TRIANGULATE = 0x8
VALIDATE_DATA_STRUCTURE = 0x400
SORT_BY_PTYPE = 0x8000
IMPORT_FLAGS = TRIANGULATE | JOIN_IDENTICAL_VERTICES | SORT_BY_PTYPE  # no ValidateDataStructure: see below

# Import properties (config.h): keep FBX pivots as helper nodes (posed exactly; skeletal collapses
# them), no embedded FBX textures (Assimp 5.2.5 frees them twice on release: a crash), strict FBX
# parsing off (real files), drop the SortByPType point/line meshes, and Collada node names as authored.
PROPERTIES = {
    "IMPORT_FBX_PRESERVE_PIVOTS": 1,
    "IMPORT_FBX_READ_TEXTURES": 0,
    "IMPORT_FBX_EMBEDDED_TEXTURES_LEGACY_NAMING": 0,
    "IMPORT_FBX_STRICT_MODE": 0,
    "PP_SBP_REMOVE": 0x1 | 0x2,  # aiPrimitiveType_POINT | aiPrimitiveType_LINE
    "IMPORT_COLLADA_USE_COLLADA_NAMES": 1,  # node names from name="", not the XML ids
}


@dataclass
class Library:
    ffi: object
    lib: object
    version: tuple[int, int, int]
    path: str


_library: Library | None = None
_lock = threading.Lock()  # Assimp's error string and our file-system callbacks are per call: serialise


def library(file: str | None = None) -> Library:
    """The loaded Assimp library (loaded once); :class:`ModelError` naming ``file`` if unavailable."""
    global _library
    if _library is not None:
        return _library
    try:
        import cffi
    except ImportError:
        raise ModelError(file, None, f"reading this format needs Assimp: {INSTALL_HINT}") from None
    names = [os.environ.get("SKELETAL_ASSIMP_LIBRARY"), ctypes.util.find_library("assimp"),
             "libassimp.so.5", "libassimp.so", "libassimp.5.dylib", "libassimp.dylib"]
    probe = cffi.FFI()
    probe.cdef("unsigned int aiGetVersionMajor(void); unsigned int aiGetVersionMinor(void);"
               "unsigned int aiGetVersionRevision(void);")
    for name in [n for n in names if n]:
        try:
            handle = probe.dlopen(name)
            version = (int(handle.aiGetVersionMajor()), int(handle.aiGetVersionMinor()), int(handle.aiGetVersionRevision()))
        except (OSError, AttributeError):
            continue
        if version[0] != 5:
            raise ModelError(file, None, f"the Assimp library {name} is version {version[0]}.{version[1]}; "
                                         f"skeletal reads through Assimp 5.x ({INSTALL_HINT})")
        ffi = cffi.FFI()
        ffi.cdef(_COMMON.replace("struct aiFile;", (_KEYS_53 if version[1] >= 3 else _KEYS_52) + "struct aiFile;"))
        _library = Library(ffi, ffi.dlopen(name), version, name)
        return _library
    raise ModelError(file, None, f"reading this format needs the Assimp library, which was not found: {INSTALL_HINT}")


class _FileSystem:
    """Assimp's file access, served from memory and limited to one folder.

    ``first`` is the model (its pre-validated bytes); any other path Assimp asks for is read only if
    it resolves (symlinks followed) inside ``root``; anything else opens as "not found".
    """

    MAX_SIDE_FILE = 256 << 20

    def __init__(self, ffi, root: str, first_path: str, first_bytes: bytes):
        self.ffi = ffi
        self.root = os.path.realpath(root)
        self.first = os.path.realpath(first_path)
        self.first_bytes = first_bytes
        self.files: dict[int, list] = {}  # handle id -> [cdata aiFile, bytes, position, name]
        self.refused: list[str] = []
        self.opened: list[str] = []
        self._keep = []  # callbacks and structs that must outlive the call
        cb = ffi.callback
        self._read = cb("aiFileReadProc", self._on_read)
        self._write = cb("aiFileWriteProc", lambda f, buf, size, count: 0)
        self._tell = cb("aiFileTellProc", self._on_tell)
        self._size = cb("aiFileTellProc", self._on_size)
        self._seek = cb("aiFileSeek", self._on_seek)
        self._flush = cb("aiFileFlushProc", lambda f: None)
        self._open = cb("aiFileOpenProc", self._on_open)
        self._close = cb("aiFileCloseProc", self._on_close)
        self.io = ffi.new("struct aiFileIO *")
        self.io.OpenProc = self._open
        self.io.CloseProc = self._close

    def _entry(self, f):
        return self.files.get(int(self.ffi.cast("uintptr_t", f.UserData)))

    def _on_open(self, io, name, mode):
        try:
            path = self.ffi.string(name).decode("utf-8", "replace")
            if b"w" in self.ffi.string(mode):
                self.refused.append(path + " (write)")
                return self.ffi.NULL
            real = os.path.realpath(path if os.path.isabs(path) else os.path.join(self.root, path))
            if real == self.first:
                data = self.first_bytes
            else:
                if os.path.commonpath([real, self.root]) != self.root:
                    self.refused.append(path)
                    return self.ffi.NULL
                try:  # regular files only: a FIFO or a device named by the model never blocks or floods
                    with open_regular(real) as fh:
                        if os.fstat(fh.fileno()).st_size > self.MAX_SIDE_FILE:
                            return self.ffi.NULL
                        data = fh.read(self.MAX_SIDE_FILE)
                except OSError:
                    self.refused.append(path + " (not a readable regular file)")
                    return self.ffi.NULL
            self.opened.append(real)
            handle = self.ffi.new("struct aiFile *")
            key = len(self._keep) + 1
            handle.ReadProc, handle.WriteProc = self._read, self._write
            handle.TellProc, handle.FileSizeProc = self._tell, self._size
            handle.SeekProc, handle.FlushProc = self._seek, self._flush
            handle.UserData = self.ffi.cast("char *", key)
            self._keep.append(handle)
            self.files[key] = [handle, data, 0]
            return handle
        except Exception:  # an exception must never unwind through C
            return self.ffi.NULL

    def _on_close(self, io, f):
        try:
            self.files.pop(int(self.ffi.cast("uintptr_t", f.UserData)), None)
        except Exception:
            pass

    def _on_read(self, f, buf, size, count):
        try:
            entry = self._entry(f)
            if entry is None or size == 0:
                return 0
            data, pos = entry[1], entry[2]
            n = min(count, (len(data) - pos) // size)
            if n <= 0:
                return 0
            self.ffi.memmove(buf, memoryview(data)[pos:pos + n * size], n * size)  # no intermediate copy
            entry[2] = pos + n * size
            return n
        except Exception:
            return 0

    def _on_tell(self, f):
        entry = self._entry(f)
        return 0 if entry is None else entry[2]

    def _on_size(self, f):
        entry = self._entry(f)
        return 0 if entry is None else len(entry[1])

    def _on_seek(self, f, offset, origin):
        entry = self._entry(f)
        if entry is None:
            return -1
        base = {0: 0, 1: entry[2], 2: len(entry[1])}.get(int(origin))
        if base is None:
            return -1
        target = base + int(offset)
        if origin == 1 and offset >= 1 << 63:  # size_t wrap-around: a negative relative seek
            target = base + int(offset) - (1 << 64)
        if not 0 <= target <= len(entry[1]):
            return -1
        entry[2] = target
        return 0


class ImportedScene:
    """An ``aiScene`` owned by Python: release it with :meth:`release` (or use ``with``)."""

    def __init__(self, lib: Library, scene, fs: _FileSystem):
        self.library, self.scene, self.fs = lib, scene, fs

    def release(self) -> None:
        if self.scene is not None:
            self.library.lib.aiReleaseImport(self.scene)
            self.scene = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def import_scene(path: str, data: bytes, file: str) -> ImportedScene:
    """Import the model ``path`` (whose bytes are ``data``) through the sandboxed file system.

    Raises :class:`ModelError` with Assimp's own message when it refuses the file.
    """
    lib = library(file)
    ffi, c = lib.ffi, lib.lib
    fs = _FileSystem(ffi, os.path.dirname(os.path.abspath(path)), os.path.abspath(path), data)
    with _lock:
        store = c.aiCreatePropertyStore()
        try:
            for key, value in PROPERTIES.items():
                c.aiSetImportPropertyInteger(store, key.encode(), value)
            scene = c.aiImportFileExWithProperties(os.path.abspath(path).encode("utf-8"), IMPORT_FLAGS, fs.io, store)
            message = ffi.string(c.aiGetErrorString()).decode("utf-8", "replace") if scene == ffi.NULL else ""
        finally:
            c.aiReleasePropertyStore(store)
    if scene == ffi.NULL:
        # Assimp's messages may quote the file's text: one line, printable, bounded
        text = "".join(ch if ch.isprintable() else "?" for ch in " ".join(message.split()))
        text = text if len(text) <= 240 else text[:237] + "..."
        raise ModelError(file, None, f"Assimp cannot read it: {text or 'unknown error'}")
    return ImportedScene(lib, scene, fs)
