//! Standard Webhooks: the body is the payload as stored; `webhook-id` is the delivery's id (the
//! same on every retry, so a receiver deduplicates), `webhook-timestamp` the attempt's time in
//! seconds, and `webhook-signature` one `v1,<base64 HMAC-SHA256 of id.timestamp.body>` per
//! configured secret, separated by spaces (a receiver that knows either key accepts it while
//! the keys rotate).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{Answer, Failure};
use crate::config::SigningKey;

/// The `webhook-signature` header value of `body` sent as `id` at `timestamp`.
pub fn signature(secrets: &[SigningKey], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|key| {
            let mut mac = Hmac::<Sha256>::new_from_slice(key.expose()).ok()?;
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.to_string().as_bytes());
            mac.update(b".");
            mac.update(body);
            Some(format!(
                "v1,{}",
                base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
            ))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// POSTs `body` to `url`, signed with each of `secrets` (unsigned when there are none).
pub async fn send(
    http: &reqwest::Client,
    url: &url::Url,
    secrets: &[SigningKey],
    id: &str,
    body: &str,
) -> Result<Answer, Failure> {
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut req = http
        .post(url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string());
    // A SIEM endpoint may take unsigned events (it has no key configured).
    if !secrets.is_empty() {
        req = req.header(
            "webhook-signature",
            signature(secrets, id, timestamp, body.as_bytes()),
        );
    }
    let req = req.body(body.to_string());
    super::http_answer(req).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference implementations.
    #[test]
    fn signs_as_the_specification_example() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let sig = signature(
            &[SigningKey::new(key)],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
