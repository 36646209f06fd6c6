"""What a USD file may reach and cost, decided before usd-core composes it (the USD reader's guard).

* :class:`Confinement`: the one check every asset path of every layer goes through (sublayers,
  references, payloads, package paths, variants, value and template clips, textures), the walk that
  opens the layers it allows (held, so that the stage composes those and not files swapped in after
  the check), and the check of the layers the stage used once it is read. Refusals are one
  :class:`~skeletal.errors.ModelError` naming the file, the path and the model's folder.
* :func:`composed_prims`: an upper bound of the prims the stage composes, from the layers' specs
  alone (a 2 KB file can compose 2**20 prims); :func:`check_clip_templates`: the number of clips a
  template clip set names.
* :class:`Diagnostics`: usd-core's multi-line reports on file descriptor 2, captured and turned into
  one line each.

>>> guard = Confinement("hero.usda")                 # doctest: +SKIP
>>> root = guard.walk()                               # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import stat
import sys

from skeletal.errors import ModelError
from skeletal.io.files import kind_of

__all__ = ["Confinement", "Diagnostics", "composed_prims", "check_clip_templates", "first_line",
           "MAX_TEMPLATE_CLIPS"]


class Diagnostics:
    """usd-core's diagnostics (multi-line ``Warning: in _ReportErrors at line 3196 of stage.cpp --
    ...`` reports written to file descriptor 2), captured while the stage is read: at most
    :data:`_DIAGNOSTIC_BYTES` kept, the rest drained; :meth:`lines` gives them as one clean line each."""

    def __init__(self):
        self.kept = bytearray()

    def __enter__(self) -> "Diagnostics":
        import threading

        try:
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        self.read_end, write_end = os.pipe()
        self.saved = os.dup(2)
        os.dup2(write_end, 2)
        os.close(write_end)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()
        return self

    def _drain(self) -> None:
        while True:
            piece = os.read(self.read_end, 1 << 16)
            if not piece:
                break
            if len(self.kept) < _DIAGNOSTIC_BYTES:
                self.kept += piece[:_DIAGNOSTIC_BYTES - len(self.kept)]
        os.close(self.read_end)

    def __exit__(self, *exc) -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        os.dup2(self.saved, 2)  # the pipe's last write end closes: the drain ends
        os.close(self.saved)
        self.thread.join()

    def lines(self, file: str) -> list[str]:
        """One line per distinct report (``hero.usda: usd-core: Could not open asset ...``), at most
        :data:`_DIAGNOSTIC_LINES` of them and a count of the rest."""
        text = self.kept.decode("utf-8", "replace")
        reports: list[str] = []
        for block in re.split(r"\n(?=\S)", text):
            line = " ".join(block.split())
            line = re.sub(r"^(Warning|Error|Coding Error|Runtime Error|Status|Fatal Error)?:?\s*in \S+ at line \d+ of \S+\s*--\s*",
                          "", line)
            line = re.sub(r"\s*\(instantiating stage on stage @[^@]*@ <0x[0-9a-fA-F]+>\)", "", line)
            line = re.sub(r"\s*<0x[0-9a-fA-F]+>", "", line)
            if line and line not in reports:
                reports.append(line)
        name = os.path.basename(file)
        out = [f"{name}: usd-core: {_printable(r)[:300]}" for r in reports[:_DIAGNOSTIC_LINES]]
        if len(reports) > _DIAGNOSTIC_LINES:
            out.append(f"{name}: usd-core: {len(reports) - _DIAGNOSTIC_LINES} more messages")
        return out


#: Bytes of usd-core's diagnostics kept per read, and distinct reports turned into warnings.
_DIAGNOSTIC_BYTES = 64 << 10
_DIAGNOSTIC_LINES = 5


def _printable(text: str) -> str:
    """``text`` with control characters (terminal escapes) shown as ``\\x1b``."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Confinement:
    """Every asset path the stage can reach, checked before usd-core composes it: the one place that
    decides what may be read (see the module docstring). ``layers`` holds every layer the walk opened,
    so that composing the stage finds them in usd-core's layer registry instead of opening the files
    again (a file swapped after the check is not read)."""

    def __init__(self, file: str):
        from pxr import Ar

        self.file = file
        self.base = os.path.realpath(os.path.dirname(os.path.abspath(file)))
        self.context = Ar.GetResolver().CreateDefaultContextForAsset(os.path.abspath(file))
        self.layers: list = []
        self.allowed: set[str] = set()

    def refuse(self, asset: str, why: str) -> ModelError:
        return ModelError(self.file, None, f"refers to {asset!r}, {why} (only files in the model's folder "
                                           f"{self.base} are read)")

    def check(self, asset: str, layer) -> str | None:
        """The one check every asset path goes through: the identifier usd-core would open for
        ``asset`` written in ``layer``, or None when no file exists there (usd-core composes without
        it); a ModelError for a URL, an expression, a path outside the folder or not a regular file."""
        from pxr import Ar, Sdf

        if not asset:
            return None  # an internal reference (a prim of the same layer stack)
        if "://" in asset or asset.startswith("//"):
            raise self.refuse(asset, "a URL")
        if asset.lstrip().startswith("`"):
            raise self.refuse(asset, "an expression")
        identifier = Sdf.ComputeAssetPathRelativeToLayer(layer, asset)
        # "x.usda:SDF_FORMAT_ARGS:a=b" opens x.usda: the file is the part before the arguments
        file_part = Sdf.Layer.SplitIdentifier(identifier)[0]
        resolved = str(Ar.GetResolver().Resolve(file_part))
        on_disk = Ar.SplitPackageRelativePathOuter(resolved or file_part)[0]
        if not resolved and not os.path.isabs(on_disk):
            return None  # a search path that finds nothing
        real = os.path.realpath(on_disk)
        if os.path.commonpath([self.base, real]) != self.base:
            raise self.refuse(asset, "outside the model's folder")
        if not resolved:
            return None
        try:
            mode = os.stat(real).st_mode
        except OSError:
            return None
        if not stat.S_ISREG(mode):
            raise self.refuse(asset, f"which is {kind_of(mode)}")
        self.allowed.add(real)
        return identifier

    def walk(self):
        """Open the root layer and every layer it reaches (sublayers, references, payloads, value
        clips and their manifests, template clips), checking every asset path on the way (textures
        included); returns the root layer."""
        from pxr import Ar, Sdf, Tf, UsdUtils

        with Ar.ResolverContextBinder(self.context):
            try:
                root = Sdf.Layer.FindOrOpen(os.path.abspath(self.file))
            except Tf.ErrorException as exc:
                raise ModelError(self.file, None, f"not a USD file: {first_line(exc)}") from None
            if root is None:
                raise ModelError(self.file, None, "not a USD file (usd-core cannot open it)")
            self.allowed.add(os.path.realpath(Ar.SplitPackageRelativePathOuter(root.realPath or self.file)[0]))
            self.layers.append(root)
            seen = {root.identifier}
            todo = [root]
            while todo:
                layer = todo.pop()
                arcs = [str(a) for a in layer.GetCompositionAssetDependencies()]
                variables = dict(layer.expressionVariables or {})
                if variables:  # values differ per layer stack: the walk could not see what the stage reads
                    shown = next((a for a in arcs if a.lstrip().startswith("`")), None)
                    raise self.refuse(shown or f"${{{sorted(variables)[0]}}}", "an expression-variable path")
                for asset in arcs:
                    self.check(asset, layer)
                try:
                    sublayers, references, payloads = UsdUtils.ExtractExternalReferences(layer.identifier)
                except Tf.ErrorException as exc:  # what it cannot list is not composed
                    raise ModelError(self.file, None, f"cannot list the asset paths of {layer.identifier!r}: "
                                                      f"{first_line(exc)}") from None
                for asset in [*sublayers, *references, *payloads]:
                    identifier = self.check(str(asset), layer)
                    if identifier is None or identifier in seen:
                        continue
                    seen.add(identifier)
                    if Sdf.FileFormat.FindByExtension(Ar.SplitPackageRelativePathInner(identifier)[1] or identifier) is None:
                        continue  # a texture or another file usd-core does not compose: checked, not opened
                    try:
                        child = Sdf.Layer.FindOrOpen(identifier)
                    except Tf.ErrorException:
                        child = None  # usd-core reports it when it composes and goes on without it
                    if child is not None:
                        self.layers.append(child)
                        todo.append(child)
        return root

    def verify(self, stage) -> None:
        """After reading: every layer the stage used (clip layers included) is one the walk allowed."""
        from pxr import Ar

        for layer in stage.GetUsedLayers(True):
            if layer.anonymous:
                continue
            real = os.path.realpath(Ar.SplitPackageRelativePathOuter(layer.realPath or layer.identifier)[0])
            if real not in self.allowed:
                raise self.refuse(layer.identifier, "which the confinement check did not see")


