//! `player-seek`: the recording player in headless Chromium, seeking to random moments of a
//! long cast, timed in the page from the seek bar's `input` event until xterm's rows show the
//! screen of that moment; against replaying the cast from the start to the same moment into
//! an xterm of the same size in the same page.

use std::path::Path;
use std::time::Duration;

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::browser::{Browser, ChromeDriver};
use breakglass_e2e::server::{config_toml, install_guardrails, ServerProcess};
use breakglass_e2e::{wait_for_pod_running, wait_until, ControlPlane, Identity};
use fantoccini::wd::TimeoutConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};

use super::cast::{self, Cast, STEP};

/// Seeks into the player: sets the seek bar to `t` and resolves with `[total, handler,
/// parsed, renders]`: the milliseconds until the last non-empty row of the player's xterm is
/// `expected` (the figure); until the `input` event's handler returned (the wasm built the
/// seek and queued it to xterm); until xterm last reported output parsed (`onWriteParsed`)
/// before that; and how many times xterm rendered (`onRender`) meanwhile.
const SEEK_JS: &str = r#"
const [t, expected, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const screen = document.querySelector('[data-testid=player] .player-screen');
const rows = screen.querySelector('.xterm-rows');
const shows = () => {
  const r = [...rows.children].map(d => d.textContent.replace(/\u00a0/g, ' ').trim()).filter(s => s);
  return r.length > 0 && r[r.length - 1] === expected;
};
const bar = document.querySelector('[data-testid=player] .seek-bar');
let parsed = null, renders = 0, subs = [];
const obs = new MutationObserver(() => {
  if (shows()) {
    obs.disconnect();
    subs.forEach(d => d.dispose());
    done([performance.now() - start, handler, parsed, renders]);
  }
});
obs.observe(rows, { childList: true, subtree: true, characterData: true });
const proto = window.XtermTerminal.prototype;
const write = proto.write;
let term = null;
proto.write = function (...a) {
  if (!term) {
    term = this;
    subs.push(term.onWriteParsed(() => { parsed = performance.now() - start; }));
    subs.push(term.onRender(() => { renders += 1; }));
  }
  return write.apply(this, a);
};
const start = performance.now();
bar.value = String(t);
bar.dispatchEvent(new Event('input', { bubbles: true }));
const handler = performance.now() - start;
proto.write = write;
"#;

/// `BENCH_SEEK_WARM=xterm`: before the first seek, a throwaway xterm of the same size in the
/// same page is given `arguments[0]` (output of the cast) and drawn, then removed; it shares
/// xterm.js's code, not the player's terminal. Resolves once drawn and gone.
const WARM_OTHER_JS: &str = r#"
const [data, cols, rows, done] = [arguments[0], arguments[1], arguments[2], arguments[arguments.length - 1]];
const host = document.createElement('div');
host.style.cssText = 'position:fixed;left:0;top:0;z-index:9999;background:#000';
document.body.appendChild(host);
const term = new window.XtermTerminal({ cols, rows, scrollback: 1000, disableStdin: true, fontSize: 14 });
term.open(host);
term.write(data, () => requestAnimationFrame(() => requestAnimationFrame(() => {
  term.dispose(); host.remove(); done(true);
})));
"#;

/// Prepares the baseline: the cast's output events as JS strings (parsed by the browser's
/// JSON.parse, not timed) and a second xterm of the cast's size, in view above the player.
const BASELINE_SETUP_JS: &str = r#"
const [url, cols, rows, done] = [arguments[0], arguments[1], arguments[2], arguments[arguments.length - 1]];
fetch(url, { credentials: 'same-origin' }).then(r => r.text()).then(text => {
  const outs = [];
  for (const line of text.split('\n').slice(1)) {
    if (!line) continue;
    const e = JSON.parse(line);
    if (e[1] === 'o') outs.push(e[2]);
  }
  const host = document.createElement('div');
  host.id = 'bench-baseline';
  host.style.cssText = 'position:fixed;left:0;top:0;z-index:9999;background:#000';
  document.body.appendChild(host);
  const term = new window.XtermTerminal({ cols, rows, scrollback: 1000, disableStdin: true, fontSize: 14 });
  term.open(host);
  window.__bench = { outs, term, host };
  done(outs.length);
}, e => done('error: ' + e));
"#;

/// The baseline of one moment: a reset terminal, then every output event up to `k` written
/// at once; resolves with the milliseconds until its last non-empty row is `expected`.
const BASELINE_JS: &str = r#"
const [k, expected, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const { outs, term, host } = window.__bench;
const data = outs.slice(0, k + 1).join('');
term.reset();
term.write('', () => requestAnimationFrame(() => {
  const rows = host.querySelector('.xterm-rows');
  const shows = () => {
    const r = [...rows.children].map(d => d.textContent.replace(/\u00a0/g, ' ').trim()).filter(s => s);
    return r.length > 0 && r[r.length - 1] === expected;
  };
  const obs = new MutationObserver(() => {
    if (shows()) { obs.disconnect(); done(performance.now() - start); }
  });
  obs.observe(rows, { childList: true, subtree: true, characterData: true });
  const start = performance.now();
  term.write(data);
}));
"#;

/// The moments sought: `n` reproducible pseudo-random events of a cast with `events`
/// output events, each sought half a step after it (so exactly that event is the last shown).
fn moments(n: usize, events: usize, seed: u64) -> Vec<(usize, f64)> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let k = ((s >> 33) as usize) % events;
            (k, STEP * (k + 1) as f64 + STEP / 2.0)
        })
        .collect()
}

