//! A watcher on a replica that does not serve the terminal: this replica checks who they are
//! and what they may do, then opens a watch socket to the replica that serves it (the one
//! holding the recording's writer, which names where it is reached in its lease) with a pass
//! signed by the key every replica shares, and pipes what comes back. The pass says which
//! session, who, and whether they moderate; it is good for half a minute, for opening one
//! socket. What the watcher sends still goes nowhere: this side reads it and drops it.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::http::HeaderValue;
use axum_extra::extract::cookie::Key;
use base64::Engine as _;
use breakglass_shared::terminal::close;
use futures::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as Upstream;
use uuid::Uuid;

use super::{Watcher, Watching};
use crate::connections::close_frame;
use crate::holds::Hold;

/// The header carrying a forwarded watcher's pass.
pub const PASS_HEADER: &str = "x-breakglass-watch-pass";

/// How long a pass opens a socket.
const PASS_LIFETIME: Duration = Duration::from_secs(30);

/// A forwarded watcher, as the replica that checked them vouches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pass {
    /// The session watched.
    pub session: Uuid,
    /// Who watches.
    pub name: String,
    /// Whether they count for a moderated session.
    pub moderates: bool,
    /// Unix milliseconds after which the pass opens nothing.
    pub expires_ms: i64,
}

fn mac(key: &Key, body: &str) -> Option<Hmac<Sha256>> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.signing()).ok()?;
    mac.update(b"breakglass watch pass\n");
    mac.update(body.as_bytes());
    Some(mac)
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

impl Pass {
    /// The pass as the header carries it: its JSON in base64url, a dot, its MAC in hex.
    pub fn seal(&self, key: &Key) -> Option<String> {
        let json = serde_json::to_string(self).ok()?;
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        let tag = hex::encode(mac(key, &body)?.finalize().into_bytes());
        Some(format!("{body}.{tag}"))
    }

    /// The pass in `sealed` if its MAC is right, it is for session `id` and it has not
    /// expired; why not otherwise.
    pub fn open(key: &Key, sealed: &str, id: Uuid) -> Result<Pass, &'static str> {
        let (body, tag) = sealed.split_once('.').ok_or("not a watch pass")?;
        let tag = hex::decode(tag).map_err(|_| "not a watch pass")?;
        mac(key, body)
            .ok_or("no key")?
            .verify_slice(&tag)
            .map_err(|_| "the watch pass is not signed by this deployment's key")?;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| "not a watch pass")?;
        let pass: Pass = serde_json::from_slice(&json).map_err(|_| "not a watch pass")?;
        if pass.session != id {
            return Err("the watch pass is for another session");
        }
        if pass.expires_ms < now_ms() {
            return Err("the watch pass expired");
        }
        Ok(pass)
    }
}