#: Variant selections followed per prim path an arc names (each one a spec counted).
_MAX_VARIANT_PATHS = 64

#: Most clips a template clip set may name (``templateStartTime`` to ``templateEndTime`` by
#: ``templateStride``): usd-core makes and resolves every one of the names.
MAX_TEMPLATE_CLIPS = 100_000


def check_clip_templates(file: str, where: str, clips) -> None:
    """Refuse a template clip set naming more than :data:`MAX_TEMPLATE_CLIPS` clips."""
    for name, clip_set in dict(clips or {}).items():
        if not isinstance(clip_set, dict) or "templateAssetPath" not in clip_set:
            continue
        try:
            start = float(clip_set.get("templateStartTime", 0.0))
            end = float(clip_set.get("templateEndTime", 0.0))
            stride = float(clip_set.get("templateStride", 0.0))
        except (TypeError, ValueError):
            continue  # usd-core refuses the set itself
        if stride > 0 and end >= start and (end - start) / stride + 1 > MAX_TEMPLATE_CLIPS:
            raise ModelError(file, f"<{where}>", f"template clip set {name!r} names {(end - start) / stride + 1:.3g} "
                                                 f"clips ({start:g} to {end:g} by {stride:g}), more than "
                                                 f"{MAX_TEMPLATE_CLIPS:,} (skeletal.io.usd_guard.MAX_TEMPLATE_CLIPS)")


