//! Webhooks without I/O: what a valid subscription is, how a body is signed, when the next attempt
//! is due, and which events a changed review gives.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::{outbox::EVENTS, validation::FieldError};

/// The signature header: `sha256=` and the hex HMAC-SHA256 of the body.
pub const SIGNATURE_HEADER: &str = "x-rentcheck-signature";
/// Unix seconds when the attempt was signed; part of what is signed, so a replay can be refused.
pub const TIMESTAMP_HEADER: &str = "x-rentcheck-timestamp";
pub const EVENT_HEADER: &str = "x-rentcheck-event";
/// The delivery's id: the same on every retry of one event to one webhook.
pub const DELIVERY_HEADER: &str = "x-rentcheck-delivery";

/// A generated secret is 32 random bytes as hex; a given one must be at least this long.
pub const MIN_SECRET_CHARS: usize = 16;

/// A subscription as validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    /// None: generate one (and show it once).
    pub secret: Option<String>,
}

/// Checks a subscription, reporting every bad field at once. Only `https://` URLs unless
/// `allow_http`; a URL with credentials in it is refused (they would show on the admin page). One
/// check per subscription field, every error collected.
pub fn validate(body: &Value, allow_http: bool) -> Result<NewWebhook, Vec<FieldError>> {
    let mut errors = Vec::new();
    let url = checked_url(body.get("url"), allow_http, &mut errors);
    let events = checked_events(body.get("events"), &mut errors);
    let secret = match body.get("secret") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() >= MIN_SECRET_CHARS && s.len() <= 512 => Some(s.clone()),
        Some(Value::String(_)) => {
            errors.push(FieldError::new(
                "secret",
                format!("must be {MIN_SECRET_CHARS} to 512 characters (leave it out to have one generated)"),
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new("secret", "must be a string"));
            None
        }
    };
    if errors.is_empty() {
        Ok(NewWebhook { url, events, secret })
    } else {
        Err(errors)
    }
}

/// The subscription's URL, normalised; an error for each way it is not one to post to.
fn checked_url(url: Option<&Value>, allow_http: bool, errors: &mut Vec<FieldError>) -> String {
    match url {
        Some(Value::String(u)) => match reqwest::Url::parse(u.trim()) {
            Ok(parsed) => {
                let scheme_ok = parsed.scheme() == "https" || (allow_http && parsed.scheme() == "http");
                if !scheme_ok {
                    errors.push(FieldError::new(
                        "url",
                        if allow_http {
                            "must be an https:// or http:// URL"
                        } else {
                            "must be an https:// URL (http:// only with RENTCHECK_WEBHOOK_ALLOW_HTTP=true)"
                        },
                    ));
                } else if parsed.host_str().is_none_or(str::is_empty) {
                    errors.push(FieldError::new("url", "must name a host"));
                } else if !parsed.username().is_empty() || parsed.password().is_some() {
                    errors.push(FieldError::new("url", "must not carry a user name or password"));
                } else if u.len() > 2048 {
                    errors.push(FieldError::new("url", "must be at most 2048 characters"));
                }
                parsed.to_string()
            }
            Err(e) => {
                errors.push(FieldError::new("url", format!("is not a URL: {e}")));
                String::new()
            }
        },
        None | Some(Value::Null) => {
            errors.push(FieldError::new("url", "is required"));
            String::new()
        }
        Some(_) => {
            errors.push(FieldError::new("url", "must be a string"));
            String::new()
        }
    }
}

