// ONNX Runtime's side of bench/onnx_vs_ort: runs one model on the inputs rlx-bench-onnx
// wrote (job.json + raw little-endian files) and prints `median_ms min_ms` of N runs.
// usage: node ort_bench.js JOB.json
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

async function main() {
  const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const session = await ort.InferenceSession.create(job.model, {
    intraOpNumThreads: job.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const inp of job.inputs) {
    const buf = fs.readFileSync(path.join(path.dirname(process.argv[2]), inp.file));
    const Arr = arrays[inp.dtype];
    const data = new Arr(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    feeds[inp.name] = new ort.Tensor(inp.dtype, data, inp.shape);
  }
  for (let i = 0; i < job.warmup; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < job.runs; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`${times[Math.floor(times.length / 2)]} ${times[0]}`);
}

main().catch((e) => { console.error(e.message); process.exit(1); });
