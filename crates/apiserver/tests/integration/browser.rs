//! What a web page can do: a cross-site write (an `Origin` the server does not allow) and a
//! DNS-rebound read (a `Host` name that is not this server's) are refused with 403; origins
//! given in `cors_allowed_origins` get CORS headers, and clients without `Origin` (kubectl,
//! kube-rs, the Python client) are not affected.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;

/// Sends `method path` with `headers` (each line ending in CRLF; `{addr}` replaced) and the
/// pod as body when `body`; returns the code, the body as JSON, and the
/// Access-Control-Allow-Origin header.
fn send(c: &Cluster, method: &str, headers: &str, body: bool) -> (u16, Value, Option<String>) {
    let mut s = TcpStream::connect(c.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let body = if body { POD } else { "" };
    let headers = headers.replace("{addr}", &c.addr.to_string());
    let port = c.addr.port();
    let headers = headers.replace("{port}", &port.to_string());
    write!(
        s,
        "{method} /api/v1/namespaces/default/pods HTTP/1.1\r\n{headers}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let acao = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("access-control-allow-origin")
            .then(|| v.trim().to_string())
    });
    let json = serde_json::from_str(rest).unwrap_or(Value::Null);
    (code, json, acao)
}

fn forbidden(message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Forbidden", "code": 403})
}

/// The code, and the whole Status for refusals (other bodies are not compared).
fn outcome(c: &Cluster, method: &str, headers: &str, body: bool) -> (u16, Value, Option<String>) {
    let (code, json, acao) = send(c, method, headers, body);
    let json = if code == 403 { json } else { Value::Null };
    (code, json, acao)
}

#[rstest]
#[case::no_origin_write_is_served("POST", "Host: {addr}\r\n", true, (201, Value::Null, None))]
#[case::cross_site_write_without_content_type_is_refused(
    "POST",
    "Host: {addr}\r\nOrigin: https://evil.example\r\n",
    true,
    (403, forbidden("origin \"https://evil.example\" is not allowed: requests from web pages need an origin allowed with --cors-allowed-origins"), None)
)]
#[case::cross_site_read_is_refused(
    "GET",
    "Host: {addr}\r\nOrigin: null\r\n",
    false,
    (403, forbidden("origin \"null\" is not allowed: requests from web pages need an origin allowed with --cors-allowed-origins"), None)
)]
#[case::allowed_origin_write_gets_cors_headers(
    "POST",
    "Host: {addr}\r\nOrigin: https://dash.example\r\nContent-Type: application/json\r\n",
    true,
    (201, Value::Null, Some("https://dash.example".to_string()))
)]
#[case::allowed_origin_preflight_is_204(
    "OPTIONS",
    "Host: {addr}\r\nOrigin: https://dash.example\r\nAccess-Control-Request-Method: POST\r\n",
    false,
    (204, Value::Null, Some("https://dash.example".to_string()))
)]
#[case::rebound_dns_name_is_refused(
    "GET",
    "Host: rebind.evil.example:{port}\r\n",
    false,
    (403, forbidden("host \"rebind.evil.example:PORT\" is not allowed: the Host header must name this server by IP address, localhost or a name given with --allowed-hosts"), None)
)]
#[case::localhost_with_port_is_served("GET", "Host: localhost:{port}\r\n", false, (200, Value::Null, None))]
#[case::localhost_without_port_is_served("GET", "Host: LocalHost\r\n", false, (200, Value::Null, None))]
#[case::ipv6_loopback_is_served("GET", "Host: [::1]:{port}\r\n", false, (200, Value::Null, None))]
#[case::other_ip_address_is_served("GET", "Host: 10.1.2.3:{port}\r\n", false, (200, Value::Null, None))]
#[case::allowed_host_name_is_served("GET", "Host: kubesched.internal:{port}\r\n", false, (200, Value::Null, None))]
fn browser_origins_and_host_names(
    #[case] method: &str,
    #[case] headers: &str,
    #[case] body: bool,
    #[case] want: (u16, Value, Option<String>),
) {
    let c = Cluster::with_config(apiserver::Config {
        cors_allowed_origins: vec![r"^https://dash\.example$".to_string()],
        allowed_hosts: vec!["kubesched.internal".to_string()],
        ..apiserver::Config::default()
    });
    let mut want = want;
    if let Some(m) = want.1.get_mut("message") {
        *m = json!(m
            .as_str()
            .unwrap_or("")
            .replace("PORT", &c.addr.port().to_string()));
    }
    assert_eq!(outcome(&c, method, headers, body), want);
}
