//! The server's Prometheus metrics, registered once per server context and
//! handed to the parts that count (the lifecycle, the recorder, the sweep, HTTP).

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// Prometheus metrics of one server.
#[derive(Clone)]
pub struct Metrics {
    /// Registry served at `/metrics`.
    pub registry: Registry,
    /// HTTP requests by method, surface (api, ops, frontend) and status.
    pub requests: IntCounterVec,
    /// Session transitions by event kind.
    pub transitions: IntCounterVec,
    /// Open SSE streams.
    pub sse_open: IntGauge,
    /// Sweep actions by kind.
    pub sweep_actions: IntCounterVec,
    /// 1 while this replica holds the sweep lease.
    pub sweep_leader: IntGauge,
    /// Rounds of the sweep's loop, leading or not: each asked for the lease once, so a test
    /// can wait for rounds (not seconds) before it says who did not lead.
    pub sweep_rounds: IntCounter,
    /// Attempts to anchor a final recording hash, by outcome (anchored, failed).
    pub anchors: IntCounterVec,
    /// Notification deliveries by receiver and outcome: `sent`, `failed` (an attempt that
    /// will be retried), `dead` (given up after the retry window).
    pub notifications: IntCounterVec,
    /// Seconds the oldest undelivered notification has waited (0 with none).
    pub notifications_oldest_pending: IntGauge,
    /// Notifications waiting for delivery.
    pub notifications_pending: IntGauge,
}

impl Metrics {
    /// Registers every metric in a new registry.
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("breakglass_http_requests_total", "HTTP requests served"),
            &["method", "surface", "status"],
        )?;
        let transitions = IntCounterVec::new(
            Opts::new(
                "breakglass_transitions_total",
                "Session state changes applied",
            ),
            &["kind"],
        )?;
        let sse_open = IntGauge::new("breakglass_sse_streams_open", "Open event streams")?;
        let sweep_actions = IntCounterVec::new(
            Opts::new(
                "breakglass_sweep_actions_total",
                "Actions taken by the sweep",
            ),
            &["action"],
        )?;
        let sweep_leader = IntGauge::new("breakglass_sweep_leader", "1 while this replica sweeps")?;
        registry.register(Box::new(sweep_leader.clone()))?;
        let sweep_rounds = IntCounter::new(
            "breakglass_sweep_rounds_total",
            "Rounds of the sweep's loop, each asking for the lease once",
        )?;
        registry.register(Box::new(sweep_rounds.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(transitions.clone()))?;
        registry.register(Box::new(sse_open.clone()))?;
        registry.register(Box::new(sweep_actions.clone()))?;
        let anchors = IntCounterVec::new(
            Opts::new(
                "breakglass_recording_anchors_total",
                "Final recording hashes submitted to the transparency log, by outcome",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(anchors.clone()))?;
        let notifications = IntCounterVec::new(
            Opts::new(
                "breakglass_notifications_total",
                "Notification delivery attempts by receiver and outcome (sent, failed, dead)",
            ),
            &["receiver", "outcome"],
        )?;
        registry.register(Box::new(notifications.clone()))?;
        let notifications_oldest_pending = IntGauge::new(
            "breakglass_notifications_oldest_pending_seconds",
            "Age of the oldest notification not delivered yet",
        )?;
        registry.register(Box::new(notifications_oldest_pending.clone()))?;
        let notifications_pending = IntGauge::new(
            "breakglass_notifications_pending",
            "Notifications waiting for delivery",
        )?;
        registry.register(Box::new(notifications_pending.clone()))?;
        Ok(Metrics {
            notifications,
            notifications_oldest_pending,
            notifications_pending,
            anchors,
            registry,
            requests,
            transitions,
            sse_open,
            sweep_actions,
            sweep_leader,
            sweep_rounds,
        })
    }
}
