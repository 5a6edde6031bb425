//! Reading the server's own Prometheus registry in tests, so a metric is asserted by the value
//! a scrape would show rather than by the code path that sets it.

use super::TestServer;

/// The sum of a family's samples whose labels include every pair in `labels` (counters and
/// gauges alike; 0 when nothing matches).
pub fn sample(s: &TestServer, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.ctx
        .metrics
        .registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(prometheus::proto::MetricFamily::get_metric)
        .filter(|m| {
            labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })
        // A sample is one kind or the other; the kind it is not reads 0.
        .map(|m| m.get_counter().get_value() + m.get_gauge().get_value())
        .sum()
}

/// Waits (up to 30 s) until `check` holds for the sample; the last value on timeout.
pub async fn sample_until(
    s: &TestServer,
    name: &str,
    labels: &[(&str, &str)],
    check: impl Fn(f64) -> bool,
) -> Result<f64, f64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = sample(s, name, labels);
        if check(v) {
            return Ok(v);
        }
        if std::time::Instant::now() > deadline {
            return Err(v);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
