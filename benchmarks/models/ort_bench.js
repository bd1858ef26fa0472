// ONNX Runtime's CPU provider on the model blocks of make_models.py: loading the model plus the
// first run, then the median of timed runs, and the process's peak resident memory; the first
// output is written beside the model (<label>.ort.bin) for kiln_bench to compare with. BERT runs
// at batch 1 and 8.
// Usage: node ort_bench.js MODEL_DIR [THREADS]   (npm install --ignore-scripts onnxruntime-node)
const ort = require('onnxruntime-node');
const fs = require('fs');

const runs = [  // [label, model file, inputs]
  ['bert_layer', 'bert_layer',
   {hidden_states: ['float32', [1, 128, 768]], attention_mask: ['int64', [1, 128]]}],
  ['bert_layer_b8', 'bert_layer',
   {hidden_states: ['float32', [8, 128, 768]], attention_mask: ['int64', [8, 128]]}],
  ['mlp', 'mlp', {x: ['float32', [256, 1024]]}],
  ['resnet_stages', 'resnet_stages', {x: ['float32', [1, 256, 56, 56]]}],
  ['mobilenet_224', 'mobilenet_224', {x: ['float32', [1, 3, 224, 224]]}],
  ['mobilenet_48x192', 'mobilenet_48x192', {x: ['float32', [1, 3, 48, 192]]}],
  ['detector', 'detector', {x: ['float32', [1, 3, 96, 96]]}],
];

function feed(spec) {
  const out = {};
  for (const [name, [type, dims]] of Object.entries(spec)) {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = type === 'int64' ? BigInt64Array.from({length: n}, (_, i) => BigInt(i % 100 < 90))
                                  : Float32Array.from({length: n}, (_, i) => Math.sin(0.37 * i));
    out[name] = new ort.Tensor(type, data, dims);
  }
  return out;
}

async function main() {
  const dir = process.argv[2] || '.';
  const threads = Number(process.argv[3] || 2);
  for (const [model, file, spec] of runs) {
    const path = `${dir}/${file}.onnx`;
    if (!fs.existsSync(path)) continue;
    const inputs = feed(spec);
    const t0 = process.hrtime.bigint();
    const model_run = await ort.InferenceSession.create(path, {
      intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential'});
    const outputs = await model_run.run(inputs);
    // The first output beside the model, for kiln_bench to compare with.
    const result = outputs[model_run.outputNames[0]].data;
    fs.writeFileSync(`${dir}/${model}.ort.bin`, Buffer.from(result.buffer, result.byteOffset,
                                                            result.byteLength));
    const first = Number(process.hrtime.bigint() - t0) / 1e6;
    const times = [];
    for (let i = 0; i < 20; ++i) {
      const s = process.hrtime.bigint();
      await model_run.run(inputs);
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`${model}: median ${times[10].toFixed(3)} ms, min ${times[0].toFixed(3)} ms, ` +
                `first call ${first.toFixed(1)} ms, ${threads} threads`);
  }
  console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);
}
main();