/// The events subscribed to, each once.
fn checked_events(events: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<String> {
    let mut names = Vec::new();
    match events {
        Some(Value::Array(list)) if !list.is_empty() => {
            for e in list {
                match e.as_str() {
                    Some(name) if EVENTS.contains(&name) => {
                        if !names.iter().any(|x| x == name) {
                            names.push(name.to_owned());
                        }
                    }
                    _ => {
                        errors.push(FieldError::new(
                            "events",
                            format!("each must be one of: {}", EVENTS.join(", ")),
                        ));
                        break;
                    }
                }
            }
        }
        _ => errors.push(FieldError::new(
            "events",
            format!("must be a non-empty list of: {}", EVENTS.join(", ")),
        )),
    }
    names
}

/// What kind of non-public address `ip` is, or `None` for a public one. Webhooks go to public
/// addresses only (unless `RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true`): otherwise an admin, or whoever
/// controls a webhook host's DNS, could make rentcheck POST to its own machine or its private
/// network. IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged
/// by that address.
pub fn non_public(ip: std::net::IpAddr) -> Option<&'static str> {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if let Some(v4) = v6.to_ipv4_mapped() {
                return non_public_v4(v4);
            }
            let embedded = |hi: u16, lo: u16| std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if s[..6] == [0; 6] {
                // ::a.b.c.d, the old IPv4-compatible form.
                non_public_v4(embedded(s[6], s[7]))
            } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                non_public_v4(embedded(s[6], s[7]))
            } else if s[0] == 0x2002 {
                non_public_v4(embedded(s[1], s[2]))
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("unique-local")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xffc0 == 0xfec0 {
                Some("site-local")
            } else if s[0] & 0xff00 == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001 {
                Some("private (local NAT64)")
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else if s[0] == 0x2001 && s[1] == 0 {
                Some("Teredo tunnel")
            } else if s[..4] == [0x0100, 0, 0, 0] {
                Some("discard-only")
            } else {
                None
            }
        }
    }
}

fn non_public_v4(ip: std::net::Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if a == 0 {
        // 0.0.0.0 reaches this machine on Linux.
        Some("this-host (0.0.0.0/8)")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if a == 192 && b == 0 && c == 0 {
        Some("IETF protocol assignment")
    } else if ip.is_documentation() {
        Some("documentation")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("benchmarking")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if a >= 240 {
        Some("reserved")
    } else {
        None
    }
}

/// A webhook URL as the audit log keeps it: its scheme, host and port, the rest as `…`. The path
/// of a Slack or Teams webhook is its secret, and the audit log is read by more people than
/// the webhook list.
pub fn url_for_audit(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}/…", parsed.scheme()),
            (Some(host), None) => format!("{}://{host}/…", parsed.scheme()),
            _ => "…".to_owned(),
        },
        Err(_) => "…".to_owned(),
    }
}

/// Why a webhook URL names a non-public host by itself (an IP address in any notation, which
/// the URL parser has already turned into one, or a `localhost` name), or `None`. Names that
/// resolve to one are caught when resolved (`service::create`, and at every delivery).
pub fn address_refusal(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    // The parser writes an IP host in its one canonical form (`2130706433` → `127.0.0.1`).
    let host = parsed.host_str()?;
    if let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        return non_public(ip).map(|kind| private_message(&ip.to_string(), kind));
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    (name == "localhost" || name.ends_with(".localhost")).then(|| private_message(&name, "loopback"))
}

