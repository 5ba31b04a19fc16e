#!/usr/bin/env node
// The reference outputs of the ONNX tests: runs ONNX Runtime's CPU library (onnxruntime-node,
// which scripts/deps installs into .deps/onnxruntime) on each model directory's inputs and
// writes its outputs beside them, as the ONNX backend tests lay them out:
//   DIR/model.onnx, DIR/test_data_set_0/input_K.pb  ->  DIR/test_data_set_0/output_K.pb
// One thread, graph optimisations at ONNX Runtime's default level. The TensorProto files are
// read and written by the few lines of protobuf below (dims, data_type, name, raw_data and
// the typed data fields), so that nothing besides onnxruntime-node is needed.
//
// Usage: reference.js [--ort DIR] MODEL_DIR...
//   --ort DIR: the folder holding node_modules/onnxruntime-node (default: <repo>/.deps/onnxruntime)
'use strict';

const fs = require('fs');
const path = require('path');

// ONNX's TensorProto.DataType <-> onnxruntime-node's tensor types and their arrays.
const types = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array],
  5: ['int16', Int16Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array],
  9: ['bool', Uint8Array], 11: ['float64', Float64Array],
};
const typeCodes = Object.fromEntries(Object.entries(types).map(([code, [name]]) => [name, Number(code)]));

// Reading: a protobuf message as a list of [field, wire type, value] (value: a BigInt for a
// varint, a Buffer for a length-delimited field, a Buffer of 4 or 8 bytes for fixed ones).
function readVarint(buf, pos) {
  let value = 0n, shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const byte = buf[pos++];
    value |= BigInt(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return [value, pos];
    shift += 7n;
  }
}

function readFields(buf) {
  const fields = [];
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n), wire = Number(key & 7n);
    let value;
    if (wire === 0) {
      [value, pos] = readVarint(buf, pos);
    } else if (wire === 2) {
      let length;
      [length, pos] = readVarint(buf, pos);
      value = buf.subarray(pos, pos + Number(length));
      pos += Number(length);
    } else if (wire === 5 || wire === 1) {
      const size = wire === 5 ? 4 : 8;
      value = buf.subarray(pos, pos + size);
      pos += size;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
    if (pos > buf.length) throw new Error('truncated message');
    fields.push([field, wire, value]);
  }
  return fields;
}

function readPackedVarints(buf) {
  const values = [];
  for (let pos = 0; pos < buf.length;) {
    let v;
    [v, pos] = readVarint(buf, pos);
    values.push(v);
  }
  return values;
}

function readTensorProto(file, ort) {
  const dims = [];
  let dataType = 0, name = '', raw = null;
  // float_data, double_data, int32_data (every type stored in 32 bits or less), int64_data
  const typed = {float: [], double: [], int32: [], int64: []};
  const varints = (wire, value) => (wire === 2 ? readPackedVarints(value) : [value]);
  const fixed = (wire, value, size) => (wire === 2 ? chunks(value, size) : [value]);
  for (const [field, wire, value] of readFields(fs.readFileSync(file))) {
    if (field === 1) dims.push(...varints(wire, value).map((v) => Number(BigInt.asIntN(64, v))));
    else if (field === 2) dataType = Number(value);
    else if (field === 8) name = value.toString('utf8');
    else if (field === 9) raw = value;
    else if (field === 4) typed.float.push(...fixed(wire, value, 4).map((b) => b.readFloatLE(0)));
    else if (field === 10) typed.double.push(...fixed(wire, value, 8).map((b) => b.readDoubleLE(0)));
    else if (field === 5) typed.int32.push(...varints(wire, value).map((v) => Number(BigInt.asIntN(32, v))));
    else if (field === 7) typed.int64.push(...varints(wire, value).map((v) => BigInt.asIntN(64, v)));
    else if (field === 13 || (field === 14 && value === 1n)) throw new Error(`${file}: external data is not supported`);
  }
  if (!types[dataType]) throw new Error(`${file}: data type ${dataType} is not supported`);
  const [typeName, ArrayType] = types[dataType];
  const count = dims.reduce((a, b) => a * b, 1);
  let data;
  if (raw) {
    const copy = Buffer.from(raw);  // aligned
    data = new ArrayType(copy.buffer, copy.byteOffset, copy.length / ArrayType.BYTES_PER_ELEMENT);
  } else if (dataType === 1) data = Float32Array.from(typed.float);
  else if (dataType === 11) data = Float64Array.from(typed.double);
  else if (dataType === 7) data = BigInt64Array.from(typed.int64);
  else data = ArrayType.from(typed.int32);
  if (data.length !== count) throw new Error(`${file}: ${data.length} values for dims [${dims}]`);
  if (typeName === 'bool') data = Uint8Array.from(data, (v) => (v ? 1 : 0));
  return {name, tensor: new ort.Tensor(typeName, data, dims)};
}

function chunks(buf, size) {
  const out = [];
  for (let i = 0; i + size <= buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

// Writing: dims (packed), data_type, name and raw_data.
function varint(value) {
  let v = BigInt.asUintN(64, BigInt(value));
  const bytes = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    bytes.push(byte);
  } while (v);
  return Buffer.from(bytes);
}

function lengthDelimited(field, payload) {
  return Buffer.concat([varint((field << 3) | 2), varint(payload.length), payload]);
}

function tensorProto(name, tensor) {
  const code = typeCodes[tensor.type];
  if (!code) throw new Error(`output ${name}: tensor type ${tensor.type} is not supported`);
  const data = tensor.data;
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([
    lengthDelimited(1, Buffer.concat(tensor.dims.map(varint))),
    varint((2 << 3) | 0), varint(code),
    lengthDelimited(8, Buffer.from(name, 'utf8')),
    lengthDelimited(9, raw),
  ]);
}

async function runModel(ort, dir) {
  const data = path.join(dir, 'test_data_set_0');
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1,
  });
  const feeds = {};
  session.inputNames.forEach((name, k) => {
    feeds[name] = readTensorProto(path.join(data, `input_${k}.pb`), ort).tensor;
  });
  const started = process.hrtime.bigint();
  const results = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  session.outputNames.forEach((name, k) => {
    fs.writeFileSync(path.join(data, `output_${k}.pb`), tensorProto(name, results[name]));
  });
  const shapes = session.outputNames.map((name) => `${name} [${results[name].dims}]`).join(', ');
  console.log(`${path.basename(dir)}: ONNX Runtime ${ort.env.versions.common}: ${shapes} (${ms.toFixed(1)} ms)`);
  await session.release();
}

async function main(argv) {
  let ortDir = path.resolve(__dirname, '..', '..', '.deps', 'onnxruntime');
  const dirs = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--ort') ortDir = argv[++i];
    else dirs.push(argv[i]);
  }
  if (!dirs.length) {
    console.error('usage: reference.js [--ort DIR] MODEL_DIR...');
    return 2;
  }
  let ort;
  try {
    ort = require(path.join(path.resolve(ortDir), 'node_modules', 'onnxruntime-node'));
  } catch (err) {
    console.error(`reference.js: cannot load onnxruntime-node from ${ortDir} (scripts/deps installs it): ` +
                  err.message);
    return 2;
  }
  for (const dir of dirs) await runModel(ort, dir);
  return 0;
}

// scripts/onnx/bench_ort.js reads the inputs with the same reader.
module.exports = {readTensorProto};

if (require.main === module) {
  main(process.argv.slice(2)).then((rc) => { process.exitCode = rc; }, (err) => {
    console.error(`reference.js: ${err.stack || err}`);
    process.exitCode = 1;
  });
}
