//! Delivering the outbox: a worker on every replica claims due rows (each row has one worker
//! at a time: `store/outbox.rs`), sends each to its receiver within the configured timeout,
//! and records the outcome: sent, retried later with exponential backoff, or dead with its
//! last error once the retry window has passed.
//!
//! Nothing here is on a session's path: the lifecycle only writes rows and wakes the worker,
//! so a slow, failing or hanging receiver costs the worker's time, never a request's.

pub mod email;
pub mod slack;
pub mod syslog;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use breakglass_shared::notify::Notification;
use futures::StreamExt;
use time::OffsetDateTime;
use tracing::Instrument;

use crate::config::{Config, Receiver, SiemSink, Target};
use crate::metrics::Metrics;
use crate::outbox::{unix_ms, Outbox};
use crate::store::{Attempt, Delivery, Store};

/// What a receiver answered to a delivery it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status or SMTP reply code.
    pub status: Option<i64>,
    /// The start of what it said.
    pub body: String,
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The receiver's status, when it answered.
    pub status: Option<i64>,
    /// What went wrong.
    pub error: String,
    /// Whether trying again cannot help (a mail without recipients).
    pub permanent: bool,
}

impl Failure {
    /// A failure worth retrying.
    pub fn retry(status: Option<i64>, error: impl Into<String>) -> Failure {
        Failure {
            status,
            error: error.into(),
            permanent: false,
        }
    }

    /// A failure no retry mends.
    pub fn permanent(status: Option<i64>, error: impl Into<String>) -> Failure {
        Failure {
            status,
            error: error.into(),
            permanent: true,
        }
    }
}

/// How much of a receiver's answer is kept.
const ANSWER_KEPT: usize = 300;

/// Sends an HTTP request and reads its answer: a 2xx is taken, anything else fails with the
/// status and the start of the body.
pub(crate) async fn http_answer(req: reqwest::RequestBuilder) -> Result<Answer, Failure> {
    let resp = req.send().await.map_err(|e| {
        if e.is_timeout() {
            Failure::retry(None, "the receiver did not answer in time (timed out)")
        } else {
            // The client's error names the URL, and a receiver's URL can be its secret (a
            // Slack webhook's is): what is kept, shown and logged says what failed without it.
            let e = e.without_url();
            Failure::retry(None, format!("cannot reach the receiver: {e}"))
        }
    })?;
    let status = i64::from(resp.status().as_u16());
    let ok = resp.status().is_success();
    let body: String = resp
        .text()
        .await
        .unwrap_or_default()
        .chars()
        .take(ANSWER_KEPT)
        .collect();
    if ok {
        Ok(Answer {
            status: Some(status),
            body,
        })
    } else {
        Err(Failure::retry(
            Some(status),
            format!("the receiver answered {status}: {body}"),
        ))
    }
}

/// Sends notifications to receivers (the worker's and `notify test`'s one way of sending).
pub struct Sender {
    config: Arc<Config>,
    http: reqwest::Client,
}

impl Sender {
    /// A sender under `config`'s timeout; HTTP redirects are not followed (a receiver's URL is
    /// where its messages go, not where it points).
    pub fn new(config: Arc<Config>) -> Result<Sender, reqwest::Error> {
        let timeout = config.notifications.timeout;
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("breakglass-notifications/1")
            .build()?;
        Ok(Sender { config, http })
    }

    /// Sends `note` (stored as `payload`) to `receiver` as delivery `id`.
    pub async fn send(
        &self,
        receiver: &Receiver,
        id: &str,
        note: &Notification,
        payload: &str,
    ) -> Result<Answer, Failure> {
        let timeout = self.config.notifications.timeout;
        let sending = async {
            match &receiver.target {
                Target::Webhook { url, secrets } => {
                    webhook::send(&self.http, url, secrets, id, payload).await
                }
                Target::Slack { url } => slack::send(&self.http, url.expose(), note).await,
                Target::Siem(sink) => {
                    // `notify test`: the session's first OCSF event, as the SIEM would get it.
                    let event = breakglass_shared::ocsf::events(&note.session, None)
                        .into_iter()
                        .next()
                        .unwrap_or_default();
                    self.send_siem(sink, id, &event.to_string()).await
                }
                Target::Email { .. } => {
                    let Some(smtp) = &self.config.notifications.smtp else {
                        return Err(Failure::permanent(
                            None,
                            "no [notifications.smtp] configured",
                        ));
                    };
                    let to = email::recipients(&self.config, &receiver.target, note);
                    email::send(smtp, timeout, id, &to, note).await
                }
            }
        };
        // Each transport bounds itself; this is the bound over all of it (DNS included).
        tokio::time::timeout(timeout + Duration::from_secs(1), sending)
            .await
            .unwrap_or_else(|_| {
                Err(Failure::retry(
                    None,
                    format!("the receiver did not answer within {} s", timeout.as_secs()),
                ))
            })
    }
}

