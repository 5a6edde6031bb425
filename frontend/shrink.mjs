// Shrinks the wasm-bindgen output of a Trunk build before it is compressed (run by
// precompress.mjs, the post-build hook): wasm-bindgen names each import the wasm takes from its
// JS glue like `__wbg_addEventListener_847fd86b8c33ec43` (a hash to keep names unique across
// crates), about 250 of them, spelled out in the wasm's import section and again in the glue.
// They become `a`, `b`, ... `aa`, ... in both, consistently, the module name
// (`./breakglass-frontend_bg.js`) too, and so do the exports the glue reads only as
// `wasm.NAME` (`intounderlyingsource_pull`, `__wbindgen_malloc`, ...); the glue is then
// minified with terser (Trunk's own JS minifier cannot parse it, Trunk.toml); and the SRI
// hashes Trunk wrote into index.html for the two files are replaced by those of the new bytes,
// or the browser would refuse them.
//
//   node frontend/shrink.mjs [DIR]    (default: $TRUNK_STAGING_DIR, then frontend/dist)
//
// A build shrunk already (imports not from a `*_bg.js` module any more) is left alone, so
// running precompress.mjs again on a dist does no harm. Anything unexpected in the glue (an
// import name not found exactly once) fails the build rather than ship a wasm whose imports
// the glue does not provide.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { minify } from "terser";

// ---- the wasm's import section ----------------------------------------------------------------

