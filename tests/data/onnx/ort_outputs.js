// ONNX Runtime's outputs for export_paddle_style.py: runs job.model on each set's float32
// input (set.input, set.shape) and writes <set.out>_N.bin (raw float32) and _N.json (dims).
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const session = await ort.InferenceSession.create(job.model);
  for (const set of job.sets) {
    const buf = fs.readFileSync(set.input);
    const data = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, set.shape)};
    const out = await session.run(feeds);
    session.outputNames.forEach((name, i) => {
      const t = out[name];
      fs.writeFileSync(`${set.out}_${i}.bin`, Buffer.from(t.data.buffer));
      fs.writeFileSync(`${set.out}_${i}.json`, JSON.stringify({dims: t.dims}));
    });
  }
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