def composed_prims(confinement: Confinement, root, limit: int) -> int:
    """An upper bound of the prims the stage composes, from the layers' specs alone (nothing is
    composed): a prim spec counts 1 plus its children, its variants' children and the prims its
    references, payloads, inherits and specializes bring (each spec of the target's layer stack).
    Counting stops past ``limit`` (the count returned is then above it)."""
    from pxr import Sdf

    by_id = {layer.identifier: layer for layer in confinement.layers}

    def stack(layer) -> list:
        """``layer`` and its sublayers (the ones the walk opened), recursively."""
        out, todo, seen = [], [layer], set()
        while todo:
            item = todo.pop()
            if item.identifier in seen:
                continue
            seen.add(item.identifier)
            out.append(item)
            for sub in item.subLayerPaths:
                found = by_id.get(Sdf.ComputeAssetPathRelativeToLayer(item, sub)) if sub else None
                if found is not None:
                    todo.append(found)
        return out

    owner: dict[str, object] = {}  # layer -> the root of the layer stack it composes in
    for layer in confinement.layers:
        if layer.identifier not in owner:
            for member in stack(layer):
                owner.setdefault(member.identifier, layer)
    stacks: dict[str, list] = {}

    def stack_of(layer) -> list:
        head = owner.get(layer.identifier, layer)
        if head.identifier not in stacks:
            stacks[head.identifier] = stack(head)
        return stacks[head.identifier]

    def targets(layer, asset: str, path) -> list:
        if asset:
            found = by_id.get(Sdf.ComputeAssetPathRelativeToLayer(layer, asset))
            if found is None:
                return []
            layers = stack(found)
            if path.isEmpty:
                name = found.defaultPrim
                path = Sdf.Path("/" + name) if name else None
        else:
            layers = stack_of(layer)
        if path is None or path.isEmpty or not path.IsPrimPath():
            return []
        return [(m, path) for m in layers]

    def specs_at(layer, path) -> list:
        """The prim specs of ``layer`` at ``path``: the spec there, or (for a path an arc names
        that only variants define) the specs at every variant selection of its ancestors."""
        spec = layer.GetPrimAtPath(path)
        if spec is not None or path.ContainsPrimVariantSelection():
            return [spec] if spec is not None else []
        found = [Sdf.Path.absoluteRootPath]
        for prefix in path.GetPrefixes():
            reached = []
            for base in found:
                candidates = [base.AppendChild(prefix.name)]
                base_spec = None if base == Sdf.Path.absoluteRootPath else layer.GetPrimAtPath(base)
                if base_spec is not None:
                    candidates += [base.AppendVariantSelection(set_name, variant).AppendChild(prefix.name)
                                   for set_name, variant_set in base_spec.variantSets.items()
                                   for variant in variant_set.variants.keys()]
                reached += [c for c in candidates if layer.GetPrimAtPath(c) is not None]
            found = reached[:_MAX_VARIANT_PATHS]
            if not found:
                return []
        return [layer.GetPrimAtPath(p) for p in found]

    def edges(node) -> list:
        layer, path = node
        specs = []
        for spec in specs_at(layer, path):
            specs += [spec] + [v.primSpec for vs in spec.variantSets.values() for v in vs.variants.values()]
        out = []
        for s in specs:
            if s.HasInfo("clips"):
                check_clip_templates(confinement.file, str(s.path), s.GetInfo("clips"))
            out += [(layer, child.path) for child in s.nameChildren.values()]
            for ops in (s.referenceList, s.payloadList):
                for item in [*ops.explicitItems, *ops.prependedItems, *ops.appendedItems, *ops.addedItems]:
                    out += targets(layer, item.assetPath, item.primPath)
            for ops in (s.inheritPathList, s.specializesList):
                for item in [*ops.explicitItems, *ops.prependedItems, *ops.appendedItems, *ops.addedItems]:
                    out += targets(layer, "", item)
        return out

    memo: dict[tuple, int] = {}
    total = 0
    starts = [(layer, child.path) for layer in stack(root) for child in layer.rootPrims.values()]
    for start in starts:
        key = (start[0].identifier, start[1])
        if key not in memo:  # depth first, iteratively (nesting can be thousands deep)
            active = {key}
            work = [(start, key, iter(edges(start)), 1)]
            while work:
                node, key, children, count = work[-1]
                child = next(children, None)
                if child is None:
                    work.pop()
                    active.discard(key)
                    memo[key] = count
                    if work:
                        parent = work[-1]
                        work[-1] = (parent[0], parent[1], parent[2], min(parent[3] + count, limit + 1))
                    continue
                child_key = (child[0].identifier, child[1])
                if child_key in memo:
                    work[-1] = (node, key, children, min(count + memo[child_key], limit + 1))
                elif child_key not in active:  # a cycle adds nothing (usd-core refuses the arc)
                    active.add(child_key)
                    work.append((child, child_key, iter(edges(child)), 1))
        total += memo[key]
        if total > limit:
            break
    return total

def first_line(exc: BaseException) -> str:
    try:
        text = str(exc).strip().splitlines()
    except UnicodeDecodeError:  # pxr's message quotes the file's bytes, not always UTF-8 (found by fuzzing)
        return type(exc).__name__
    return text[-1].strip() if text else type(exc).__name__
