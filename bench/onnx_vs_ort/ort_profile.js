// ONNX Runtime's side of bench/onnx_vs_ort/profile.py: runs one model (job.json, as
// ort_bench.js reads it) with ORT's profiler on, `warmup` runs then `runs` timed ones,
// and prints the path of the chrome-trace JSON it wrote (per-node kernel times) and the
// per-run latencies in ms.
// usage: node ort_profile.js JOB.json   (the trace goes to JOB.json's folder)
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int8: Int8Array, uint8: Uint8Array, bool: Uint8Array, float16: Uint16Array,
};

function readFeeds(job, dir) {
  const feeds = {};
  for (const inp of job.inputs) {
    const buf = fs.readFileSync(path.join(dir, inp.file));
    const Arr = arrays[inp.dtype];
    if (!Arr) throw new Error(`input ${inp.name}: dtype ${inp.dtype} is not supported here`);
    const data = new Arr(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    feeds[inp.name] = new ort.Tensor(inp.dtype, data, inp.shape);
  }
  return feeds;
}

async function main() {
  const jobPath = path.resolve(process.argv[2]);
  const dir = path.dirname(jobPath);
  const job = JSON.parse(fs.readFileSync(jobPath, 'utf8'));
  // The profile file lands in the working directory, named after the prefix.
  process.chdir(dir);
  const session = await ort.InferenceSession.create(job.model, {
    intraOpNumThreads: job.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: 'ort_profile',
  });
  const feeds = readFeeds(job, dir);
  const times = [];
  for (let i = 0; i < job.warmup + job.runs; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    if (i >= job.warmup) times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  await session.endProfiling();
  await session.release();
  const traces = fs.readdirSync(dir).filter((f) => f.startsWith('ort_profile') && f.endsWith('.json'));
  if (traces.length !== 1) throw new Error(`expected one ort_profile*.json in ${dir}, got ${traces}`);
  console.log(JSON.stringify({trace: path.join(dir, traces[0]), times_ms: times}));
}

main().catch((e) => { console.error(e.message); process.exit(1); });
