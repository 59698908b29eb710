//! Writes whose answer is not read: the request goes through the kube-rs client as its
//! typed API would send it (same method, path, headers and body, same middleware: auth,
//! retries, tracing), but a successful response's body is read and dropped instead of being
//! copied into a `String` and decoded into an object nothing uses. A bind's answer is a
//! Status, an event's the Event as stored; the scheduler needs neither, only whether the
//! write succeeded and, when it did not, the API server's Status.
//!
//! A refusal is turned into [`kube::Error::Api`] as kube-rs does it: the Status from the
//! body, or, when the body is no Status (a proxy's text or HTML page), a Failure with the
//! HTTP code and the trimmed body as message.

use http_body_util::BodyExt;
use hyper::Request;
use kube::core::Status;

/// Sends `request` and reads the whole response, keeping nothing of a success (reading it
/// to the end lets the connection go back to the pool).
///
/// `operation` is the name kube-rs' typed API gives the request (`"create"`, `"patch"`,
/// ...), for its tracing layer.
pub async fn send_discarding(
    client: &kube::Client,
    mut request: Request<Vec<u8>>,
    operation: &'static str,
) -> Result<(), kube::Error> {
    request.extensions_mut().insert(operation);
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let code = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if code.is_client_error() || code.is_server_error() {
        return Err(api_error(code.as_u16(), &body));
    }
    Ok(())
}

/// The error of a refused request whose response body is `body`.
pub(crate) fn api_error(code: u16, body: &[u8]) -> kube::Error {
    match serde_json::from_slice::<Status>(body) {
        Ok(status) => kube::Error::Api(status.boxed()),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            kube::Error::Api(
                Status::failure(text.trim(), "Failed to parse error data")
                    .with_code(code)
                    .boxed(),
            )
        }
    }
}
