use super::*;

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use framework::testing::{make_pod, PodBuilder};
use framework::{ClientError, Code, Parallelizer};
use rstest::rstest;

/// A client that records every binding and answers with `reply`.
struct RecordingClient {
    bindings: Mutex<Vec<Binding>>,
    reply: Result<(), ClientError>,
}

impl ClusterClient for RecordingClient {
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            if let Ok(mut b) = self.bindings.lock() {
                b.push(binding.clone());
            }
            self.reply.clone()
        })
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a framework::PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.update_pod_status(update)
    }

    fn record_event<'a>(
        &'a self,
        event: &'a framework::PodEvent,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.record_event(event)
    }

    fn delete_pod<'a>(
        &'a self,
        pod: &'a framework::PodRef,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.delete_pod(pod)
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a k8s_openapi::api::core::v1::PersistentVolume,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::core::v1::PersistentVolume, ClientError>> {
        framework::handle::NoopClient.update_persistent_volume(pv)
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a k8s_openapi::api::core::v1::PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::core::v1::PersistentVolumeClaim, ClientError>> {
        framework::handle::NoopClient.update_persistent_volume_claim(pvc)
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::resource::v1::ResourceClaim, ClientError>> {
        framework::handle::NoopClient.update_resource_claim(claim)
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::resource::v1::ResourceClaim, ClientError>> {
        framework::handle::NoopClient.update_resource_claim_status(claim)
    }
}

/// Drives a future that never waits on I/O to completion. The fake client is ready at
/// once, so a no-op waker is enough; the poll limit keeps a bug from hanging the test.
fn block_on<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    (0..1000).find_map(|_| match fut.as_mut().poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    })
}

#[rstest]
#[case::success_binds_pod_to_node(
    make_pod("web-1").namespace("shop"),
    Ok(()),
    Status::success(),
    Binding { namespace: "shop".into(), name: "web-1".into(), uid: Some("uid-web-1".into()), node: "n3".into() }
)]
#[case::api_refusal_is_an_error_with_its_message(
    make_pod("web-1"),
    Err(ClientError::Api { code: 409, message: "pod default/web-1 is already assigned to node n1".into() }),
    Status::new(Code::Error, "api error 409: pod default/web-1 is already assigned to node n1"),
    Binding { namespace: "default".into(), name: "web-1".into(), uid: Some("uid-web-1".into()), node: "n3".into() }
)]
#[case::transport_failure_is_an_error(
    make_pod("web-1"),
    Err(ClientError::Transport("connection refused".into())),
    Status::new(Code::Error, "transport error: connection refused"),
    Binding { namespace: "default".into(), name: "web-1".into(), uid: Some("uid-web-1".into()), node: "n3".into() }
)]
#[case::pod_without_uid_binds_without_uid(
    make_pod("web-1").with(|p| p.metadata.uid = None),
    Ok(()),
    Status::success(),
    Binding { namespace: "default".into(), name: "web-1".into(), uid: None, node: "n3".into() }
)]
fn bind(
    #[case] pod: PodBuilder,
    #[case] reply: Result<(), ClientError>,
    #[case] want_status: Status,
    #[case] want_binding: Binding,
) {
    let client = Arc::new(RecordingClient {
        bindings: Mutex::new(Vec::new()),
        reply,
    });
    let handle = Handle::new(Parallelizer::sequential(), client.clone());
    let Ok(p) = new(None, &handle) else {
        unreachable!("DefaultBinder takes no args")
    };
    let pod = pod.info();
    let state = CycleState::new();
    let status = p
        .as_bind()
        .and_then(|b| block_on(b.bind(&state, &pod, "n3")));
    let recorded = client
        .bindings
        .lock()
        .map(|b| b.clone())
        .unwrap_or_default();
    assert_eq!((status, recorded), (Some(want_status), vec![want_binding]));
}