impl Sender {
    /// Sends one OCSF event (JSON) to a SIEM as delivery `id`.
    pub async fn send_siem(
        &self,
        sink: &SiemSink,
        id: &str,
        event: &str,
    ) -> Result<Answer, Failure> {
        match sink {
            SiemSink::Http { url, secrets } => {
                webhook::send(&self.http, url, secrets, id, event).await
            }
            SiemSink::Syslog {
                host,
                port,
                tls,
                ca_pem,
            } => {
                let timeout = self.config.notifications.timeout;
                syslog::send(host, *port, *tls, ca_pem.as_deref(), timeout, event).await
            }
        }
    }
}

/// The `webhook-id` of a delivery.
pub fn webhook_id(d: &Delivery) -> String {
    format!("msg_{}", d.id.simple())
}

/// Rows claimed per round.
const BATCH: i64 = 32;
/// Deliveries in flight at once per worker.
const IN_FLIGHT: usize = 8;
/// How often a worker looks for rows other replicas wrote (its own commits wake it at once).
const POLL: Duration = Duration::from_secs(1);
/// How long a worker lets rows gather after a wake: a burst of changes (an incident's worth of
/// requests, a sweep) becomes one claim and a few writes instead of a round per change, which
/// is most of what the outbox added to a change on SQLite's single writer. Nobody reads a
/// notification within a few milliseconds.
const GATHER: Duration = Duration::from_millis(25);
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// When to try again after `attempts` attempts, from `first` doubling, at most [`MAX_BACKOFF`].
pub fn backoff(first: Duration, attempts: i64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    first
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(MAX_BACKOFF)
}

/// When to try delivery `d` again after a failed attempt at `now_ms`: after [`backoff`], or
/// `None` (dead) when that falls past `window` from when it was written.
pub fn retry_at(first: Duration, window: Duration, d: &Delivery, now_ms: i64) -> Option<i64> {
    let pause = i64::try_from(backoff(first, d.attempts).as_millis()).unwrap_or(i64::MAX);
    let window = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let next = now_ms.saturating_add(pause);
    (next < d.created_at_ms.saturating_add(window)).then_some(next)
}

/// One replica's delivery worker.
pub struct Worker {
    /// The outbox.
    pub store: Arc<dyn Store>,
    /// Receivers and retries.
    pub config: Arc<Config>,
    /// Wakes the worker after local commits.
    pub outbox: Arc<Outbox>,
    /// Where deliveries are counted.
    pub metrics: Metrics,
    /// This worker's name on its claims.
    pub holder: String,
}

