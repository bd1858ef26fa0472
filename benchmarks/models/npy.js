// .npy files (version 1.0, little-endian, C order) of float32 and int64 arrays, for the scripts
// that run ONNX Runtime beside kiln-run.
const fs = require('fs');

const descrs = {float32: '<f4', int64: '<i8'};
const arrays = {float32: Float32Array, int64: BigInt64Array};

function writeNpy(file, type, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descrs[type]}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

// [type, dims, data] of a file writeNpy (or numpy's np.save) wrote.
function readNpy(file) {
  const bytes = fs.readFileSync(file);
  const length = bytes.readUInt16LE(8);
  const header = bytes.toString('latin1', 10, 10 + length);
  const descr = /'descr': '([^']+)'/.exec(header)[1];
  const type = Object.keys(descrs).find((t) => descrs[t] === descr);
  if (!type || /'fortran_order': True/.test(header)) throw new Error(`${file}: ${header}`);
  const dims = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').filter((d) => d.trim())
                   .map(Number);
  const body = bytes.subarray(10 + length);
  const data = new arrays[type](body.buffer.slice(body.byteOffset, body.byteOffset + body.length));
  return [type, dims, data];
}

module.exports = {writeNpy, readNpy};
