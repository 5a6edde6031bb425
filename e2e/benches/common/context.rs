//! A server's context in the benchmark's own process, as `serve` makes it but without
//! clusters: for the benches that drive the lifecycle or the sweep directly.

use std::sync::Arc;

use breakglass_server::config::{Config, FileConfig, ServeArgs};
use breakglass_server::state::Context;

/// A dev-mode context on the database at `url` under `file`, its data in `dir`.
pub async fn context(url: &str, dir: &std::path::Path, file: FileConfig) -> Arc<Context> {
    let args = ServeArgs {
        dev: true,
        no_clusters: true,
        data_dir: Some(dir.to_path_buf()),
        database_url: Some(url.to_string()),
        static_dir: Some(dir.join("dist")),
        ..Default::default()
    };
    Context::new(Config::resolve(&args, file).unwrap(), None)
        .await
        .unwrap()
}
