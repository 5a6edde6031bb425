//! Where the server listens and keeps its data: `listen`, `advertise_url`, `database_url`,
//! `data_dir`, `static_dir`. The flags of `serve` win over the file for each.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{ConfigError, ServeArgs};

/// The file's keys of this section.
pub(super) struct ServerFile {
    pub listen: Option<SocketAddr>,
    pub advertise_url: Option<String>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub static_dir: Option<PathBuf>,
}

/// The resolved section.
pub(super) struct Server {
    pub listen: SocketAddr,
    pub advertise_url: Option<url::Url>,
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
        let listen = args
            .listen
            .or(self.listen)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
        let advertise_url = match args.advertise_url.clone().or(self.advertise_url) {
            Some(text) => Some(advertised(&text)?),
            // A replica listening on one address is reached there; one listening on all of
            // them cannot say which the others reach.
            None if !listen.ip().is_unspecified() => {
                url::Url::parse(&format!("http://{listen}")).ok()
            }
            None => None,
        };
        Ok(Server {
            listen,
            advertise_url,
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

/// An `advertise_url`: `http` or `https`, a host, nothing after the authority.
fn advertised(text: &str) -> Result<url::Url, ConfigError> {
    let bad = |why: &str| {
        ConfigError::new(
            "advertise_url",
            format!("{why}: give the URL the other replicas reach this one at, e.g. http://10.0.0.7:8080"),
        )
    };
    let url = url::Url::parse(text).map_err(|e| bad(&format!("{text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("it must be an http or https URL with a host"));
    }
    if url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
        return Err(bad("it must have no path, query or user"));
    }
    Ok(url)
}