/// The refusal of a webhook address that is not public.
pub fn private_message(address: &str, kind: &str) -> String {
    format!(
        "must reach a public address; {address} is a {kind} address \
         (set RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true to send webhooks inside your network)"
    )
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`: the value of `X-Rentcheck-Signature`, over the body
/// as sent (which carries the attempt's `sent_at`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The wait before attempt `attempts + 1`, after `attempts` failed ones: `base`, then twice as long
/// each time, at most `max`.
pub fn backoff(attempts: u32, base: Duration, max: Duration) -> Duration {
    let doublings = attempts.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << doublings).min(max)
}

/// What became of one attempt, as the delivery keeps it.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptOutcome {
    /// A 2xx answer.
    Delivered(u16),
    /// Another answer (a redirect included: redirects are not followed).
    Refused(u16),
    /// No answer: refused connection, timeout, TLS failure.
    Unreachable(String),
}

impl AttemptOutcome {
    pub fn status_code(&self) -> Option<i32> {
        match self {
            Self::Delivered(c) | Self::Refused(c) => Some(i32::from(*c)),
            Self::Unreachable(_) => None,
        }
    }

    pub fn error(&self) -> Option<String> {
        match self {
            Self::Delivered(_) => None,
            Self::Refused(c) => Some(format!("answered {c}")),
            Self::Unreachable(e) => Some(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_https_urls_unless_http_is_allowed() {
        let body = json!({ "url": "http://hooks.example/x", "events": ["approval.recorded"] });
        let e = validate(&body, false).unwrap_err();
        assert_eq!(e[0].field, "url");
        assert!(e[0].message.contains("https://"), "{}", e[0].message);
        assert!(validate(&body, true).is_ok());
        let ok = validate(
            &json!({ "url": "https://hooks.example/x", "events": ["decision.changed"], "secret": "0123456789abcdef" }),
            false,
        )
        .unwrap();
        assert_eq!(ok.secret.as_deref(), Some("0123456789abcdef"));
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let e = validate(
            &json!({ "url": "ftp://x", "events": ["nope"], "secret": "short" }),
            true,
        )
        .unwrap_err();
        let fields: Vec<_> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["url", "events", "secret"]);
        let e = validate(&json!({ "url": "https://u:p@x.example/", "events": [] }), false).unwrap_err();
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn loopback_private_and_link_local_addresses_are_refused_in_every_notation() {
        for url in [
            "https://127.0.0.1/x",
            "https://127.1/x",
            "https://2130706433/x",
            "https://0x7f000001/x",
            "https://0x7f.0.0.1/x",
            "https://0177.0.0.1/x",
            "https://017700000001/x",
            "https://0.0.0.0/x",
            "https://0/x",
            "https://[::1]/x",
            "https://[::]/x",
            "https://[::ffff:127.0.0.1]/x",
            "https://[::ffff:7f00:1]/x",
            "https://[::127.0.0.1]/x",
            "https://[64:ff9b::a9fe:a9fe]/x",
            "https://[2002:a00:1::]/x",
            "https://10.1.2.3/x",
            "https://172.16.0.1/x",
            "https://192.168.1.1/x",
            "https://3232235777/x",
            "https://169.254.169.254/latest/meta-data/",
            "https://0xa9fea9fe/x",
            "https://[fe80::1]/x",
            "https://[fd00::1]/x",
            "https://[fc00::1]/x",
            "https://100.64.0.1/x",
            "https://localhost/x",
            "https://LOCALHOST./x",
            "https://api.localhost/x",
        ] {
            assert!(address_refusal(url).is_some(), "{url} is not public");
        }
        for url in [
            "https://hooks.example.com/x",
            "https://93.184.215.14/x",
            "https://[2606:4700::6810:84e5]/x",
            "https://1.1.1.1/x",
        ] {
            assert_eq!(address_refusal(url), None, "{url} is public");
        }
        let message = address_refusal("https://2130706433/x").unwrap();
        assert!(
            message.contains("127.0.0.1") && message.contains("loopback"),
            "{message}"
        );
        assert!(message.contains("RENTCHECK_WEBHOOK_ALLOW_PRIVATE"), "{message}");
    }

    #[test]
    fn the_signature_is_an_hmac_of_the_body() {
        // Checked against `printf '{"a":1}' | openssl dgst -sha256 -hmac secret`.
        assert_eq!(
            sign(b"secret", br#"{"a":1}"#),
            "sha256=aa9e2e3575f5d7098b6caccd790888c36d5fdb63342a73bada2d6a51747a8494"
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        assert_eq!(backoff(1, s(30), s(3600)), s(30));
        assert_eq!(backoff(2, s(30), s(3600)), s(60));
        assert_eq!(backoff(5, s(30), s(3600)), s(480));
        assert_eq!(backoff(40, s(30), s(3600)), s(3600));
    }
}
