// Trunk's post-build hook (Trunk.toml [[hooks]]), on the staged build: the wasm built and cut
// into chunks, and linked from index.html (wasm.mjs); then its import names shortened and the
// glue minified (shrink.mjs), and a `.br` and a `.gz` written beside each file
// (precompress.mjs). One hook, since Trunk runs the hooks of a stage at the same time.
//
//   node frontend/post-build.mjs    (in a Trunk hook: $TRUNK_STAGING_DIR, $TRUNK_PROFILE)
import { precompress } from "./precompress.mjs";
import { buildWasm } from "./wasm.mjs";

const dir = process.env.TRUNK_STAGING_DIR;
if (!dir) throw new Error("post-build.mjs runs as Trunk's hook ($TRUNK_STAGING_DIR is not set)");
await buildWasm(dir);
await precompress(dir);
