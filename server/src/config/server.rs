//! Where the server listens and keeps its data: `listen`, `database_url`, `data_dir`,
//! `static_dir`. The flags of `serve` win over the file for each.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{ConfigError, ServeArgs};

/// The file's keys of this section.
pub(super) struct ServerFile {
    pub listen: Option<SocketAddr>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub static_dir: Option<PathBuf>,
}

/// The resolved section.
pub(super) struct Server {
    pub listen: SocketAddr,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub static_dir: PathBuf,
}

impl ServerFile {
    /// Flags over the file over defaults; the database must be SQLite or PostgreSQL.
    pub fn resolve(self, args: &ServeArgs) -> Result<Server, ConfigError> {
        let data_dir = args
            .data_dir
            .clone()
            .or(self.data_dir)
            .unwrap_or_else(|| PathBuf::from(".breakglass"));
        let database_url = args
            .database_url
            .clone()
            .or(self.database_url)
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("breakglass.db").display()));
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError::new(
                "database_url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        Ok(Server {
            listen: args
                .listen
                .or(self.listen)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
            database_url,
            data_dir,
            static_dir: args
                .static_dir
                .clone()
                .or(self.static_dir)
                .unwrap_or_else(|| PathBuf::from("frontend/dist")),
        })
    }
}
