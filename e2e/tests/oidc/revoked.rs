//! A group taken away at the provider while the person works: no request of theirs is needed
//! for it to count. The server asks the provider again when the login's check is due (here every
//! 2 s) as part of checking what the person holds open, and within two seconds of hearing the
//! new groups their terminal closes saying why, their live stream ends, and their session ends
//! `Revoked` (with its cleanup, as any end).

use std::time::Duration;

use anyhow::anyhow;
use breakglass_e2e::agent::Agent;
use breakglass_e2e::hydra::Persona;
use breakglass_e2e::wait_until;
use breakglass_e2e::Identity;
use breakglass_shared::terminal::{close, Frame};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::Setup;

/// `ground`, on the shared control plane: only SREs may request there.
fn ground(kubeconfig: &std::path::Path) -> String {
    format!(
        "\n[[environments]]\nname = \"ground\"\ntier = \"ground\"\n\
         cluster = {{ kind = \"kubeconfig\", path = \"{}\" }}\n\
         [environments.permissions]\n\
         \"tower.breakglass.request\" = {{ groups = [\"sre\"] }}\n\
         \"tower.breakglass.approve\" = {{ groups = [\"sre\"] }}\n",
        kubeconfig.display()
    )
}

#[tokio::test]
async fn a_group_taken_away_ends_the_terminal_the_stream_and_the_session() -> anyhow::Result<()> {
    let rig = super::rig::Rig::new("bg-oidc", "ground", &[]).await;
    rig.bare_pod("shell").await;
    let kubeconfig = rig.cp.kubeconfig_path(Identity::BreakglassSa)?;
    let extra = format!(
        "scopes = [\"openid\", \"profile\", \"email\", \"offline_access\"]\n\
         claims_refresh_seconds = 2\n{}",
        ground(kubeconfig)
    );
    let s = Setup::start_with(None, &extra, "sweep_interval_seconds = 1").await?;
    let agent = Agent::new()?;
    let me = s.sign_in(&agent, Persona::new("frank", &["sre"])).await?;
    let csrf = me["csrf_token"].as_str().ok_or_else(|| anyhow!("{me}"))?;
    let body = json!({
        "environment": "ground", "namespace": rig.ns, "pod": "shell", "mode": "live",
        "reason": "checking what a group taken away ends", "duration_minutes": 30,
    });
    let (status, v) = agent
        .post_json(&s.url("/api/breakglass/sessions"), csrf, &body)
        .await?;
    assert_eq!(status, 201, "{v}");
    let id = v["id"].as_str().ok_or_else(|| anyhow!("{v}"))?.to_string();
    let session = s.url(&format!("/api/breakglass/sessions/{id}"));
    wait_until("the session is active", Duration::from_secs(60), || async {
        let (_, v) = agent.get_json(&session).await?;
        Ok((v["session"]["state"] == "Active").then_some(()))
    })
    .await
    .map_err(|e| anyhow!("{e}\n{}", s.server.log_text()))?;

    // The terminal, attached.
    let cookie = agent.cookies_for(&s.server.url);
    let mut req = session
        .replace("http://", "ws://")
        .replace(&id, &format!("{id}/terminal"))
        .into_client_request()?;
    req.headers_mut().insert("cookie", cookie.parse()?);
    req.headers_mut().insert("origin", s.server.url.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    match ws.next().await {
        Some(Ok(Message::Binary(b))) => assert!(
            matches!(Frame::decode(&b), Ok(Frame::Status(ref st)) if st.message == "attached")
        ),
        other => panic!("no attach: {other:?}"),
    }
    // The live stream.
    let events = reqwest::Client::new()
        .get(s.url("/api/breakglass/events"))
        .header("cookie", &cookie)
        .send()
        .await?;
    assert_eq!(events.status(), 200);
    let mut events = events.bytes_stream();

    // The provider takes frank out of `sre`; the next check hears it.
    s.provider
        .script(&s.client, Persona::new("frank", &["engineers"]));
    let (code, reason) = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(msg) = ws.next().await {
            if let Ok(Message::Close(Some(c))) = msg {
                return (u16::from(c.code), c.reason.to_string());
            }
        }
        (1006, String::new())
    })
    .await
    .map_err(|_| anyhow!("the terminal stayed open\n{}", s.server.log_text()))?;
    assert_eq!(code, close::REVOKED, "{reason}");
    assert!(
        reason.contains("no longer hold tower.breakglass.request in ground"),
        "{reason}"
    );
    let closed = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(_)) = events.next().await {}
    })
    .await
    .map_err(|_| anyhow!("the live stream outlived the terminal by 2 s"))?;
    eprintln!("the stream ended {:?} after the terminal", closed.elapsed());

    // Frank may no longer see `ground`; an SRE sees how the session ended.
    let (status, _) = agent.get_json(&session).await?;
    assert_eq!(status, 404);
    let sre = Agent::new()?;
    s.sign_in(&sre, Persona::new("grace", &["sre"])).await?;
    let ended: Value = wait_until("the session ends", Duration::from_secs(60), || async {
        let (_, v) = sre.get_json(&session).await?;
        Ok((v["session"]["state"] == "Ended").then_some(v))
    })
    .await?;
    assert_eq!(ended["session"]["end_reason"]["kind"], "Revoked", "{ended}");
    Ok(())
}
