// Builds the web app's wasm and cuts it into chunks that load on first use (run by
// post-build.mjs, Trunk's post-build hook). Trunk's own Rust pipeline (cargo, wasm-bindgen,
// wasm-opt) has no step between cargo and wasm-bindgen, which is where the cut must happen, so
// this does the pipeline itself:
//
//   1. cargo rustc, with `--emit-relocs` for the final link only (wasm-split reads the
//      relocations to move code; the crates are built as `.cargo/config.toml` says);
//   2. wasm-split-cli (scripts/install-tools.sh): every `#[wasm_split]` function of
//      src/components/chunk.rs and src/pages/chunks.rs becomes a chunk holding what only it
//      reaches (`split_NAME.wasm`), code shared by some chunks goes to `chunk_N.wasm`, and the
//      main module keeps the rest; `__wasm_split.js` fetches a chunk and its shared parts when a
//      split function first runs;
//   3. wasm-bindgen on the main module (`--keep-lld-exports`: the chunks link against its
//      memory, table and shared exports);
//   4. on release, wasm-opt `-O2 --converge` on every module (what Trunk ran before; it
//      compresses better than `-Oz`, frontend/README.md, Size), as many at a time as there
//      are cores, each result kept by content in the target directory (`optimize` below);
//   5. each chunk's fetch given a time limit (a stalled one fails, and Try again refetches it);
//      the files named with one hash of the whole build (a chunk of an old build must never
//      meet the main module of a new one; each file's own hash would not ensure it, since the
//      loader and the glue import each other), the loader minified with terser, and the entry
//      script with its preloads (and SRI hashes) put into index.html.
//
//   node frontend/wasm.mjs [DIR]    (default: $TRUNK_STAGING_DIR; needs $TRUNK_PROFILE or debug)
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync,
  statSync, utimesSync, writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { minify } from "terser";

const execFileAsync = promisify(execFile);

const CRATE = "breakglass-frontend";
/** How long a chunk's fetch may take before the page offers Try again (see the loader below). */
const CHUNK_TIMEOUT_MS = 20000;
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");

function run(cmd, args, opts = {}) {
  const started = Date.now();
  try {
    const out = execFileSync(cmd, args, { cwd: repo, stdio: ["ignore", opts.capture ? "pipe" : "inherit", "inherit"], ...opts });
    if (!opts.capture) console.log(`wasm: ${cmd} ${args[0]} done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return out;
  } catch (e) {
    throw new Error(`wasm: \`${cmd} ${args.join(" ")}\` failed (${e.status ?? e.message}); see the output above`);
  }
}

const WASM_OPT_ARGS = ["-O2", "--converge"];
/** Cached outputs unused for this long are deleted (each build touches the ones it uses). */
const CACHE_DAYS = 7;

/**
 * Runs wasm-opt on every file in place, as many at a time as there are cores (npm's wasm-opt
 * runs on one; the main module takes about 20 s, each of the fifty chunks one or two). Its
 * output depends only on the input, the arguments and its version, so each result is kept in
 * `cache` under a hash of the three: a build of unchanged code (CI after a local build, a
 * rebuild that changed one chunk) optimises only what changed.
 */
async function optimize(files, cache) {
  mkdirSync(cache, { recursive: true });
  const version = run("wasm-opt", ["--version"], { capture: true, encoding: "utf8" }).trim();
  const started = Date.now();
  let hits = 0;
  const one = async (f) => {
    const key = createHash("sha256").update(version).update(WASM_OPT_ARGS.join(" ")).update(readFileSync(f)).digest("hex");
    const kept = join(cache, `${key}.wasm`);
    if (existsSync(kept)) {
      const now = new Date();
      utimesSync(kept, now, now);
      cpSync(kept, f);
      hits++;
      return;
    }
    const tmp = `${kept}.${process.pid}.tmp`;
    try {
      await execFileAsync("wasm-opt", [...WASM_OPT_ARGS, f, "-o", tmp], { cwd: repo, maxBuffer: 64 << 20 });
    } catch (e) {
      rmSync(tmp, { force: true });
      throw new Error(`wasm: \`wasm-opt ${WASM_OPT_ARGS.join(" ")} ${f}\` failed (${e.code ?? e.message}): ${e.stderr ?? ""}`);
    }
    renameSync(tmp, kept);
    cpSync(kept, f);
  };
  // The largest first, so it does not start last and run alone.
  const queue = [...files].sort((a, b) => statSync(b).size - statSync(a).size);
  const workers = Array.from({ length: Math.min(availableParallelism(), queue.length) }, async () => {
    for (let f = queue.shift(); f; f = queue.shift()) await one(f);
  });
  await Promise.all(workers);
  const old = Date.now() - CACHE_DAYS * 86400e3;
  for (const name of readdirSync(cache)) {
    const path = join(cache, name);
    if (statSync(path).mtimeMs < old) rmSync(path, { force: true });
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`wasm: wasm-opt ${WASM_OPT_ARGS.join(" ")} on ${files.length} modules in ${secs} s (${hits} kept from an earlier build, ${cache})`);
}

const sri = (bytes) => "sha384-" + createHash("sha384").update(bytes).digest("base64");

