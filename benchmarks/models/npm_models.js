// ONNX Runtime's CPU provider on trained models that npm packages ship (the voice-activity
// detectors of @ricky0123/vad-web): each model run on inputs made by formula, its inputs and
// outputs written as .npy files for npm_models.sh to run kiln on and compare; and the median of
// timed runs.
// Usage: node npm_models.js PACKAGE_DIR OUT_DIR [THREADS]
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');
const {writeNpy} = require('./npy.js');

// [label, model file, inputs {name: [type, dims, fill(i)]}]
const chunk = (i) => 0.5 * Math.sin(0.05 * i) + 0.1 * Math.sin(0.91 * i);
const small = (i) => 0.1 * Math.cos(0.3 * i);
const models = [
  ['silero_vad_legacy', 'silero_vad_legacy.onnx', {
    input: ['float32', [1, 512], chunk], sr: ['int64', [], () => 16000],
    h: ['float32', [2, 1, 64], small], c: ['float32', [2, 1, 64], small]}],
  ['silero_vad_v5', 'silero_vad_v5.onnx', {
    input: ['float32', [1, 512], chunk], state: ['float32', [2, 1, 128], small],
    sr: ['int64', [], () => 16000]}],
  ['silero_vad_v6', 'silero_vad_v6.onnx', {
    input: ['float32', [1, 512], chunk], state: ['float32', [2, 1, 128], small],
    sr: ['int64', [], () => 16000]}],
];

async function main() {
  const [pkg, out, threadArg] = process.argv.slice(2);
  const threads = Number(threadArg || 1);
  fs.mkdirSync(out, {recursive: true});
  for (const [label, file, spec] of models) {
    const model = path.join(pkg, file);
    if (!fs.existsSync(model)) continue;
    const loaded = await ort.InferenceSession.create(
        model, {intraOpNumThreads: threads, interOpNumThreads: 1});
    const feeds = {};
    for (const [name, [type, dims, fill]] of Object.entries(spec)) {
      const n = dims.reduce((a, b) => a * b, 1);
      const data = type === 'int64' ? BigInt64Array.from({length: n}, (_, i) => BigInt(fill(i)))
                                    : Float32Array.from({length: n}, (_, i) => fill(i));
      feeds[name] = new ort.Tensor(type, data, dims);
      writeNpy(path.join(out, `${label}.in.${name}.npy`), type, dims, data);
    }
    const results = await loaded.run(feeds);
    for (const [name, t] of Object.entries(results))
      writeNpy(path.join(out, `${label}.ort.${name}.npy`), t.type, t.dims, t.data);
    const times = [];
    for (let i = 0; i < 200; ++i) {
      const t0 = process.hrtime.bigint();
      await loaded.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`${label}: ORT median ${times[100].toFixed(3)} ms, ${threads} thread(s)`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
