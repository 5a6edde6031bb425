// Run by post-build.mjs (Trunk's post-build hook, Trunk.toml [[hooks]]): writes `FILE.br` (brotli, quality 11) and
// `FILE.gz` (gzip -9) beside every text or wasm file of the build, so the server sends them
// as they are (tower-http's precompressed ServeDir) instead of compressing on each request.
// Brotli at its best quality is too slow to run per request but cuts the wasm by a further
// fifth against gzip. Node's own zlib: nothing to install beyond the npm the build has.
// First, shrink.mjs shortens the wasm's import names and minifies the JS glue (with terser, from
// `npm ci`), so what is compressed is already the smaller build.
//
//   node frontend/precompress.mjs [DIR]    (default: $TRUNK_STAGING_DIR, then frontend/dist)
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { shrink } from "./shrink.mjs";

const compressible = /\.(wasm|js|mjs|css|html|svg|json|map)$/;

function* files(d) {
  for (const name of readdirSync(d)) {
    const path = join(d, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (compressible.test(name)) yield path;
  }
}

/** Shrinks, then compresses every file of `dir` (a build). */
export async function precompress(dir) {
  await shrink(dir);
  let raw = 0, br = 0, gz = 0;
  for (const path of files(dir)) {
    const bytes = readFileSync(path);
    const b = brotliCompressSync(bytes, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_LGWIN]: constants.BROTLI_MAX_WINDOW_BITS,
        [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
      },
    });
    const g = gzipSync(bytes, { level: 9 });
    writeFileSync(path + ".br", b);
    writeFileSync(path + ".gz", g);
    raw += bytes.length;
    br += b.length;
    gz += g.length;
  }
  const kb = (n) => (n / 1024).toFixed(0) + " KB";
  console.log(`precompressed ${dir}: ${kb(raw)} raw, ${kb(gz)} gzip, ${kb(br)} brotli`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await precompress(process.argv[2] || process.env.TRUNK_STAGING_DIR || "frontend/dist");
}
