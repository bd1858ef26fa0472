// ONNX Runtime's CPU provider on one model: inputs from DIR/LABEL.in.<name>.npy, each output
// written to DIR/LABEL.ort.<name>.npy, for a script to compare kiln-run's outputs with.
// Usage: node ort_run.js MODEL.onnx DIR LABEL   (npm install --ignore-scripts onnxruntime-node)
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');
const {readNpy, writeNpy} = require('./npy.js');

async function main() {
  const [model, dir, label] = process.argv.slice(2);
  const loaded = await ort.InferenceSession.create(model, {intraOpNumThreads: 1});
  const feeds = {};
  const prefix = `${label}.in.`;
  for (const file of fs.readdirSync(dir)) {
    if (!file.startsWith(prefix) || !file.endsWith('.npy')) continue;
    const [type, dims, data] = readNpy(path.join(dir, file));
    feeds[file.slice(prefix.length, -4)] = new ort.Tensor(type, data, dims);
  }
  const results = await loaded.run(feeds);
  for (const [name, t] of Object.entries(results))
    writeNpy(path.join(dir, `${label}.ort.${name}.npy`), t.type, t.dims, t.data);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