function readU32(bytes, pos) {
  let value = 0, shift = 0, b;
  do {
    b = bytes[pos++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  return [value, pos];
}

function writeU32(value) {
  const out = [];
  do {
    let b = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) b |= 0x80;
    out.push(b);
  } while (value > 0);
  return Buffer.from(out);
}

function readName(bytes, pos) {
  const [len, start] = readU32(bytes, pos);
  return [bytes.subarray(start, start + len).toString("utf8"), start + len];
}

function name(s) {
  const b = Buffer.from(s, "utf8");
  return Buffer.concat([writeU32(b.length), b]);
}

// Past one import's description (the part after its kind byte), which is copied unchanged.
function skipDesc(bytes, pos, kind) {
  const limits = (p) => {
    const flags = bytes[p++];
    [, p] = readU32(bytes, p); // minimum
    if (flags & 1) [, p] = readU32(bytes, p); // maximum
    return p;
  };
  switch (kind) {
    case 0: return readU32(bytes, pos)[1]; // function: type index
    case 1: return limits(pos + 1); // table: element type, limits
    case 2: return limits(pos); // memory: limits
    case 3: return pos + 2; // global: value type, mutability
    case 4: return readU32(bytes, pos + 1)[1]; // tag: attribute, type index
    default: throw new Error(`shrink: unknown import kind ${kind}`);
  }
}

// Where section `id` lies in the file (`start` at its id byte, `body` after its size), if any.
function findSection(wasm, id) {
  if (wasm.readUInt32LE(0) !== 0x6d736100) throw new Error("shrink: not a wasm file");
  let pos = 8;
  while (pos < wasm.length) {
    const [size, body] = readU32(wasm, pos + 1);
    if (wasm[pos] === id) return { id, start: pos, body, end: body + size };
    pos = body + size;
  }
  return null;
}

// Section `id`'s entries, each read by `read` from a position to [entry, next position].
function entries(wasm, id, read) {
  const section = findSection(wasm, id);
  const out = [];
  if (section) {
    let [count, p] = readU32(wasm, section.body);
    while (count-- > 0) {
      let entry;
      [entry, p] = read(p);
      out.push(entry);
    }
  }
  return { section, entries: out };
}

// The import section's entries: module, field and the rest (kind and description) as bytes.
const imports = (wasm) =>
  entries(wasm, 2, (p) => {
    const [module, q] = readName(wasm, p);
    const [field, r] = readName(wasm, q);
    const end = skipDesc(wasm, r + 1, wasm[r]);
    return [{ module, field, desc: wasm.subarray(r, end) }, end];
  });

// The export section's entries: name and the rest (kind and index) as bytes.
const exports = (wasm) =>
  entries(wasm, 7, (p) => {
    const [field, q] = readName(wasm, p);
    const end = readU32(wasm, q + 1)[1];
    return [{ field, desc: wasm.subarray(q, end) }, end];
  });

// `wasm` with each of `replaced` ({ section, body }, in file order) put in its section's place.
function withSections(wasm, replaced) {
  const parts = [];
  let at = 0;
  for (const { section, body } of replaced) {
    parts.push(wasm.subarray(at, section.start), Buffer.from([section.id]), writeU32(body.length), body);
    at = section.end;
  }
  parts.push(wasm.subarray(at));
  return Buffer.concat(parts);
}

const sectionBody = (entries, encode) =>
  Buffer.concat([writeU32(entries.length), ...entries.flatMap(encode)]);

// ---- short names ----------------------------------------------------------------------------

const FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$";
const REST = FIRST + "0123456789";

// The n-th identifier: `a` ... `$`, then `aa`, `ab`, ...
function shortName(n) {
  let s = FIRST[n % FIRST.length];
  n = Math.floor(n / FIRST.length);
  while (n > 0) {
    n -= 1;
    s += REST[n % REST.length];
    n = Math.floor(n / REST.length);
  }
  return s;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// Replaces the one place `old` is spelled in the glue (an object key: `old:` or `"old":`).
function renameIn(js, old, short, quoted) {
  // After `{`, `,` or a line break, before `:`: where an object literal's keys stand.
  const key = quoted ? `"${escape(old)}"` : `${escape(old)}(?![\\w$])`;
  const re = new RegExp(`(?<=[{,]\\s*)${key}(?=\\s*:)`, "g");
  const found = js.match(re)?.length ?? 0;
  if (found !== 1) {
    throw new Error(`shrink: import ${old} is a key ${found} times in the glue, not once`);
  }
  return js.replace(re, quoted ? `"${short}"` : short);
}

// ---- the build ------------------------------------------------------------------------------

const sri = (bytes) => "sha384-" + createHash("sha384").update(bytes).digest("base64");

/** Shrinks the wasm and its glue in `dir` (a Trunk build); the bytes saved, raw. */
export async function shrink(dir) {
  const files = readdirSync(dir);
  const wasmFile = files.find((f) => f.endsWith("_bg.wasm"));
  const jsFile = wasmFile && files.find((f) => f === wasmFile.replace(/_bg\.wasm$/, ".js"));
  if (!jsFile) {
    console.log(`shrink: no wasm-bindgen output in ${dir}`);
    return 0;
  }
  const wasmPath = join(dir, wasmFile), jsPath = join(dir, jsFile);
  const wasm = readFileSync(wasmPath), js = readFileSync(jsPath, "utf8");
  const imp = imports(wasm);
  const modules = new Set(imp.entries.map((e) => e.module).filter((m) => m.endsWith("_bg.js")));
  if (modules.size === 0) {
    console.log(`shrink: ${wasmFile} is shrunk already`);
    return 0;
  }

  let glue = js;
  const moduleName = new Map([...modules].map((m, i) => [m, shortName(i)]));
  for (const [old, short] of moduleName) glue = renameIn(glue, old, short, true);
  let n = 0;
  const importEntries = imp.entries.map((e) => {
    if (!moduleName.has(e.module)) return e;
    const field = shortName(n++);
    glue = renameIn(glue, e.field, field, false);
    return { ...e, module: moduleName.get(e.module), field };
  });
  const replaced = [{
    section: imp.section,
    body: sectionBody(importEntries, (e) => [name(e.module), name(e.field), e.desc]),
  }];

  // Exports the glue reads as `wasm.NAME` and nowhere else by name; any other (`memory` is
  // also a word in the glue's text, a marker nobody reads) keeps its name.
  // The chunk loader (wasm.mjs) takes the memory, the table and the shared exports by name.
  const loader = files.filter((f) => /^__wasm_split.*\.js$/.test(f))
    .map((f) => readFileSync(join(dir, f), "utf8")).join("\n");
  const exp = exports(wasm);
  let m = 0;
  const exportEntries = exp.entries.map((e) => {
    if (new RegExp(`(?<![\\w$])${escape(e.field)}(?![\\w$])`).test(loader)) return e;
    const word = new RegExp(`(?<![\\w$])${escape(e.field)}(?![\\w$])`, "g");
    const member = new RegExp(`(?<![\\w$])wasm\\.${escape(e.field)}(?![\\w$])`, "g");
    const uses = glue.match(member)?.length ?? 0;
    if (uses === 0 || uses !== glue.match(word).length) return e;
    const field = shortName(m++);
    glue = glue.replace(member, `wasm.${field}`);
    return { ...e, field };
  });
  if (exp.section) {
    replaced.push({
      section: exp.section,
      body: sectionBody(exportEntries, (e) => [name(e.field), e.desc]),
    });
  }
  const newWasm = withSections(wasm, replaced);

  const min = await minify(glue, {
    module: true,
    ecma: 2020,
    compress: { passes: 2 },
    format: { comments: false },
  });
  const newJs = Buffer.from(min.code, "utf8");

  // The SRI hashes (`integrity="sha384-..."`) Trunk computed over the files as it wrote them.
  const htmlPath = join(dir, "index.html");
  let html = readFileSync(htmlPath, "utf8");
  for (const [before, after] of [[Buffer.from(js, "utf8"), newJs], [wasm, newWasm]]) {
    const old = sri(before);
    if (html.includes(old)) html = html.split(old).join(sri(after));
  }

  writeFileSync(wasmPath, newWasm);
  writeFileSync(jsPath, newJs);
  writeFileSync(htmlPath, html);
  const saved = wasm.length - newWasm.length + Buffer.byteLength(js) - newJs.length;
  console.log(
    `shrink: ${n} imports and ${m} exports renamed, wasm ${wasm.length} -> ${newWasm.length} B, ` +
      `glue ${Buffer.byteLength(js)} -> ${newJs.length} B`,
  );
  return saved;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await shrink(process.argv[2] || process.env.TRUNK_STAGING_DIR || "frontend/dist");
}
