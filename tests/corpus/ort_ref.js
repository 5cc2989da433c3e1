// ONNX Runtime's side of make_corpus.py: runs each job's model on its raw inputs and writes
// its outputs raw (little-endian) beside it, with their names, dtypes and shapes in
// DIR/.ort_out.json.  usage: node ort_ref.js JOBS.json
//   JOBS.json: {ort_dir, threads, jobs: [{model, dir, inputs: [{name, dtype, shape, file}]}]}
const fs = require('fs');
const path = require('path');

const arrays = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int8: Int8Array, uint8: Uint8Array, bool: Uint8Array, float16: Uint16Array,
};

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  // onnxruntime-node is installed in bench/onnx_vs_ort, not beside this script.
  const ort = require(require.resolve('onnxruntime-node', {paths: [spec.ort_dir]}));
  for (const job of spec.jobs) {
    const session = await ort.InferenceSession.create(job.model, {
      intraOpNumThreads: spec.threads, interOpNumThreads: 1, executionMode: 'sequential',
      graphOptimizationLevel: job.optimization || 'all',
    });
    const feeds = {};
    for (const inp of job.inputs) {
      const buf = fs.readFileSync(inp.file);
      const data = new arrays[inp.dtype](
          buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
      feeds[inp.name] = new ort.Tensor(inp.dtype, data, inp.shape);
    }
    const results = await session.run(feeds);
    const outs = session.outputNames.map((name, j) => {
      const t = results[name];
      const file = `.out_${j}.bin`;
      fs.writeFileSync(path.join(job.dir, file),
                       Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      return {name, dtype: t.type, shape: t.dims.map(Number), file};
    });
    fs.writeFileSync(path.join(job.dir, '.ort_out.json'), JSON.stringify(outs));
    await session.release();
    console.log(`${job.name}: ${outs.map((o) => `${o.name}[${o.shape}]`).join(' ')}`);
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