/// One ended session per cast length, its recording replaced on disk by a generated cast of
/// that length; the seeks and their baseline measured on each, largest cast last.
pub async fn run(dist: &Path, driver: &ChromeDriver) {
    // `BENCH_SEEK_MINUTES=60`: only some casts, to look into one.
    let minutes = match std::env::var("BENCH_SEEK_MINUTES") {
        Ok(v) if !v.trim().is_empty() => v.split(',').map(|m| m.trim().parse().unwrap()).collect(),
        _ => bench::sizes(&[5u32, 20, 60], &[1, 2, 3]),
    };
    let points = if bench::short() { 3 } else { 10 };
    let cp = ControlPlane::shared().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, config_toml(&[("ground", "ground", kc)], "")).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    install_guardrails(cp, &cfg, "ground", identity)
        .await
        .unwrap();
    let ns = cp.namespace("bench-seek").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await.unwrap(), ns.name());
    let static_dir = dist.to_string_lossy().into_owned();
    let server = ServerProcess::start(&cfg, &data, &[("BREAKGLASS_STATIC_DIR", &static_dir)])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let mut sessions = Vec::new();
    for (i, &m) in minutes.iter().enumerate() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("seek-{i}")},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        wait_for_pod_running(&pods, &format!("seek-{i}"), Duration::from_secs(30))
            .await
            .unwrap();
        let id = alice
            .create(json!({"environment": "ground", "namespace": ns.name(), "pod": format!("seek-{i}"),
                           "mode": "live", "reason": "benchmarking the recording player", "duration_minutes": 30}))
            .await
            .unwrap();
        alice
            .wait_state(&id, &["Active"], Duration::from_secs(60))
            .await
            .unwrap();
        let (status, body) = alice
            .post(&format!("/sessions/{id}/end"), json!({}))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        alice
            .wait_state(&id, &["Ended"], Duration::from_secs(60))
            .await
            .unwrap();
        let cast = Cast::generate(m);
        cast::check(&cast);
        replace_recording(&data, &id, &cast.text).await;
        sessions.push((m, id, cast));
    }

    let b = Browser::open(driver, "seek", false).await.unwrap();
    b.client
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(300)),
            Some(Duration::from_secs(300)),
            None,
        ))
        .await
        .unwrap();
    b.goto(&server.url).await.unwrap();
    b.dev_sign_in("alice").await.unwrap();
    let last = sessions.len() - 1;
    let warm = std::env::var("BENCH_SEEK_WARM").unwrap_or_default();
    let loads: usize = std::env::var("BENCH_SEEK_LOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for (n, (m, id, cast)) in sessions.iter().enumerate() {
        let at = moments(points, cast.times.len(), 42 + n as u64);
        let mut seeks = Vec::new();
        for load in 0..loads {
            b.goto(&format!("{}/sessions/{id}/recording", server.url))
                .await
                .unwrap();
            b.wait_for_within("[data-testid=player] .player-bar", Duration::from_secs(600))
                .await
                .unwrap();
            b.js("document.querySelector('[data-testid=player] .player-screen').scrollIntoView({block: 'center'})")
                .await
                .unwrap();
            // What priming the player's terminal during the load took (the player's own User
            // Timing entry; none from a build that does not prime).
            let primed = b
                .js("const e = performance.getEntriesByName('breakglass-player-prime'); return e.length ? e[0].duration : null")
                .await
                .unwrap();
            if let Some(ms) = primed.as_f64() {
                println!(
                    "  {m}-minute cast, load {load}: the player primed its terminal in {ms:.1} ms"
                );
            }
            match warm.as_str() {
                "" => {}
                "wait" => tokio::time::sleep(Duration::from_secs(3)).await,
                "xterm" => {
                    b.client
                        .execute_async(
                            WARM_OTHER_JS,
                            vec![
                                json!(cast.output_of(1000..1100)),
                                json!(cast::COLS),
                                json!(cast::ROWS),
                            ],
                        )
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                other => panic!("BENCH_SEEK_WARM={other}: expected wait or xterm"),
            }
            let mut each = Vec::new();
            for &(k, t) in &at {
                assert_eq!(cast.event_at(t), k);
                let v = b
                    .client
                    .execute_async(SEEK_JS, vec![json!(t), json!(Cast::stamp(k))])
                    .await
                    .unwrap();
                let split: Vec<f64> = v
                    .as_array()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
                    .unwrap_or_default();
                assert_eq!(split.len(), 4, "the page answered {v}");
                each.push(split);
            }
            // Each seek in order, so a slow one shows where it fell (the first after the load,
            // or a far jump), with its parts.
            let line: Vec<String> = each
                .iter()
                .map(|s| format!("{:.1} ({:.1}/{:.1}/{})", s[0], s[1], s[2], s[3]))
                .collect();
            println!(
                "  {m}-minute cast, load {load}{}, each seek in ms (handler returned/last parsed/renders): {}",
                if warm.is_empty() {
                    String::new()
                } else {
                    format!(" (warm: {warm})")
                },
                line.join(", ")
            );
            seeks.extend(each.iter().map(|s| s[0]));
        }
        let url = format!("/api/breakglass/sessions/{id}/recording");
        let prepared = b
            .client
            .execute_async(
                BASELINE_SETUP_JS,
                vec![json!(url), json!(cast::COLS), json!(cast::ROWS)],
            )
            .await
            .unwrap();
        assert_eq!(
            prepared.as_u64(),
            Some(cast.times.len() as u64),
            "{prepared}"
        );
        let mut replays = Vec::new();
        for &(k, _) in &at {
            replays.push(ms(b
                .client
                .execute_async(BASELINE_JS, vec![json!(k), json!(Cast::stamp(k))])
                .await
                .unwrap()));
        }
        let (seeks, replays) = (Dist::from_values(seeks), Dist::from_values(replays));
        let size = format!("cast={m}min/{}MB", cast.output_bytes >> 20);
        for (stat, q) in [("p50", 0.5), ("max", 1.0)] {
            let mut fig = Figure::new("player-seek", stat, "ms", replays.p(q), seeks.p(q))
                .size(size.clone())
                .baseline_is("replay from the start to the same point");
            if n == last {
                fig = fig.target(Target::AtMost(50.0));
            }
            bench::report(&fig);
        }
    }
    b.close().await.unwrap();
    ns.delete().await.unwrap();
}

fn ms(v: Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("the page answered {v}, not milliseconds"))
}

/// Puts `text` in place of every stored version of session `id`'s final cast in the local
/// recording store under `data` (the bench's stand-in for an hour of real typing).
async fn replace_recording(data: &Path, id: &str, text: &str) {
    let vdir = data
        .join("recordings")
        .join(format!("sessions/{id}.cast.v"));
    let versions = wait_until(
        "the final cast to be stored",
        Duration::from_secs(60),
        || {
            let vdir = vdir.clone();
            async move {
                let Ok(entries) = std::fs::read_dir(&vdir) else {
                    return Ok(None);
                };
                let files: Vec<_> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.parse::<u64>().is_ok())
                    })
                    .collect();
                Ok((!files.is_empty()).then_some(files))
            }
        },
    )
    .await
    .unwrap();
    for file in versions {
        let mut perms = std::fs::metadata(&file).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&file, perms).unwrap();
        std::fs::write(&file, text).unwrap();
    }
}
