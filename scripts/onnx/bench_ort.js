#!/usr/bin/env node
// The ONNX Runtime side of scripts/bench's network figures: times ONNX Runtime's CPU library
// (onnxruntime-node, which scripts/deps installs into .deps/onnxruntime) on a model directory
// laid out as the ONNX backend tests are (DIR/model.onnx, DIR/test_data_set_0/input_K.pb), as
// run-onnx --repeat times fluidk: the first run and warm-up runs untimed, then N timed runs.
// Prints
//   median_ms M       the median of the timed runs (each from the call to its result)
//   start_rss_kb K    the process's resident set before the session was created (node and the
//                     ONNX Runtime library loaded; no model, no input)
//   peak_rss_kb K     the process's peak resident set at the end (process.resourceUsage().maxRSS)
// so that peak_rss_kb - start_rss_kb is what the model cost, node's own runtime left out.
// The session: the CPU execution provider, intraOpNumThreads T, interOpNumThreads 1 (the
// operators run one after another, as fluidk's executor runs them), graph optimisations at
// ONNX Runtime's default level.
//
// Usage: bench_ort.js [--ort DIR] [--threads T] [--repeat N] [--warmup W] MODEL_DIR
//   --ort DIR: the folder holding node_modules/onnxruntime-node (default: <repo>/.deps/onnxruntime)
//   --threads T (default 1), --repeat N timed runs (default 10), --warmup W untimed runs after
//   the first (default 2, as run-onnx)
'use strict';

const fs = require('fs');
const path = require('path');
const {readTensorProto} = require('./reference.js');

function positive(option, text, allowZero) {
  const value = Number(text);
  if (!Number.isInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new Error(`${option} takes a ${allowZero ? 'non-negative' : 'positive'} integer, not '${text}'`);
  }
  return value;
}

function parse(argv) {
  const args = {ort: path.resolve(__dirname, '..', '..', '.deps', 'onnxruntime'), threads: 1, repeat: 10,
                warmup: 2, dir: null};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (['--ort', '--threads', '--repeat', '--warmup'].includes(arg)) {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      const value = argv[++i];
      if (arg === '--ort') args.ort = value;
      else if (arg === '--threads') args.threads = positive(arg, value, false);
      else if (arg === '--repeat') args.repeat = positive(arg, value, false);
      else args.warmup = positive(arg, value, true);
    } else if (arg.startsWith('--')) {
      throw new Error(`unknown option ${arg}`);
    } else if (args.dir !== null) {
      throw new Error(`one model directory only ('${args.dir}', then '${arg}')`);
    } else {
      args.dir = arg;
    }
  }
  if (args.dir === null) throw new Error('no model directory given');
  return args;
}

async function main(argv) {
  let args;
  try {
    args = parse(argv);
  } catch (err) {
    console.error(`bench_ort.js: ${err.message}\n` +
                  'usage: bench_ort.js [--ort DIR] [--threads T] [--repeat N] [--warmup W] MODEL_DIR');
    return 2;
  }
  let ort;
  try {
    ort = require(path.join(path.resolve(args.ort), 'node_modules', 'onnxruntime-node'));
  } catch (err) {
    console.error(`bench_ort.js: cannot load onnxruntime-node from ${args.ort} (scripts/deps installs it): ` +
                  err.message);
    return 2;
  }
  const model = path.join(args.dir, 'model.onnx');
  if (!fs.existsSync(model)) {
    console.error(`bench_ort.js: no ${model}`);
    return 2;
  }

  const startRssKb = Math.round(process.memoryUsage().rss / 1024);
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: args.threads, interOpNumThreads: 1,
  });
  const feeds = {};
  session.inputNames.forEach((name, k) => {
    feeds[name] = readTensorProto(path.join(args.dir, 'test_data_set_0', `input_${k}.pb`), ort).tensor;
  });
  for (let i = 0; i < 1 + args.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < args.repeat; i++) {
    const started = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  times.sort((a, b) => a - b);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  console.log(`onnxruntime ${ort.env.versions.common}: timed runs ${n} (after ${1 + args.warmup} untimed), ` +
              `${args.threads} intra-op thread${args.threads === 1 ? '' : 's'}`);
  console.log(`median_ms ${median.toFixed(4)}`);
  console.log(`start_rss_kb ${startRssKb}`);
  console.log(`peak_rss_kb ${process.resourceUsage().maxRSS}`);
  await session.release();
  return 0;
}

main(process.argv.slice(2)).then((rc) => { process.exitCode = rc; }, (err) => {
  console.error(`bench_ort.js: ${err.stack || err}`);
  process.exitCode = 1;
});