/// A close frame from the serving replica, as the browser gets it.
fn close_of(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> Message {
    match frame {
        Some(f) => Message::Close(Some(CloseFrame {
            code: u16::from(f.code),
            reason: f.reason.as_str().into(),
        })),
        None => close_frame(close::MOVED, "the replica serving the terminal closed"),
    }
}

impl Watching {
    /// Forwards `watcher` to the replica serving the terminal, until either side closes or
    /// the hold here ends.
    pub(super) async fn forward(
        &self,
        mut ws: WebSocket,
        watcher: Watcher,
        host: Option<HeaderValue>,
        mut hold: Hold,
    ) {
        let id = watcher.id;
        let at = match self.recorder.served_at(id).await {
            Ok(Some(url)) => url,
            Ok(None) => {
                let why = "this session's terminal is not open on any replica that says where it is reached; try again when the requester's terminal is open";
                let _ = ws.send(close_frame(close::MOVED, why)).await;
                return;
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "watch: cannot read who serves the terminal");
                let why = "the server cannot read the session now";
                let _ = ws.send(close_frame(close::RELAY_ERROR, why)).await;
                return;
            }
        };
        let pass = Pass {
            session: id,
            name: watcher.name.clone(),
            moderates: watcher.moderates,
            expires_ms: now_ms().saturating_add(PASS_LIFETIME.as_millis() as i64),
        };
        let upstream = match self.connect(&at, id, &pass, host).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(%id, replica = %at, error = %e, "watch: cannot reach the replica serving the terminal");
                let why = "the replica serving this terminal cannot be reached from this one";
                let _ = ws.send(close_frame(close::RELAY_ERROR, why)).await;
                return;
            }
        };
        tracing::info!(%id, watcher = %watcher.name, replica = %at, "watching through another replica");
        let (mut up_sink, mut up) = upstream.split();
        let (mut sink, mut stream) = ws.split();
        let last: Message = loop {
            if let Some(why) = hold.ended_now() {
                break close_frame(close::REVOKED, &why);
            }
            tokio::select! {
                msg = up.next() => match msg {
                    Some(Ok(Upstream::Binary(b))) => {
                        if sink.send(Message::Binary(b)).await.is_err() {
                            break close_frame(1001, "browser gone");
                        }
                    }
                    Some(Ok(Upstream::Close(frame))) => break close_of(frame),
                    Some(Ok(_)) => {}
                    None | Some(Err(_)) => break close_of(None),
                },
                msg = stream.next() => match msg {
                    // Read and dropped, as on the serving replica.
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break close_frame(1000, "closed by the browser"),
                    Some(Ok(_)) => {}
                },
                why = hold.ended() => break close_frame(close::REVOKED, &why),
            }
        };
        let _ = up_sink
            .send(Upstream::Close(Some(
                tokio_tungstenite::tungstenite::protocol::CloseFrame {
                    code: CloseCode::Normal,
                    reason: "".into(),
                },
            )))
            .await;
        let _ = sink.send(last).await;
    }

    async fn connect(
        &self,
        at: &url::Url,
        id: Uuid,
        pass: &Pass,
        host: Option<HeaderValue>,
    ) -> anyhow::Result<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    > {
        let mut url = at.join(&format!("/api/breakglass/replica/watch/{id}"))?;
        let scheme = if at.scheme() == "https" { "wss" } else { "ws" };
        url.set_scheme(scheme)
            .map_err(|()| anyhow::anyhow!("cannot make a WebSocket URL of {at}"))?;
        let mut req = url.as_str().into_client_request()?;
        let sealed = pass
            .seal(&self.key)
            .ok_or_else(|| anyhow::anyhow!("cannot sign the pass"))?;
        req.headers_mut().insert(PASS_HEADER, sealed.parse()?);
        // The serving replica answers only to the public host, as this one does.
        if let Some(h) = host {
            req.headers_mut().insert(axum::http::header::HOST, h);
        }
        let (socket, _) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio_tungstenite::connect_async(req),
        )
        .await??;
        Ok(socket)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_opens_only_its_session_while_fresh_under_its_key() {
        let key = Key::generate();
        let id = Uuid::now_v7();
        let pass = Pass {
            session: id,
            name: "bob".into(),
            moderates: true,
            expires_ms: now_ms() + 30_000,
        };
        let sealed = pass.seal(&key).unwrap();
        assert_eq!(Pass::open(&key, &sealed, id), Ok(pass.clone()));
        assert!(Pass::open(&key, &sealed, Uuid::now_v7()).is_err());
        assert!(Pass::open(&Key::generate(), &sealed, id).is_err());
        // A pass whose claims were changed (carol instead of bob) fails its MAC.
        let (_, tag) = sealed.split_once('.').unwrap();
        let forged = Pass {
            name: "carol".into(),
            ..pass.clone()
        };
        let body = forged.seal(&key).unwrap();
        let (forged_body, _) = body.split_once('.').unwrap();
        assert!(Pass::open(&key, &format!("{forged_body}.{tag}"), id).is_err());
        let stale = Pass {
            expires_ms: now_ms() - 1,
            ..pass
        };
        assert_eq!(
            Pass::open(&key, &stale.seal(&key).unwrap(), id),
            Err("the watch pass expired")
        );
        assert!(Pass::open(&key, "garbage", id).is_err());
    }
}
