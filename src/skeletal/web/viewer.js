// skeletal's browser viewer: one WebGL2 program that plays the GLB files skeletal's own glTF writer
// produces (plain float/int accessors, no compression extensions). Written for skeletal; no library.
//
// It parses the GLB, samples every animation channel (STEP, LINEAR with shortest-path slerp for
// rotations, CUBICSPLINE with normalised rotations, as skeletal.sampling does), composes node world
// matrices in float64 (parents first), builds one skin palette per skin and skins on the GPU (the
// palette is a float texture, 4 texels a joint). Bones are drawn as lines on top; a model without
// meshes (a BVH) shows its bones only. Names from the file are only ever inserted as text.
//
// createSkeletalViewer(root, options) builds the UI inside the element `root` and returns the viewer
// object (its API is listed at the `api` object below). options: {glb: ArrayBuffer|Uint8Array,
// camera: {eye, target, fov, near, far}, ground: {y, cell, half}, clip: index, width, height,
// note: text shown under the controls, follow: {node: glTF node index, on: bool, reference: [x, z]}
// (the camera moves with that node's horizontal position from where it was framed: a walk that
// travels stays in view; a "follow" checkbox turns it on and off)}.
"use strict";

function createSkeletalViewer(root, options) {
  const NLERP_ABOVE_COS = 0.9995;
  const opts = options || {};
  const state = {
    doc: null, nodes: [], parents: [], order: [], clips: [], clip: 0, time: 0, speed: 1, playing: true,
    world: null, live: null, showSkeleton: true, showMesh: true, showGrid: true,
    background: null, error: null, lastFrame: null,
  };

  // ---- UI (every string from the file goes in through textContent) ---------------------------
  const doc = root.ownerDocument;
  function el(tag, attrs, parent) {
    const e = doc.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "style") e.style.cssText = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(e);
    return e;
  }
  const width = Math.max(16, Math.min(4096, opts.width | 0 || 640));
  const height = Math.max(16, Math.min(4096, opts.height | 0 || 480));
  const box = el("div", {class: "skeletal-viewer", style: "font: 13px sans-serif; color: #222; background: #f4f5f7; color-scheme: light; padding: 4px; display: inline-block"}, root);
  const canvas = el("canvas", {style: `width:${width}px;height:${height}px;display:block;background:#4a5361;touch-action:none;cursor:grab`}, box);
  const bar = el("div", {style: "display:flex;gap:6px;align-items:center;margin-top:4px;flex-wrap:wrap"}, box);
  const clipSelect = el("select", {title: "clip"}, bar);
  const playButton = el("button", {text: "pause", style: "width:4.5em"}, bar);
  const slider = el("input", {type: "range", min: "0", max: "1000", value: "0", step: "1", style: "flex:1;min-width:120px", title: "time"}, bar);
  const timeLabel = el("span", {text: "0.00 s", style: "font-variant-numeric:tabular-nums;min-width:7em"}, bar);
  const speedSelect = el("select", {title: "speed"}, bar);
  for (const s of [0.1, 0.25, 0.5, 1, 1.5, 2, 4]) el("option", {value: String(s), text: s + "x"}, speedSelect);
  speedSelect.value = "1";
  const skelLabel = el("label", {}, bar);
  const skelBox = el("input", {type: "checkbox"}, skelLabel);
  skelBox.checked = true;
  skelLabel.appendChild(doc.createTextNode(" bones"));
  // follow.reference: the root's [x, z] where the camera was framed (time 0 of the first clip)
  const follow = opts.follow && opts.follow.node >= 0 ? {node: opts.follow.node | 0, on: !!opts.follow.on,
    reference: Array.isArray(opts.follow.reference) ? opts.follow.reference.slice(0, 2) : null, last: null} : null;
  if (follow) follow.last = follow.reference;
  const followLabel = el("label", {title: "the camera follows the character", style: follow ? "" : "display:none"}, bar);
  const followBox = el("input", {type: "checkbox"}, followLabel);
  followBox.checked = !!(follow && follow.on);
  followLabel.appendChild(doc.createTextNode(" follow"));
  const resetButton = el("button", {text: "reset view"}, bar);
  const status = el("div", {style: "margin-top:2px;color:#555;white-space:pre-wrap"}, box);
  if (opts.note) status.textContent = String(opts.note);

  function fail(message) {
    state.error = String(message);
    status.textContent = "skeletal viewer: " + state.error;
    status.style.color = "#a00";
    api.failed = true;
  }

  // ---- GLB -> JSON + binary chunk ----------------------------------------------------------
  function parseGlb(bytes) {
    if (bytes.byteLength < 20) throw new Error("the model is not a GLB file (too short)");
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (dv.getUint32(0, true) !== 0x46546c67) throw new Error("the model is not a GLB file (bad magic)");
    if (dv.getUint32(4, true) !== 2) throw new Error("GLB version " + dv.getUint32(4, true) + " is not 2");
    const total = Math.min(dv.getUint32(8, true), bytes.byteLength);
    let offset = 12, json = null, bin = null;
    while (offset + 8 <= total) {
      const length = dv.getUint32(offset, true), type = dv.getUint32(offset + 4, true);
      const start = offset + 8;
      if (start + length > total) throw new Error("GLB chunk runs past the end of the file");
      const chunk = new Uint8Array(bytes.buffer, bytes.byteOffset + start, length);
      if (type === 0x4e4f534a && json === null) json = JSON.parse(new TextDecoder().decode(chunk));
      else if (type === 0x004e4942 && bin === null) bin = chunk;
      offset = start + ((length + 3) & ~3);
    }
    if (!json || typeof json !== "object") throw new Error("GLB has no JSON chunk");
    return {json, bin};
  }

  const COMPONENTS = {SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT4: 16};
  const ARRAYS = {5120: Int8Array, 5121: Uint8Array, 5122: Int16Array, 5123: Uint16Array, 5125: Uint32Array, 5126: Float32Array};
  const NORM = {5120: 127, 5121: 255, 5122: 32767, 5123: 65535};

  function accessor(gltf, bin, index, asFloat) {
    const acc = (gltf.accessors || [])[index];
    if (!acc) throw new Error("accessor " + index + " does not exist");
    if (acc.sparse) throw new Error("accessor " + index + " is sparse (not written by skeletal; re-export it)");
    const n = COMPONENTS[acc.type], Type = ARRAYS[acc.componentType];
    if (!n || !Type) throw new Error("accessor " + index + " has an unknown type");
    const count = Number(acc.count);
    if (!Number.isInteger(count) || count < 0 || count > 1e8) throw new Error("accessor " + index + " has a bad count");
    let view = null, stride = 0, base = 0;
    const elem = Type.BYTES_PER_ELEMENT;
    if (acc.bufferView !== undefined) {
      // the data must lie inside its view and the binary chunk before anything is allocated
      view = (gltf.bufferViews || [])[acc.bufferView];
      if (!view || !bin || (view.buffer | 0) !== 0) throw new Error("accessor " + index + ": bad bufferView");
      stride = view.byteStride || n * elem;
      base = (view.byteOffset || 0) + (acc.byteOffset || 0);
      const need = count > 0 ? base + stride * (count - 1) + n * elem : base;
      if (need > (view.byteOffset || 0) + view.byteLength || need > bin.byteLength) throw new Error("accessor " + index + " runs past its buffer");
    } else if (count * n > (1 << 24)) {
      throw new Error("accessor " + index + " has no data and a huge count");
    }
    const packed = view !== null && stride === n * elem && (bin.byteOffset + base) % elem === 0;
    let out;
    if (packed) {
      // tightly packed and aligned (what skeletal writes): one copy, no per-element reads
      out = new Type(bin.buffer, bin.byteOffset + base, count * n).slice();
    } else {
      out = new Type(count * n);
      if (view) {
        const dv = new DataView(bin.buffer, bin.byteOffset, bin.byteLength);
        const getters = {5120: "getInt8", 5121: "getUint8", 5122: "getInt16", 5123: "getUint16", 5125: "getUint32", 5126: "getFloat32"};
        const get = getters[acc.componentType];
        for (let i = 0; i < count; i++) for (let c = 0; c < n; c++) out[i * n + c] = dv[get](base + i * stride + c * elem, true);
      }
    }
    if (asFloat && !(out instanceof Float32Array)) {
      const f = new Float32Array(out.length), scale = acc.normalized ? NORM[acc.componentType] : 1;
      for (let i = 0; i < out.length; i++) f[i] = acc.normalized ? Math.max(out[i] / scale, -1) : out[i];
      out = f;
    }
    return {data: out, n, count, normalized: !!acc.normalized, componentType: acc.componentType};
  }

  // ---- maths (row-major 4x4 in Float64Array(16), like skeletal's numpy matrices) ------------
  function compose(t, r, s, out) {
    const [x, y, z, w] = r;
    const xx = x * x, yy = y * y, zz = z * z, xy = x * y, xz = x * z, yz = y * z, wx = w * x, wy = w * y, wz = w * z;
    out[0] = (1 - 2 * (yy + zz)) * s[0]; out[1] = 2 * (xy - wz) * s[1]; out[2] = 2 * (xz + wy) * s[2]; out[3] = t[0];
    out[4] = 2 * (xy + wz) * s[0]; out[5] = (1 - 2 * (xx + zz)) * s[1]; out[6] = 2 * (yz - wx) * s[2]; out[7] = t[1];
    out[8] = 2 * (xz - wy) * s[0]; out[9] = 2 * (yz + wx) * s[1]; out[10] = (1 - 2 * (xx + yy)) * s[2]; out[11] = t[2];
    out[12] = 0; out[13] = 0; out[14] = 0; out[15] = 1;
    return out;
  }
  function mul(a, b, out) {
    for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
      out[i * 4 + j] = a[i * 4] * b[j] + a[i * 4 + 1] * b[4 + j] + a[i * 4 + 2] * b[8 + j] + a[i * 4 + 3] * b[12 + j];
    }
    return out;
  }
  function normalize4(q) {
    const l = Math.hypot(q[0], q[1], q[2], q[3]) || 1;
    q[0] /= l; q[1] /= l; q[2] /= l; q[3] /= l;
    return q;
  }
  function slerp(a, b, u, out) {
    let [bx, by, bz, bw] = b;
    if (a[0] === bx && a[1] === by && a[2] === bz && a[3] === bw) { out.set(a); return out; }
    let cos = a[0] * bx + a[1] * by + a[2] * bz + a[3] * bw;
    if (cos < 0) { bx = -bx; by = -by; bz = -bz; bw = -bw; cos = -cos; }
    let s0 = 1 - u, s1 = u;
    if (cos < NLERP_ABOVE_COS) {
      const angle = Math.acos(cos), sin = Math.sin(angle);
      s0 = Math.sin(s0 * angle) / sin; s1 = Math.sin(s1 * angle) / sin;
    }
    out[0] = a[0] * s0 + bx * s1; out[1] = a[1] * s0 + by * s1; out[2] = a[2] * s0 + bz * s1; out[3] = a[3] * s0 + bw * s1;
    if (cos >= NLERP_ABOVE_COS) normalize4(out);
    return out;
  }

  // ---- the model -----------------------------------------------------------------------------
  function loadModel(bytes) {
    const {json, bin} = parseGlb(bytes);
    const gltf = json;
    const nodes = (gltf.nodes || []).map((n, i) => {
      const node = {name: typeof n.name === "string" ? n.name : "node " + i, children: Array.isArray(n.children) ? n.children : [],
                    mesh: n.mesh, skin: n.skin, matrix: null, weights: Array.isArray(n.weights) ? n.weights.map(Number) : null,
                    visible: !(n.extensions && n.extensions.KHR_node_visibility && n.extensions.KHR_node_visibility.visible === false),
                    t: Float64Array.from(n.translation || [0, 0, 0]), r: Float64Array.from(n.rotation || [0, 0, 0, 1]),
                    s: Float64Array.from(n.scale || [1, 1, 1])};
      if (Array.isArray(n.matrix) && n.matrix.length === 16) {  // column-major in the file
        node.matrix = new Float64Array(16);
        for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) node.matrix[i * 4 + j] = n.matrix[j * 4 + i];
      }
      return node;
    });
    const count = nodes.length;
    const parents = new Int32Array(count).fill(-1);
    for (let i = 0; i < count; i++) for (const c of nodes[i].children) {
      if (!(c >= 0 && c < count) || parents[c] !== -1 || c === i) throw new Error(`node ${i} has a bad child ${c}`);
      parents[c] = i;
    }
    // parents before children; a cycle leaves nodes unplaced: reject it instead of looping forever
    const order = [], placed = new Uint8Array(count);
    const stack = [];
    for (let i = count - 1; i >= 0; i--) if (parents[i] < 0) stack.push(i);
    while (stack.length) {
      const i = stack.pop();
      if (placed[i]) continue;
      placed[i] = 1; order.push(i);
      for (let k = nodes[i].children.length - 1; k >= 0; k--) stack.push(nodes[i].children[k]);
    }
    if (order.length !== count) throw new Error("the node hierarchy has a cycle");

    const clips = (gltf.animations || []).map((anim, a) => {
      const channels = [];
      let duration = 0;
      const properties = [];
      for (const ch of anim.channels || []) {
        let target = ch.target || {};
        if (target.path === "pointer") {  // KHR_animation_pointer: node TRS as channels, drawn properties aside
          const pointer = String(((target.extensions || {}).KHR_animation_pointer || {}).pointer || "");
          const m = pointer.match(/^\/nodes\/(\d+)\/(translation|rotation|scale)$/);
          if (m) target = {node: Number(m[1]), path: m[2]};
          else {
            const width = DRAWN_POINTERS.width(pointer);
            if (!width) continue;  // a property the page does not draw (lights, cameras...)
            const sampler = (anim.samplers || [])[ch.sampler];
            if (!sampler) throw new Error(`animation ${a}: channel has no sampler`);
            const times = accessor(gltf, bin, sampler.input, true).data, values = accessor(gltf, bin, sampler.output, true).data;
            const interp = pointer.endsWith("/visible") ? "STEP" : sampler.interpolation || "LINEAR";
            const per = interp === "CUBICSPLINE" ? 3 * width : width;
            if (times.length === 0 || values.length < times.length * per) throw new Error(`animation ${a}: a sampler has too few values`);
            duration = Math.max(duration, times[times.length - 1]);
            properties.push({pointer, interp, times, values, width, rotation: false, cursor: 0});
            continue;
          }
        }
        if (!(target.node >= 0 && target.node < count)) continue;
        if (!["translation", "rotation", "scale", "weights"].includes(target.path)) continue;
        const sampler = (anim.samplers || [])[ch.sampler];
        if (!sampler) throw new Error(`animation ${a}: channel has no sampler`);
        const times = accessor(gltf, bin, sampler.input, true).data;
        const values = accessor(gltf, bin, sampler.output, true).data;
        const interp = sampler.interpolation || "LINEAR";
        const width = target.path === "rotation" ? 4 : target.path === "weights" ? morphCount(gltf, nodes[target.node]) : 3;
        if (!width) throw new Error(`animation ${a}: a weights channel targets node ${target.node}, which has no morph targets`);
        const per = interp === "CUBICSPLINE" ? 3 * width : width;
        if (times.length === 0 || values.length < times.length * per) throw new Error(`animation ${a}: a sampler has too few values`);
        for (let k = 1; k < times.length; k++) if (!(times[k] > times[k - 1])) throw new Error(`animation ${a}: key times do not increase`);
        duration = Math.max(duration, times[times.length - 1]);
        channels.push({node: target.node, path: target.path, interp, times, values, width, rotation: target.path === "rotation", cursor: 0});
      }
      return {name: typeof anim.name === "string" && anim.name ? anim.name : "animation " + a, channels, properties, duration};
    });

    const skins = (gltf.skins || []).map((s, k) => {
      const joints = (s.joints || []).map(j => { if (!(j >= 0 && j < count)) throw new Error(`skin ${k} has a bad joint ${j}`); return j; });
      const inverse = [];
      if (s.inverseBindMatrices !== undefined) {
        const m = accessor(gltf, bin, s.inverseBindMatrices, true).data;
        if (m.length < joints.length * 16) throw new Error(`skin ${k}: too few inverse bind matrices`);
        for (let j = 0; j < joints.length; j++) {
          const r = new Float64Array(16);
          for (let a = 0; a < 4; a++) for (let b = 0; b < 4; b++) r[a * 4 + b] = m[j * 16 + b * 4 + a];
          inverse.push(r);
        }
      } else {
        for (let j = 0; j < joints.length; j++) inverse.push(Float64Array.from([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]));
      }
      return {joints, inverse};
    });
    // morph weights: the nodes with morph targets (glTF order), where each one's weights start in
    // the flat array (as a streamed pose sends them), and their defaults (node's, else mesh's, else 0)
    const morphNodes = [], morphStart = [0], restMorph = [];
    nodes.forEach((node, i) => {
      const n = morphCount(gltf, node);
      if (!n) return;
      const mesh = gltf.meshes[node.mesh], own = node.weights || (Array.isArray(mesh.weights) ? mesh.weights.map(Number) : null);
      for (let k = 0; k < n; k++) restMorph.push(own && own.length === n ? own[k] : 0);
      morphNodes.push(i); morphStart.push(restMorph.length);
    });
    return {gltf, bin, nodes, parents, order, clips, skins, shown: sceneNodes(gltf, nodes, parents, skins),
            morphNodes, morphStart, restMorph: Float64Array.from(restMorph)};
  }

  function morphCount(gltf, node) {
    const mesh = node.mesh !== undefined ? (gltf.meshes || [])[node.mesh] : null;
    const first = mesh && (mesh.primitives || [])[0];
    return first && Array.isArray(first.targets) ? first.targets.length : 0;
  }

  // every morphed node's weights (flat, as model.morphNodes/morphStart lay them out) at clip-local t
  function morphWeights(model, clipIndex, t) {
    if (state.live) return state.liveMorph && state.liveMorph.length === model.restMorph.length ? state.liveMorph : model.restMorph;
    const out = Float64Array.from(model.restMorph), clip = model.clips[clipIndex];
    if (!clip) return out;
    const tt = Math.min(Math.max(t, 0), clip.duration);
    for (const ch of clip.channels) {
      if (ch.path !== "weights") continue;
      const k = model.morphNodes.indexOf(ch.node);
      sampleChannel(ch, tt, out.subarray(model.morphStart[k], model.morphStart[k + 1]));
    }
    return out;
  }

  // The nodes the default scene shows (as skeletal.asset.scene_nodes): its roots and everything below
  // them, plus the whole hierarchy of every joint of the skins its meshes use; every node when the
  // file has no scenes.
  function sceneNodes(gltf, nodes, parents, skins) {
    const shown = new Uint8Array(nodes.length);
    const scenes = Array.isArray(gltf.scenes) ? gltf.scenes : [];
    if (!scenes.length) return shown.fill(1);
    const index = gltf.scene >= 0 && gltf.scene < scenes.length ? gltf.scene : 0;
    const addBelow = roots => {
      const stack = roots.filter(r => r >= 0 && r < nodes.length);
      while (stack.length) {
        const i = stack.pop();
        if (shown[i]) continue;
        shown[i] = 1;
        for (const c of nodes[i].children) stack.push(c);
      }
    };
    addBelow(Array.isArray(scenes[index].nodes) ? scenes[index].nodes.slice() : []);
    const tops = [];
    nodes.forEach((node, i) => {
      if (!shown[i] || node.mesh === undefined || !skins[node.skin]) return;
      for (let j of skins[node.skin].joints) { while (parents[j] >= 0) j = parents[j]; tops.push(j); }
    });
    addBelow(tops);
    return shown;
  }

  // ---- sampling (as skeletal.sampling: keys compared as float32 values, maths in float64) ----
  function findKey(times, t, cursor) {
    const last = times.length - 1;
    if (t < times[0]) return -1;
    if (t >= times[last]) return last;
    if (cursor >= 0 && cursor < last && times[cursor] <= t && t < times[cursor + 1]) return cursor;
    let lo = 0, hi = last;
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (times[mid] <= t) lo = mid; else hi = mid; }
    return lo;
  }
  const tmpA = new Float64Array(4), tmpB = new Float64Array(4);
  function sampleChannel(ch, t, out) {
    const c = ch.width, v = ch.values, times = ch.times, n = times.length;
    const key = findKey(times, t, ch.cursor);
    ch.cursor = Math.max(key, 0);
    const cubic = ch.interp === "CUBICSPLINE", stride = cubic ? 3 * c : c, mid = cubic ? c : 0;
    if (key < 0 || key >= n - 1 || ch.interp === "STEP") {
      const base = Math.max(key, 0) * stride + mid;
      for (let i = 0; i < c; i++) out[i] = v[base + i];
      return;
    }
    const t0 = times[key], span = times[key + 1] - t0, u = (t - t0) / span;
    const a = key * stride, b = a + stride;
    if (!cubic) {
      if (ch.rotation) {
        for (let i = 0; i < 4; i++) { tmpA[i] = v[a + i]; tmpB[i] = v[b + i]; }
        slerp(tmpA, tmpB, u, out);
      } else {
        for (let i = 0; i < c; i++) out[i] = v[a + i] * (1 - u) + v[b + i] * u;
      }
      return;
    }
    const u2 = u * u, u3 = u2 * u;
    const h00 = 2 * u3 - 3 * u2 + 1, h10 = (u3 - 2 * u2 + u) * span, h01 = -2 * u3 + 3 * u2, h11 = (u3 - u2) * span;
    for (let i = 0; i < c; i++) out[i] = h00 * v[a + c + i] + h10 * v[a + 2 * c + i] + h01 * v[b + c + i] + h11 * v[b + i];
    if (ch.rotation) normalize4(out);
  }

  // KHR_animation_pointer properties the page draws (as skeletal's renderer): material base colour,
  // emissive and its strength, alpha cutoff, the base colour texture's transform, node visibility.
  const TT = "pbrMetallicRoughness/baseColorTexture/extensions/KHR_texture_transform/";
  const DRAWN_POINTERS = {
    tails: {"pbrMetallicRoughness/baseColorFactor": 4, "emissiveFactor": 3, "alphaCutoff": 1,
            "extensions/KHR_materials_emissive_strength/emissiveStrength": 1, [TT + "offset"]: 2, [TT + "rotation"]: 1, [TT + "scale"]: 2},
    width(pointer) {
      if (/^\/nodes\/\d+\/extensions\/KHR_node_visibility\/visible$/.test(pointer)) return 1;
      const m = pointer.match(/^\/materials\/\d+\/(.+)$/);
      return m ? this.tails[m[1]] || 0 : 0;
    },
  };
  // pointer -> Float64Array of the clip's properties at clip-local time t (clamped)
  function sampleProperties(model, clipIndex, t) {
    const out = {}, clip = model.clips[clipIndex];
    if (state.live) return state.liveProps || out;
    if (!clip) return out;
    const tt = Math.min(Math.max(t, 0), clip.duration);
    for (const ch of clip.properties) { out[ch.pointer] = new Float64Array(ch.width); sampleChannel(ch, tt, out[ch.pointer]); }
    return out;
  }
  // 1 for each node drawn under KHR_node_visibility (its own flag, animated or not, and its ancestors')
  function visibleNodes(model, props) {
    const shown = new Uint8Array(model.nodes.length);
    for (const i of model.order) {
      const animated = props[`/nodes/${i}/extensions/KHR_node_visibility/visible`];
      const own = animated ? animated[0] >= 0.5 : model.nodes[i].visible;
      const p = model.parents[i];
      shown[i] = own && (p < 0 || shown[p]) ? 1 : 0;
    }
    return shown;
  }

  // world matrices of every node at clip-local time t (clamped to the clip), or from a streamed pose
  function pose(model, clipIndex, t) {
    const count = model.nodes.length;
    const world = state.world && state.world.length === count * 16 ? state.world : new Float64Array(count * 16);
    if (state.live) {
      world.set(state.live.subarray(0, count * 16));
      state.world = world;
      return world;
    }
    const trs = model.nodes.map(n => ({t: Float64Array.from(n.t), r: Float64Array.from(n.r), s: Float64Array.from(n.s), animated: false}));
    const clip = model.clips[clipIndex];
    if (clip) {
      const tt = Math.min(Math.max(t, 0), clip.duration);
      for (const ch of clip.channels) {
        if (ch.path === "weights") continue;  // see morphWeights
        const p = trs[ch.node];
        p.animated = true;
        sampleChannel(ch, tt, ch.path === "translation" ? p.t : ch.path === "rotation" ? p.r : p.s);
      }
    }
    const local = new Float64Array(16), tmp = new Float64Array(16);
    for (const i of model.order) {
      const node = model.nodes[i];
      if (node.matrix && !trs[i].animated) local.set(node.matrix); else compose(trs[i].t, trs[i].r, trs[i].s, local);
      const p = model.parents[i];
      if (p < 0) world.set(local, i * 16);
      else { mul(world.subarray(p * 16, p * 16 + 16), local, tmp); world.set(tmp, i * 16); }
    }
    state.world = world;
    return world;
  }

  // ---- WebGL2 ------------------------------------------------------------------------------
  canvas.width = Math.round(width * (window.devicePixelRatio || 1));
  canvas.height = Math.round(height * (window.devicePixelRatio || 1));
  const gl = canvas.getContext("webgl2", {antialias: true, preserveDrawingBuffer: true});

  const MESH_VS = `#version 300 es
  precision highp float; precision highp int;
  in vec3 a_position; in vec3 a_normal; in vec2 a_uv;
  in uvec4 a_joints0; in vec4 a_weights0; in uvec4 a_joints1; in vec4 a_weights1;
  uniform mat4 u_view_proj; uniform mat4 u_model; uniform bool u_skinned; uniform highp sampler2D u_palette;
  out vec3 v_normal; out vec2 v_uv;
  mat4 joint(uint j) {
    int x = int(j) * 4;
    return mat4(texelFetch(u_palette, ivec2(x, 0), 0), texelFetch(u_palette, ivec2(x + 1, 0), 0),
                texelFetch(u_palette, ivec2(x + 2, 0), 0), texelFetch(u_palette, ivec2(x + 3, 0), 0));
  }
  void main() {
    mat4 m = u_model;
    if (u_skinned) {
      m = a_weights0.x * joint(a_joints0.x) + a_weights0.y * joint(a_joints0.y) + a_weights0.z * joint(a_joints0.z)
        + a_weights0.w * joint(a_joints0.w) + a_weights1.x * joint(a_joints1.x) + a_weights1.y * joint(a_joints1.y)
        + a_weights1.z * joint(a_joints1.z) + a_weights1.w * joint(a_joints1.w);
    }
    vec4 p = m * vec4(a_position, 1.0);
    v_normal = mat3(m) * a_normal;
    v_uv = a_uv;
    gl_Position = u_view_proj * p;
  }`;
  const MESH_FS = `#version 300 es
  precision highp float;
  in vec3 v_normal; in vec2 v_uv;
  uniform vec4 u_color; uniform bool u_textured; uniform sampler2D u_texture; uniform vec3 u_light;
  uniform mat3 u_uv;        // KHR_texture_transform (identity without one)
  uniform bool u_unlit;     // KHR_materials_unlit
  uniform vec3 u_emissive;  // emissiveFactor x KHR_materials_emissive_strength
  uniform float u_cutoff;   // alphaMode MASK cutoff, < 0 without a mask
  out vec4 o_color;
  void main() {
    vec4 base = u_color;
    if (u_textured) base *= texture(u_texture, (u_uv * vec3(v_uv, 1.0)).xy);
    if (base.a < u_cutoff) discard;
    if (u_unlit) { o_color = vec4(pow(clamp(base.rgb, 0.0, 1.0), vec3(1.0 / 2.2)), 1.0); return; }
    vec3 n = normalize(v_normal);
    if (!gl_FrontFacing) n = -n;
    float diffuse = max(dot(n, u_light), 0.0);
    vec3 ambient = mix(vec3(0.16, 0.14, 0.12), vec3(0.36, 0.40, 0.47), 0.5 + 0.5 * n.y);
    vec3 lit = base.rgb * (ambient + vec3(1.05, 1.0, 0.92) * diffuse) + u_emissive;
    o_color = vec4(pow(lit, vec3(1.0 / 2.2)), 1.0);
  }`;
  const LINE_VS = `#version 300 es
  in vec3 a_position; uniform mat4 u_view_proj; uniform float u_point;
  void main() { gl_Position = u_view_proj * vec4(a_position, 1.0); gl_PointSize = u_point; }`;
  const LINE_FS = `#version 300 es
  precision mediump float; uniform vec4 u_color; out vec4 o_color;
  void main() { o_color = u_color; }`;

  function program(vs, fs) {
    const p = gl.createProgram();
    for (const [type, src] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]]) {
      const s = gl.createShader(type);
      gl.shaderSource(s, src); gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error("shader: " + gl.getShaderInfoLog(s));
      gl.attachShader(p, s);
    }
    gl.bindAttribLocation(p, 0, "a_position");
    gl.linkProgram(p);
    if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error("program: " + gl.getProgramInfoLog(p));
    const uniforms = {};
    const n = gl.getProgramParameter(p, gl.ACTIVE_UNIFORMS);
    for (let i = 0; i < n; i++) { const info = gl.getActiveUniform(p, i); uniforms[info.name] = gl.getUniformLocation(p, info.name); }
    return {p, u: uniforms, a: name => gl.getAttribLocation(p, name)};
  }

  // The appearance extensions skeletal writes: KHR_texture_transform on the base colour texture (a
  // row-major 3x3 T * R * S, as the extension defines it), KHR_materials_unlit, emissive colour times
  // KHR_materials_emissive_strength, and alphaMode MASK's cutoff.
  function uvMatrix(offset, rotation, scale) {
    const c = Math.cos(rotation), s = Math.sin(rotation);
    return [c * scale[0], s * scale[1], offset[0], -s * scale[0], c * scale[1], offset[1], 0, 0, 1];
  }
  function materialLook(material) {
    const pbr = material.pbrMetallicRoughness || {}, ext = material.extensions || {};
    const tt = ((pbr.baseColorTexture || {}).extensions || {}).KHR_texture_transform || null;
    const num = (v, d) => (typeof v === "number" && isFinite(v) ? v : d);
    const pair = (v, d) => (Array.isArray(v) && v.length === 2 ? [num(v[0], d[0]), num(v[1], d[1])] : d);
    const uv = tt ? {offset: pair(tt.offset, [0, 0]), rotation: num(tt.rotation, 0), scale: pair(tt.scale, [1, 1])}
                  : {offset: [0, 0], rotation: 0, scale: [1, 1]};
    const e = Array.isArray(material.emissiveFactor) && material.emissiveFactor.length === 3 ? material.emissiveFactor.map(Number) : [0, 0, 0];
    const strength = ext.KHR_materials_emissive_strength ? num(ext.KHR_materials_emissive_strength.emissiveStrength, 1) : 1;
    return {uv, unlit: !!ext.KHR_materials_unlit, emissive: e.map(v => v * strength), emissiveFactor: e, emissiveStrength: strength,
            cutoff: material.alphaMode === "MASK" ? num(material.alphaCutoff, 0.5) : -1};
  }
  // positions (and normals) of a morphed primitive: base + sum_k w_k * delta_k, uploaded when the
  // node's weights changed since the last frame (as skeletal.skin.apply_morphs, in float32)
  function applyMorph(model, prim, weights) {
    const k = model.morphNodes.indexOf(prim.node);
    if (k < 0) return;
    const w = weights.subarray(model.morphStart[k], model.morphStart[k + 1]), m = prim.morph;
    if (m.applied && m.applied.length === w.length && m.applied.every((v, i) => v === w[i])) return;
    m.applied = Float64Array.from(w);
    const blend = (base, deltas, buffer, out) => {
      out.set(base);
      deltas.forEach((d, t) => { const wt = w[t]; if (d && wt !== 0) for (let i = 0; i < out.length; i++) out[i] += wt * d[i]; });
      if (buffer) { gl.bindBuffer(gl.ARRAY_BUFFER, buffer); gl.bufferSubData(gl.ARRAY_BUFFER, 0, out); }
    };
    blend(m.base, m.positions, m.posBuffer, m.current);
    if (m.baseNormal && m.normals.some(d => d)) {
      m.currentNormal = m.currentNormal || new Float32Array(m.baseNormal.length);
      blend(m.baseNormal, m.normals, m.nrmBuffer, m.currentNormal);
    }
  }

  // a primitive's material values under the animated properties (its own where none animates them)
  function animatedLook(prim, props) {
    const base = `/materials/${prim.material}/`, get = (tail, own) => props[base + tail] || own;
    const offset = get(TT + "offset", prim.uv.offset), rotation = get(TT + "rotation", [prim.uv.rotation])[0];
    const scale = get(TT + "scale", prim.uv.scale);
    const strength = get("extensions/KHR_materials_emissive_strength/emissiveStrength", [prim.emissiveStrength])[0];
    const factor = get("emissiveFactor", prim.emissiveFactor);
    return {color: Array.from(get("pbrMetallicRoughness/baseColorFactor", prim.color)), uv: uvMatrix(offset, rotation, scale),
            emissive: Array.from(factor, v => v * strength), cutoff: prim.cutoff < 0 ? -1 : get("alphaCutoff", [prim.cutoff])[0]};
  }
  const uvColumns = m => new Float32Array([m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8]]);

  let meshProgram, lineProgram, prims = [], paletteTextures = [], lineBuffer, gridBuffer, gridCount = 0, boneNodes = [], bonePairs = [];
  function uploadModel(model) {
    meshProgram = program(MESH_VS, MESH_FS);
    lineProgram = program(LINE_VS, LINE_FS);
    const gltf = model.gltf, bin = model.bin;
    const textures = {};
    function texture(index) {
      if (textures[index] !== undefined) return textures[index];
      textures[index] = null;
      const tex = (gltf.textures || [])[index], image = tex && (gltf.images || [])[tex.source];
      if (!image || image.bufferView === undefined || !bin || typeof createImageBitmap !== "function") return null;
      const view = (gltf.bufferViews || [])[image.bufferView];
      if (!view || (view.byteOffset || 0) + view.byteLength > bin.byteLength) return null;
      const bytes = bin.slice(view.byteOffset || 0, (view.byteOffset || 0) + view.byteLength);
      const handle = gl.createTexture();
      gl.bindTexture(gl.TEXTURE_2D, handle);
      gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA, 1, 1, 0, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array([255, 255, 255, 255]));
      const entry = {handle, pending: true};
      textures[index] = entry;
      createImageBitmap(new Blob([bytes], {type: String(image.mimeType || "image/png")}), {imageOrientation: "none"})
        .then(bitmap => {
          gl.bindTexture(gl.TEXTURE_2D, handle);
          gl.texImage2D(gl.TEXTURE_2D, 0, gl.SRGB8_ALPHA8, gl.RGBA, gl.UNSIGNED_BYTE, bitmap);
          gl.generateMipmap(gl.TEXTURE_2D);
          gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR_MIPMAP_LINEAR);
          entry.pending = false;
          draw();
        })
        .catch(() => { entry.pending = false; });
      return entry;
    }
    model.nodes.forEach((node, nodeIndex) => {
      if (node.mesh === undefined || !model.shown[nodeIndex]) return;  // only the scene's meshes are drawn
      const mesh = (gltf.meshes || [])[node.mesh];
      if (!mesh) throw new Error(`node ${nodeIndex} refers to a missing mesh`);
      for (const primitive of mesh.primitives || []) {
        const mode = primitive.mode === undefined ? 4 : primitive.mode;
        const at = primitive.attributes || {};
        if (mode !== 4 || at.POSITION === undefined) continue;
        const vao = gl.createVertexArray();
        gl.bindVertexArray(vao);
        const pos = accessor(gltf, bin, at.POSITION, true);
        const attrib = (name, data, n, integer, usage) => {
          const loc = meshProgram.a(name);
          if (loc < 0) return null;
          const buf = gl.createBuffer();
          gl.bindBuffer(gl.ARRAY_BUFFER, buf);
          gl.bufferData(gl.ARRAY_BUFFER, data, usage || gl.STATIC_DRAW);
          gl.enableVertexAttribArray(loc);
          if (integer) gl.vertexAttribIPointer(loc, n, gl.UNSIGNED_INT, 0, 0);
          else gl.vertexAttribPointer(loc, n, gl.FLOAT, false, 0, 0);
          return buf;
        };
        // morph targets: blended on the CPU into the position/normal buffers when the weights change
        const targets = Array.isArray(primitive.targets) ? primitive.targets : [];
        const nrm = at.NORMAL !== undefined ? accessor(gltf, bin, at.NORMAL, true).data : null;
        const dynamic = targets.length ? gl.DYNAMIC_DRAW : gl.STATIC_DRAW;
        const posBuffer = attrib("a_position", pos.data, 3, false, dynamic);
        let nrmBuffer = null;
        if (nrm) nrmBuffer = attrib("a_normal", nrm, 3, false, dynamic);
        else gl.vertexAttrib3f(meshProgram.a("a_normal"), 0, 1, 0);
        let morph = null;
        if (targets.length) {
          const deltas = (key, base) => targets.map(t => {
            if (t[key] === undefined || !base) return null;
            const d = accessor(gltf, bin, t[key], true).data;
            if (d.length !== base.length) throw new Error(`mesh ${node.mesh}: a morph target has the wrong vertex count`);
            return d;
          });
          morph = {base: pos.data, baseNormal: nrm, positions: deltas("POSITION", pos.data), normals: deltas("NORMAL", nrm),
                   posBuffer, nrmBuffer, applied: null, current: Float32Array.from(pos.data)};
        }
        if (at.TEXCOORD_0 !== undefined) attrib("a_uv", accessor(gltf, bin, at.TEXCOORD_0, true).data, 2, false);
        const skinned = node.skin !== undefined && at.JOINTS_0 !== undefined && at.WEIGHTS_0 !== undefined && model.skins[node.skin];
        for (const set of [0, 1]) {
          const jl = meshProgram.a("a_joints" + set), wl = meshProgram.a("a_weights" + set);
          if (skinned && at["JOINTS_" + set] !== undefined && at["WEIGHTS_" + set] !== undefined) {
            const joints = Uint32Array.from(accessor(gltf, bin, at["JOINTS_" + set], false).data);
            const limit = model.skins[node.skin].joints.length;
            for (let i = 0; i < joints.length; i++) if (joints[i] >= limit) throw new Error(`mesh ${node.mesh}: a joint index is out of its skin`);
            attrib("a_joints" + set, joints, 4, true);
            attrib("a_weights" + set, accessor(gltf, bin, at["WEIGHTS_" + set], true).data, 4, false);
          } else {
            if (jl >= 0) gl.vertexAttribI4ui(jl, 0, 0, 0, 0);
            if (wl >= 0) gl.vertexAttrib4f(wl, 0, 0, 0, 0);
          }
        }
        let indices = null, count = pos.count;
        if (primitive.indices !== undefined) {
          const idx = accessor(gltf, bin, primitive.indices, false);
          const data = Uint32Array.from(idx.data);
          for (let i = 0; i < data.length; i++) if (data[i] >= pos.count) throw new Error(`mesh ${node.mesh}: an index is out of range`);
          indices = gl.createBuffer();
          gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, indices);
          gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, data, gl.STATIC_DRAW);
          count = data.length;
        }
        const material = (gltf.materials || [])[primitive.material] || {};
        const pbr = material.pbrMetallicRoughness || {};
        // glTF's default factor is white; a primitive without a material is drawn light grey
        const fallback = primitive.material === undefined ? [0.8, 0.8, 0.8, 1] : [1, 1, 1, 1];
        const factor = Array.isArray(pbr.baseColorFactor) && pbr.baseColorFactor.length === 4 ? pbr.baseColorFactor.map(Number) : fallback;
        const tex = pbr.baseColorTexture && at.TEXCOORD_0 !== undefined ? texture(pbr.baseColorTexture.index) : null;
        const look = materialLook(material);
        prims.push({vao, count, indexed: !!indices, node: nodeIndex, skin: skinned ? node.skin : -1, color: factor, texture: tex,
                    material: primitive.material === undefined ? -1 : primitive.material, morph, ...look});
        gl.bindVertexArray(null);
      }
    });
    paletteTextures = model.skins.map(s => {
      const t = gl.createTexture();
      gl.bindTexture(gl.TEXTURE_2D, t);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
      gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA32F, Math.max(4 * s.joints.length, 1), 1, 0, gl.RGBA, gl.FLOAT, null);
      return t;
    });
    // bones: skin joints (every node when there are no skins), each joined to its nearest bone ancestor
    const isBone = new Uint8Array(model.nodes.length);
    if (model.skins.length) for (const s of model.skins) for (const j of s.joints) isBone[j] = 1;
    else isBone.fill(1);
    for (let i = 0; i < model.nodes.length; i++) if (!model.shown[i]) isBone[i] = 0;  // outside the scene
    boneNodes = [];
    bonePairs = [];
    for (let i = 0; i < model.nodes.length; i++) {
      if (!isBone[i]) continue;
      boneNodes.push(i);
      let p = model.parents[i];
      while (p >= 0 && !isBone[p]) p = model.parents[p];
      if (p >= 0) bonePairs.push(p, i);
    }
    lineBuffer = gl.createBuffer();
    const g = opts.ground || null;
    if (g && g.cell > 0 && g.half > 0) {
      const lines = [], n = Math.min(Math.ceil(g.half / g.cell), 200), cx = g.center ? g.center[0] : 0, cz = g.center ? g.center[2] : 0;
      const x0 = Math.round(cx / g.cell) * g.cell, z0 = Math.round(cz / g.cell) * g.cell, h = n * g.cell;
      for (let k = -n; k <= n; k++) {
        lines.push(x0 + k * g.cell, g.y, z0 - h, x0 + k * g.cell, g.y, z0 + h);
        lines.push(x0 - h, g.y, z0 + k * g.cell, x0 + h, g.y, z0 + k * g.cell);
      }
      gridBuffer = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, gridBuffer);
      gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(lines), gl.STATIC_DRAW);
      gridCount = lines.length / 3;
    }
  }

  // ---- camera: an orbit around a target, started from skeletal's framing ---------------------
  const cam = {target: [0, 1, 0], yaw: 0, pitch: 0.2, distance: 3, fov: 35, near: 0.05, far: 100, homeDistance: 3, home: null};
  function setCameraFrom(c) {
    const eye = c.eye, target = c.target;
    const dx = eye[0] - target[0], dy = eye[1] - target[1], dz = eye[2] - target[2];
    cam.target = target.slice();
    cam.distance = Math.hypot(dx, dy, dz) || 1;
    cam.yaw = Math.atan2(dx, dz);
    cam.pitch = Math.asin(Math.max(-1, Math.min(1, dy / cam.distance)));
    cam.fov = c.fov || 35; cam.near = c.near || cam.distance * 0.02; cam.far = c.far || cam.distance * 50;
    cam.homeDistance = cam.distance;
  }
  function eyePosition() {
    const cp = Math.cos(cam.pitch);
    return [cam.target[0] + cam.distance * Math.sin(cam.yaw) * cp, cam.target[1] + cam.distance * Math.sin(cam.pitch),
            cam.target[2] + cam.distance * Math.cos(cam.yaw) * cp];
  }
  function viewProjection() {
    const e = eyePosition(), t = cam.target;
    let f = [t[0] - e[0], t[1] - e[1], t[2] - e[2]];
    let l = Math.hypot(...f); f = f.map(v => v / l);
    let s = [f[1] * 0 - f[2] * 1, f[2] * 0 - f[0] * 0, f[0] * 1 - f[1] * 0];
    l = Math.hypot(...s);
    if (l < 1e-9) { s = [f[1], -f[0], 0]; l = Math.hypot(...s); }
    s = s.map(v => v / l);
    const u = [s[1] * f[2] - s[2] * f[1], s[2] * f[0] - s[0] * f[2], s[0] * f[1] - s[1] * f[0]];
    const view = [s[0], s[1], s[2], -(s[0] * e[0] + s[1] * e[1] + s[2] * e[2]),
                  u[0], u[1], u[2], -(u[0] * e[0] + u[1] * e[1] + u[2] * e[2]),
                  -f[0], -f[1], -f[2], f[0] * e[0] + f[1] * e[1] + f[2] * e[2], 0, 0, 0, 1];
    // near and far planes scale with the zoom, so that zooming far out or in never clips the model
    const zoom = cam.distance / cam.homeDistance;
    const aspect = canvas.width / canvas.height, k = 1 / Math.tan(cam.fov * Math.PI / 360), n = cam.near * zoom, fa = cam.far * zoom;
    const proj = [k / aspect, 0, 0, 0, 0, k, 0, 0, 0, 0, (fa + n) / (n - fa), 2 * fa * n / (n - fa), 0, 0, -1, 0];
    const out = new Float64Array(16);
    mul(proj, view, out);
    return {m: out, eye: e, right: s, up: u};
  }
  const colMajor = m => { const o = new Float32Array(16); for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) o[j * 4 + i] = m[i * 4 + j]; return o; };

  // ---- drawing -------------------------------------------------------------------------------
  function draw() {
    if (!state.doc || !gl) return;
    const model = state.doc;
    const world = pose(model, state.clip, state.time);
    if (follow && follow.node < model.nodes.length) {  // move the camera by the root's horizontal motion
      const x = world[follow.node * 16 + 3], z = world[follow.node * 16 + 11];
      if (follow.on && follow.last) { cam.target[0] += x - follow.last[0]; cam.target[2] += z - follow.last[1]; }
      follow.last = [x, z];
    }
    const vp = viewProjection();
    const vpc = colMajor(vp.m);
    const bg = state.background || [0.42, 0.47, 0.55];
    gl.viewport(0, 0, canvas.width, canvas.height);
    gl.clearColor(bg[0], bg[1], bg[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    if (state.showGrid && gridBuffer) drawLines(gridBuffer, gridCount, vpc, [0.62, 0.66, 0.72, 1], gl.LINES, 1);
    // palettes: joint world x inverse bind, column-major texels
    const tmp = new Float64Array(16);
    model.skins.forEach((s, k) => {
      const data = new Float32Array(Math.max(16 * s.joints.length, 16));
      s.joints.forEach((j, i) => {
        mul(world.subarray(j * 16, j * 16 + 16), s.inverse[i], tmp);
        for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) data[i * 16 + c * 4 + r] = tmp[r * 4 + c];
      });
      gl.bindTexture(gl.TEXTURE_2D, paletteTextures[k]);
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, Math.max(4 * s.joints.length, 1), 1, gl.RGBA, gl.FLOAT, data.subarray(0, Math.max(16 * s.joints.length, 4)));
    });
    if (state.showMesh && prims.length) {
      const P = meshProgram;
      gl.useProgram(P.p);
      gl.uniformMatrix4fv(P.u.u_view_proj, false, vpc);
      const back = [vp.eye[0] - cam.target[0], vp.eye[1] - cam.target[1], vp.eye[2] - cam.target[2]];
      const bl = Math.hypot(...back) || 1;
      let light = back.map((v, i) => 0.55 * v / bl - 0.45 * vp.right[i] + (i === 1 ? 0.9 : 0));
      const ll = Math.hypot(...light); light = light.map(v => v / ll);
      gl.uniform3fv(P.u.u_light, light);
      gl.uniform1i(P.u.u_palette, 0);
      gl.uniform1i(P.u.u_texture, 1);
      const props = sampleProperties(model, state.clip, state.time), shownNow = visibleNodes(model, props);
      state.lastProps = props;
      const weights = morphWeights(model, state.clip, state.time);
      state.lastMorph = weights;
      for (const prim of prims) if (prim.morph) applyMorph(model, prim, weights);
      for (const prim of prims) {
        if (!shownNow[prim.node]) continue;  // KHR_node_visibility
        const look = animatedLook(prim, props);
        gl.uniform1i(P.u.u_skinned, prim.skin >= 0 ? 1 : 0);
        gl.uniformMatrix4fv(P.u.u_model, false, colMajor(world.subarray(prim.node * 16, prim.node * 16 + 16)));
        gl.activeTexture(gl.TEXTURE0);
        gl.bindTexture(gl.TEXTURE_2D, prim.skin >= 0 ? paletteTextures[prim.skin] : null);
        gl.activeTexture(gl.TEXTURE1);
        gl.bindTexture(gl.TEXTURE_2D, prim.texture ? prim.texture.handle : null);
        gl.uniform1i(P.u.u_textured, prim.texture ? 1 : 0);
        gl.uniform4fv(P.u.u_color, look.color);
        gl.uniformMatrix3fv(P.u.u_uv, false, uvColumns(look.uv));
        gl.uniform1i(P.u.u_unlit, prim.unlit ? 1 : 0);
        gl.uniform3fv(P.u.u_emissive, look.emissive);
        gl.uniform1f(P.u.u_cutoff, look.cutoff);
        gl.bindVertexArray(prim.vao);
        if (prim.indexed) gl.drawElements(gl.TRIANGLES, prim.count, gl.UNSIGNED_INT, 0);
        else gl.drawArrays(gl.TRIANGLES, 0, prim.count);
      }
      gl.bindVertexArray(null);
      gl.activeTexture(gl.TEXTURE0);
    }
    if (state.showSkeleton || !prims.length) {
      const pts = new Float32Array(bonePairs.length * 3 + boneNodes.length * 3);
      bonePairs.forEach((n, i) => { pts[i * 3] = world[n * 16 + 3]; pts[i * 3 + 1] = world[n * 16 + 7]; pts[i * 3 + 2] = world[n * 16 + 11]; });
      const off = bonePairs.length * 3;
      boneNodes.forEach((n, i) => { pts[off + i * 3] = world[n * 16 + 3]; pts[off + i * 3 + 1] = world[n * 16 + 7]; pts[off + i * 3 + 2] = world[n * 16 + 11]; });
      gl.bindBuffer(gl.ARRAY_BUFFER, lineBuffer);
      gl.bufferData(gl.ARRAY_BUFFER, pts, gl.DYNAMIC_DRAW);
      gl.disable(gl.DEPTH_TEST);
      drawLines(lineBuffer, bonePairs.length, vpc, [1.0, 0.78, 0.2, 1], gl.LINES, 1, 0);
      drawLines(lineBuffer, boneNodes.length, vpc, [1.0, 0.45, 0.1, 1], gl.POINTS, 5, bonePairs.length);
      gl.enable(gl.DEPTH_TEST);
    }
    const clip = model.clips[state.clip];
    const duration = clip ? clip.duration : 0;
    if (!sliderHeld) slider.value = String(duration > 0 ? Math.round(1000 * state.time / duration) : 0);
    timeLabel.textContent = state.live ? "live" : `${state.time.toFixed(2)} / ${duration.toFixed(2)} s`;
  }
  function drawLines(buffer, count, vpc, color, mode, pointSize, first) {
    if (!count) return;
    const P = lineProgram;
    gl.useProgram(P.p);
    gl.bindVertexArray(null);
    gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
    gl.enableVertexAttribArray(0);
    gl.vertexAttribPointer(0, 3, gl.FLOAT, false, 0, 0);
    gl.uniformMatrix4fv(P.u.u_view_proj, false, vpc);
    gl.uniform4fv(P.u.u_color, color);
    gl.uniform1f(P.u.u_point, pointSize);
    gl.drawArrays(mode, first || 0, count);
    gl.disableVertexAttribArray(0);
  }

  // ---- playback loop and input ---------------------------------------------------------------
  let sliderHeld = false;
  function tick(now) {
    if (api.destroyed) return;
    const model = state.doc;
    if (model && state.playing && !state.live) {
      const clip = model.clips[state.clip];
      if (state.lastFrame !== null && clip && clip.duration > 0) {
        const dt = Math.min((now - state.lastFrame) / 1000, 0.25) * state.speed;
        state.time = (state.time + dt) % clip.duration;
      }
      state.lastFrame = now;
      draw();
    } else {
      state.lastFrame = null;
    }
    requestAnimationFrame(tick);
  }
  function setPlaying(on) {
    state.playing = !!on;
    if (on) state.live = null;
    playButton.textContent = state.playing ? "pause" : "play";
    draw();
  }
  playButton.addEventListener("click", () => setPlaying(!state.playing));
  clipSelect.addEventListener("change", () => api.setClip(Number(clipSelect.value)));
  speedSelect.addEventListener("change", () => { state.speed = Number(speedSelect.value) || 1; });
  skelBox.addEventListener("change", () => { state.showSkeleton = skelBox.checked; draw(); });
  followBox.addEventListener("change", () => { if (follow) { follow.on = followBox.checked; follow.last = null; } draw(); });
  resetButton.addEventListener("click", () => { if (cam.home) setCameraFrom(cam.home); if (follow) follow.last = follow.reference; draw(); });
  slider.addEventListener("input", () => {
    const clip = state.doc && state.doc.clips[state.clip];
    sliderHeld = true;
    state.live = null;
    if (clip) state.time = clip.duration * Number(slider.value) / 1000;
    if (state.playing) setPlaying(false); else draw();
  });
  slider.addEventListener("change", () => { sliderHeld = false; });
  let drag = null;
  canvas.addEventListener("pointerdown", e => { drag = {x: e.clientX, y: e.clientY, pan: e.button !== 0 || e.shiftKey}; canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointerup", () => { drag = null; });
  canvas.addEventListener("pointermove", e => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    drag.x = e.clientX; drag.y = e.clientY;
    if (drag.pan) {
      const vp = viewProjection(), k = cam.distance * 2 * Math.tan(cam.fov * Math.PI / 360) / height;
      for (let i = 0; i < 3; i++) cam.target[i] += (-dx * vp.right[i] + dy * vp.up[i]) * k;
    } else {
      cam.yaw -= dx * 0.01;
      cam.pitch = Math.max(-1.5, Math.min(1.5, cam.pitch + dy * 0.01));
    }
    draw();
  });
  canvas.addEventListener("wheel", e => { e.preventDefault(); cam.distance *= Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.001))); draw(); }, {passive: false});

  // ---- the API (also what the tests call) ----------------------------------------------------
  const api = {
    ready: false, failed: false, destroyed: false,
    get error() { return state.error; },
    /** clip names, in file order */
    clips() { return state.doc ? state.doc.clips.map(c => c.name) : []; },
    /** 1 for each node (glTF order) the scene shown draws, else 0 */
    shownNodes() { return state.doc ? Array.from(state.doc.shown) : []; },
    nodeNames() { return state.doc ? state.doc.nodes.map(n => n.name) : []; },
    duration() { const c = state.doc && state.doc.clips[state.clip]; return c ? c.duration : 0; },
    setClip(i) {
      const n = state.doc ? state.doc.clips.length : 0;
      if (!(i >= 0 && i < n)) throw new Error("no clip " + i);
      state.clip = i | 0; state.time = 0; state.live = null; clipSelect.value = String(state.clip); draw();
    },
    /** clip-local time in seconds (clamped to the clip); pauses playback */
    setTime(t) { state.time = Math.max(0, Number(t) || 0); state.live = null; if (state.playing) setPlaying(false); else draw(); },
    play() { setPlaying(true); },
    pause() { setPlaying(false); },
    setSpeed(s) { state.speed = Number(s) || 1; },
    /** row-major world matrices of every node (glTF node order), flat: 16 numbers a node */
    jointWorld() { draw(); return state.world ? Array.from(state.world) : []; },
    /** a streamed pose: Float32Array of every node's row-major world matrix (skeletal's node_world) */
    setWorld(matrices) {
      const n = state.doc ? state.doc.nodes.length * 16 : 0;
      if (!matrices || matrices.length < n) return;
      state.live = Float64Array.from(matrices.subarray ? matrices.subarray(0, n) : matrices.slice(0, n));
      state.playing = false; playButton.textContent = "play";
      draw();
    },
    /** morph weights of every node with morph targets now: [{node, weights}] in glTF node order */
    morphWeights() {
      draw();
      const m = state.doc, w = state.lastMorph || (m ? m.restMorph : []);
      return m ? m.morphNodes.map((node, k) => ({node, weights: Array.from(w.subarray(m.morphStart[k], m.morphStart[k + 1]))})) : [];
    },
    /** the bind-space positions of drawn primitive i (morphs applied), flat xyz */
    primitivePositions(i) { draw(); const p = prims[i]; return p ? Array.from(p.morph ? p.morph.current : []) : []; },
    /** a streamed pose's morph weights and animated properties (see the widget): weights flat in
     *  glTF node order (the nodes with morph targets), properties {pointer: values} */
    setLive(morph, properties) {
      state.liveMorph = morph ? Float64Array.from(morph) : null;
      state.liveProps = properties || null;
      draw();
    },
    /** how many textures are still being decoded (the page draws again when each one arrives) */
    pendingTextures() { return prims.filter(p => p.texture && p.texture.pending).length; },
    /** what each drawn primitive's material looks like now: glTF material index, base colour, the
     *  row-major 3x3 texture transform, unlit, emissive, alpha cutoff */
    materials() {
      draw();
      const props = state.lastProps || {}, shown = state.doc ? visibleNodes(state.doc, props) : [];
      return prims.map(p => { const look = animatedLook(p, props); return {material: p.material, node: p.node, visible: !!shown[p.node],
                              color: look.color, uv: look.uv, unlit: p.unlit, emissive: look.emissive, cutoff: look.cutoff}; });
    },
    setBackground(rgb) { state.background = rgb; draw(); },
    show(parts) { for (const k of ["skeleton", "mesh", "grid"]) if (parts && k in parts) state["show" + k[0].toUpperCase() + k.slice(1)] = !!parts[k]; skelBox.checked = state.showSkeleton; draw(); },
    setCamera(c) { setCameraFrom(c); draw(); },
    /** the camera's target [x, y, z] (it moves with the root while following) */
    cameraTarget() { return cam.target.slice(); },
    setFollow(on) { if (follow) { follow.on = !!on; follow.last = null; followBox.checked = follow.on; } draw(); },
    canvas,
    destroy() { api.destroyed = true; },
  };

  if (!gl) { fail("this browser has no WebGL2"); return api; }
  try {
    if (opts.camera) { cam.home = JSON.parse(JSON.stringify(opts.camera)); setCameraFrom(opts.camera); }
    const bytes = opts.glb instanceof Uint8Array ? opts.glb : new Uint8Array(opts.glb || []);
    const t0 = performance.now();
    const model = loadModel(bytes);
    const t1 = performance.now();
    state.doc = model;
    uploadModel(model);
    api.timings = {parse_ms: t1 - t0, upload_ms: performance.now() - t1};
    model.clips.forEach((c, i) => el("option", {value: String(i), text: `${c.name} (${c.duration.toFixed(2)} s)`}, clipSelect));
    if (!model.clips.length) { el("option", {value: "0", text: "(rest pose: no clips)"}, clipSelect); clipSelect.disabled = true; }
    const first = opts.clip | 0;
    state.clip = first >= 0 && first < model.clips.length ? first : 0;
    clipSelect.value = String(state.clip);
    draw();
    api.ready = true;
    requestAnimationFrame(tick);
  } catch (err) {
    fail(err && err.message ? err.message : err);
  }
  return api;
}
