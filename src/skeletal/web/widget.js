// anywidget glue (appended to viewer.js by skeletal.web.widget_source): the model arrives once as
// bytes (trait "glb"); streamed poses arrive in trait "pose" as float32 node world matrices, with
// trait "morph" (float32 morph weights) and trait "properties" (animated material values) beside it.
function skeletalBytes(value) {
  if (!value) return new Uint8Array(0);
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return new Uint8Array(0);
}

function skeletalFloats(value) {
  const bytes = skeletalBytes(value);
  const copy = new Uint8Array(bytes.byteLength - (bytes.byteLength % 4));
  copy.set(bytes.subarray(0, copy.byteLength));
  return new Float32Array(copy.buffer);
}

export default {
  render({model, el}) {
    const options = Object.assign({}, model.get("options") || {});
    options.glb = skeletalBytes(model.get("glb"));
    const viewer = createSkeletalViewer(el, options);
    el.skeletalViewer = viewer;
    if (typeof window !== "undefined") window.skeletalViewer = viewer;
    const onPose = () => {
      const pose = skeletalFloats(model.get("pose"));
      if (!pose.length) return;
      viewer.setLive(skeletalFloats(model.get("morph")), model.get("properties") || null);  // morphs, materials
      viewer.setWorld(pose);
    };
    model.on("change:pose", onPose);
    onPose();
    return () => { model.off("change:pose", onPose); viewer.destroy(); };
  },
};