impl Worker {
    /// Delivers until the process ends.
    pub async fn run(self) {
        let sender = match Sender::new(self.config.clone()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot build the notification client; nothing is delivered");
                return;
            }
        };
        // The gauges are read from the table at most once a poll: a query per delivery round
        // was a tenth of what the outbox added to a session change on SQLite.
        let mut reported: Option<std::time::Instant> = None;
        loop {
            let claimed = self.round(&sender).await;
            if reported.is_none_or(|at| at.elapsed() >= POLL) {
                self.report().await;
                reported = Some(std::time::Instant::now());
            }
            if claimed < BATCH {
                tokio::select! {
                    () = self.outbox.woken() => tokio::time::sleep(GATHER).await,
                    () = tokio::time::sleep(POLL) => {}
                }
            }
        }
    }

    /// Claims and delivers one batch; how many rows it claimed.
    pub async fn round(&self, sender: &Sender) -> i64 {
        let now = OffsetDateTime::now_utc();
        let timeout = self.config.notifications.timeout;
        // A claim outlives the last wave of attempts (and the write of its outcome) by a
        // margin, so no other worker takes a row this one is still trying; a worker that died
        // meanwhile leaves it to run out.
        let waves = (BATCH as u32).div_ceil(IN_FLIGHT as u32);
        let until = now + timeout.saturating_mul(waves + 1) + Duration::from_secs(10);
        let due = match self
            .store
            .claim_deliveries(&self.holder, unix_ms(now), unix_ms(until), BATCH)
            .await
        {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim notifications; trying again shortly");
                return 0;
            }
        };
        let claimed = i64::try_from(due.len()).unwrap_or(BATCH);
        // Outcomes are written as they come, whatever has come in one transaction: a hanging
        // receiver holds back nobody else's.
        let mut outcomes = futures::stream::iter(due)
            .map(|d| {
                let span = tracing::info_span!("notification", id = %d.id, receiver = %d.receiver);
                self.deliver(sender, d).instrument(span)
            })
            .buffer_unordered(IN_FLIGHT)
            .ready_chunks(IN_FLIGHT);
        while let Some(chunk) = outcomes.next().await {
            self.finish(&chunk).await;
        }
        claimed
    }

    /// Attempts one delivery; its id and what became of it.
    async fn deliver(&self, sender: &Sender, d: Delivery) -> (uuid::Uuid, Attempt) {
        let outcome = match self.config.notifications.receiver(&d.receiver) {
            None => Err(Failure::permanent(
                None,
                format!("the receiver `{}` is no longer configured", d.receiver),
            )),
            // A SIEM's row holds its OCSF event, sent as it is.
            Some(Receiver {
                target: Target::Siem(sink),
                ..
            }) => sender.send_siem(sink, &webhook_id(&d), &d.payload).await,
            Some(r) => match serde_json::from_str::<Notification>(&d.payload) {
                Err(e) => Err(Failure::permanent(None, format!("unreadable payload: {e}"))),
                Ok(note) => sender.send(r, &webhook_id(&d), &note, &d.payload).await,
            },
        };
        let now = OffsetDateTime::now_utc();
        let attempt = match outcome {
            Ok(a) => {
                self.count(&d.receiver, "sent");
                Attempt::Sent(a.status)
            }
            Err(f) => {
                let n = &self.config.notifications;
                let next = (!f.permanent)
                    .then(|| retry_at(n.first_retry, n.retry_for, &d, unix_ms(now)))
                    .flatten();
                let retry = next.is_some();
                self.count(&d.receiver, if retry { "failed" } else { "dead" });
                tracing::warn!(error = %f.error, attempts = d.attempts, retry, "notification not delivered");
                Attempt::Failed {
                    status: f.status,
                    error: f.error,
                    retry_at_ms: next,
                }
            }
        };
        (d.id, attempt)
    }

    /// Writes the outcomes, retrying while the database is away (a lost write means the rows
    /// are sent again under the same `webhook-id` once their claims run out).
    async fn finish(&self, outcomes: &[(uuid::Uuid, Attempt)]) {
        use backon::{ExponentialBuilder, Retryable};
        let write = || async {
            let now = unix_ms(OffsetDateTime::now_utc());
            self.store
                .finish_deliveries(&self.holder, outcomes, now)
                .await
        };
        let policy = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(5))
            .with_max_times(8);
        match write.retry(policy).await {
            Ok(held) if held == outcomes.len() as u64 => {}
            Ok(held) => tracing::info!(
                held,
                written = outcomes.len(),
                "some claims ran out before their outcomes were written"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot record the outcomes; the rows are delivered again");
            }
        }
    }

    fn count(&self, receiver: &str, outcome: &str) {
        self.metrics
            .notifications
            .with_label_values(&[receiver, outcome])
            .inc();
    }

    async fn report(&self) {
        if let Ok(stats) = self.store.outbox_stats().await {
            let now = unix_ms(OffsetDateTime::now_utc());
            self.metrics.notifications_pending.set(stats.pending);
            self.metrics.notifications_oldest_pending.set(
                stats
                    .oldest_pending_ms
                    .map_or(0, |t| (now - t).max(0) / 1000),
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_the_first_and_stops_at_ten_minutes() {
        let first = Duration::from_secs(2);
        let pauses: Vec<u64> = (1..=6).map(|a| backoff(first, a).as_secs()).collect();
        assert_eq!(pauses, [2, 4, 8, 16, 32, 64]);
        assert_eq!(backoff(first, 40), MAX_BACKOFF);
        assert_eq!(backoff(first, 0), first);
    }

    #[tokio::test]
    async fn an_unreachable_receiver_is_said_so_without_its_url() {
        // Nothing listens on port 1; the path is a webhook's secret.
        let url = "http://127.0.0.1:1/services/T0001/B0001/s3cr3tT0k3n";
        let failure = http_answer(reqwest::Client::new().post(url))
            .await
            .unwrap_err();
        assert!(
            failure.error.starts_with("cannot reach the receiver"),
            "{}",
            failure.error
        );
        for part in ["s3cr3tT0k3n", "/services/", "127.0.0.1:1"] {
            assert!(!failure.error.contains(part), "{}", failure.error);
        }
    }

    #[test]
    fn a_retry_past_the_window_is_none_and_the_row_dies() {
        let d = Delivery {
            id: uuid::Uuid::nil(),
            event_key: "k".into(),
            receiver: "r".into(),
            kind: "requested".into(),
            session_id: uuid::Uuid::nil(),
            payload: "{}".into(),
            state: "pending".into(),
            attempts: 3,
            next_at_ms: 0,
            claimed_by: None,
            claimed_until_ms: 0,
            created_at_ms: 1_000_000,
            sent_at_ms: None,
            last_status: None,
            last_error: None,
        };
        let (first, window) = (Duration::from_secs(2), Duration::from_secs(60));
        // The third attempt failed 10 s in: the next is 8 s later, inside the minute.
        assert_eq!(retry_at(first, window, &d, 1_010_000), Some(1_018_000));
        // 55 s in, 8 s more would pass the minute: dead.
        assert_eq!(retry_at(first, window, &d, 1_055_000), None);
    }
}