/** Builds the wasm into `dir` and links it from `dir/index.html`; returns the files written. */
export async function buildWasm(dir, release = process.env.TRUNK_PROFILE === "release") {
  const meta = JSON.parse(run("cargo", ["metadata", "--format-version", "1", "--no-deps"], { capture: true, encoding: "utf8" }));
  const profile = release ? "wasm-release" : "debug";
  run("cargo", [
    "rustc", "-p", CRATE, "--bin", CRATE, "--target", "wasm32-unknown-unknown",
    "--profile", release ? "wasm-release" : "dev", "--", "-Clink-args=--emit-relocs",
  ]);
  const input = join(meta.target_directory, "wasm32-unknown-unknown", profile, `${CRATE}.wasm`);

  const work = mkdtempSync(join(tmpdir(), "breakglass-wasm-"));
  try {
    const split = join(work, "split"), bound = join(work, "bound");
    run("wasm-split-cli", [input, split, "--out-name", CRATE]);
    run("wasm-bindgen", [
      "--target", "web", "--keep-lld-exports", "--no-demangle",
      "--out-name", CRATE, "--out-dir", bound, join(split, `${CRATE}.wasm`),
    ]);
    const chunks = readdirSync(split).filter((f) => f.endsWith(".wasm") && f !== `${CRATE}.wasm`);
    const wasmFiles = [join(bound, `${CRATE}_bg.wasm`), ...chunks.map((f) => join(split, f))];
    if (release) await optimize(wasmFiles, join(meta.target_directory, "wasm-opt-cache"));

    let glue = readFileSync(join(bound, `${CRATE}.js`), "utf8");
    let loader = readFileSync(join(split, "__wasm_split.js"), "utf8");
    // A chunk's fetch that stalls (a connection dropped without the browser noticing, a proxy
    // that holds the request) would leave "Loading …" up for good: it gives up after
    // CHUNK_TIMEOUT_MS, the page says so with Try again, and since the loader keeps only
    // successes the retry fetches anew. The largest chunk is about 60 KB, a few seconds even
    // on a poor mobile link. Done before the hash, so a change of the limit is a new build.
    const fetchCall = /fetch\((new URL\("\.\/[^"]+\.wasm", import\.meta\.url\))\)/g;
    const fetches = (loader.match(fetchCall) || []).length;
    if (fetches !== chunks.length) {
      throw new Error(`wasm: the loader fetches ${fetches} chunks in the expected form, not ${chunks.length}`);
    }
    loader = loader.replace(fetchCall, `fetch($1, { signal: AbortSignal.timeout(${CHUNK_TIMEOUT_MS}) })`);
    const build = createHash("sha256");
    for (const f of [...wasmFiles].sort()) build.update(readFileSync(f));
    build.update(glue).update(loader);
    const tag = build.digest("hex").slice(0, 16);
    const named = (f) => f.replace(/(\.wasm|\.js)$/, `-${tag}$1`);

    // The glue imports the loader as a module; the wasm's import *module name*
    // (`"./__wasm_split.js": import1` in the glue's import object) stays as it is.
    glue = glue.replace(/(from\s*["'])\.\/__wasm_split\.js(["'])/g, `$1./${named("__wasm_split.js")}$2`);
    loader = loader.replace(`"./${CRATE}.js"`, `"./${CRATE}-${tag}.js"`);
    for (const c of chunks) {
      const quoted = `"./${c}"`;
      if (!loader.includes(quoted)) throw new Error(`wasm: the loader does not name ${c}`);
      loader = loader.split(quoted).join(`"./${named(c)}"`);
    }
    loader = (await minify(loader, { module: true, ecma: 2020, format: { comments: false } })).code;

    const js = `${CRATE}-${tag}.js`, wasm = `${CRATE}-${tag}_bg.wasm`;
    const written = [js, wasm, named("__wasm_split.js"), ...chunks.map(named)];
    writeFileSync(join(dir, js), glue);
    writeFileSync(join(dir, named("__wasm_split.js")), loader);
    cpSync(join(bound, `${CRATE}_bg.wasm`), join(dir, wasm));
    for (const c of chunks) cpSync(join(split, c), join(dir, named(c)));
    if (existsSync(join(bound, "snippets"))) cpSync(join(bound, "snippets"), join(dir, "snippets"), { recursive: true });

    // The entry, as Trunk wrote it: the glue preloaded as a module, the wasm fetched in
    // parallel, both checked against their hash (shrink.mjs redoes the hashes it changes).
    const url = (process.env.TRUNK_PUBLIC_URL || "/").replace(/\/?$/, "/");
    const entry =
      `<link rel="modulepreload" href="${url}${js}" crossorigin integrity="${sri(Buffer.from(glue))}">` +
      `<link rel="preload" href="${url}${wasm}" as="fetch" type="application/wasm" crossorigin integrity="${sri(readFileSync(join(dir, wasm)))}">` +
      `<script type="module">import init from "${url}${js}";init({module_or_path:"${url}${wasm}"});</script>`;
    const htmlPath = join(dir, "index.html");
    // The `rel="rust"` link index.html declares skipped (so Trunk builds no wasm) goes too.
    const html = readFileSync(htmlPath, "utf8").replace(/<link\b[^>]*\bdata-trunk-skip\b[^>]*>/g, "");
    if (!html.includes("</head>")) throw new Error(`wasm: ${htmlPath} has no </head> to put the entry before`);
    writeFileSync(htmlPath, html.replace("</head>", entry + "</head>"));
    console.log(`wasm: ${written.length} files (${chunks.length} chunks), build ${tag}`);
    return written;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await buildWasm(process.argv[2] || process.env.TRUNK_STAGING_DIR || "frontend/dist");
}
