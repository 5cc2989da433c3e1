// llama.cpp's token ids for the tokenizer test texts (node-llama-cpp 3.21.1, vocab-only load).
//
//   cd ~/.cache/rlx-llm && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
//     node /work/main/libs/llm/tests/llama_tokenize_ref.mjs /work/main/libs/llm/tests/data
//
// For every data/*.gguf writes data/<name>.ref.txt:
//   # bos <id> eos <id> eog <id,id,...> eot <id>  (llama.cpp's special ids after loading)
//   then one line per line of data/tokenizer_texts.txt, five tab-separated fields:
//   ids (parse_special=false) | ids (parse_special=true) | detokenize(ids, false) |
//   detokenize(ids_special, true) | detokenize([bos] + ids, false)   (texts escaped as in
//   make_vocab_gguf.py; "=" in fields 2 and 4: equal to field 1 / 3, in field 5: " " + field 3).
//   model.tokenize(text, special) is llama_tokenize(add_special=false,
//   parse_special=special); detokenize is llama_detokenize(remove_special=false, unparse=special).
import {createRequire} from "node:module";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";

const require = createRequire(path.join(process.env.NLC_DIR ?? path.join(os.homedir(), ".cache/rlx-llm"), "x.js"));
const {getLlama, LlamaLogLevel} = await import(require.resolve("node-llama-cpp"));

const dir = process.argv[2];
const unescape = (s) => {
    const bytes = [];
    const raw = Buffer.from(s, "utf8");
    for (let i = 0; i < raw.length; i++) {
        if (raw[i] !== 0x5c) { bytes.push(raw[i]); continue; }
        const c = String.fromCharCode(raw[++i]);
        if (c === "n") bytes.push(10);
        else if (c === "r") bytes.push(13);
        else if (c === "t") bytes.push(9);
        else if (c === "\\") bytes.push(0x5c);
        else if (c === "x") { bytes.push(parseInt(raw.subarray(i + 1, i + 3).toString(), 16)); i += 2; }
        else throw new Error("bad escape " + c);
    }
    return Buffer.from(bytes).toString("utf8");
};
const escape = (s) => {
    let out = "";
    for (const ch of s) {
        const o = ch.codePointAt(0);
        if (ch === "\\") out += "\\\\";
        else if (ch === "\n") out += "\\n";
        else if (ch === "\r") out += "\\r";
        else if (ch === "\t") out += "\\t";
        else if (o < 0x20 || o === 0x7f) out += "\\x" + o.toString(16).toUpperCase().padStart(2, "0");
        else out += ch;
    }
    return out;
};

const texts = fs.readFileSync(path.join(dir, "tokenizer_texts.txt"), "utf8").split("\n");
texts.pop();  // trailing newline
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: LlamaLogLevel.error});
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".gguf")).sort()) {
    const model = await llama.loadModel({modelPath: path.join(dir, file), gpuLayers: 0, vocabOnly: true});
    const bos = model.tokens.bos, eos = model.tokens.eos;
    const n = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    const eog = [];
    for (let i = 0; i < n; i++) if (model.isEogToken(i)) eog.push(i);
    const lines = [`# bos ${bos ?? -1} eos ${eos ?? -1} eog ${eog.join(",")} eot ${model.tokens.eot ?? -1}`];
    for (const t of texts) {
        const text = unescape(t);
        const ids = Array.from(model.tokenize(text, false));
        const idsSp = Array.from(model.tokenize(text, true));
        const detok = escape(model.detokenize(ids, false));
        const detokSp = escape(model.detokenize(idsSp, true));
        const withBos = bos == null ? "" : escape(model.detokenize([bos, ...ids], false));
        const same = idsSp.join(",") === ids.join(",");  // "=": as the field two to the left
        lines.push([ids.join(","), same ? "=" : idsSp.join(","), detok,
            detokSp === detok ? "=" : detokSp, withBos === " " + detok ? "=" : withBos].join("\t"));
    }
    fs.writeFileSync(path.join(dir, file.replace(/\.gguf$/, ".ref.txt")), lines.join("\n") + "\n");
    console.log(`${file}: ${texts.length} texts, bos ${bos} eos ${eos} eog [${eog.join(",")}]`);
    await model.dispose();
}
await llama.dispose();
