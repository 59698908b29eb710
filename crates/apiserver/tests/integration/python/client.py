"""The official Python client (kubernetes 37.0.2) against the server: create, list, watch, storage.

Usage: client.py KUBECONFIG. Prints one line per check and exits non-zero on the first failure.
"""
import sys
import threading

from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()

# create: no Content-Type, no apiVersion/kind in the body.
pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="py1", labels={"app": "py"}),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
)
created = v1.create_namespaced_pod("default", pod)
assert created.spec.scheduler_name == "default-scheduler", created.spec.scheduler_name
print("create ok", created.metadata.resource_version)

try:
    v1.create_namespaced_pod("default", pod)
    raise SystemExit("second create did not fail")
except client.ApiException as e:
    assert e.status == 409, e.status
print("conflict ok")

pods = v1.list_namespaced_pod("default", label_selector="app=py")
assert [p.metadata.name for p in pods.items] == ["py1"], pods.items
rv = pods.metadata.resource_version
print("list ok", rv)

# watch from the list's resourceVersion; a second pod created meanwhile must arrive.
def create_later():
    v1.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="py2", labels={"app": "py"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
        ),
    )

threading.Timer(0.5, create_later).start()
seen = None
w = watch.Watch()
for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=10):
    seen = (ev["type"], ev["object"].metadata.name)
    w.stop()
assert seen == ("ADDED", "py2"), seen
print("watch ok")

v1.patch_namespaced_pod("py1", "default", {"metadata": {"labels": {"zone": "a"}}})
assert v1.read_namespaced_pod("py1", "default").metadata.labels["zone"] == "a"
print("patch ok")

v1.delete_namespaced_pod("py1", "default")
print("delete ok")

# storage: a class and a claim get the server's defaults; a claim's class is fixed.
storage = client.StorageV1Api()
sc = storage.create_storage_class(
    client.V1StorageClass(metadata=client.V1ObjectMeta(name="py-fast"), provisioner="csi.example.com")
)
assert (sc.reclaim_policy, sc.volume_binding_mode) == ("Delete", "Immediate"), sc
claim = v1.create_namespaced_persistent_volume_claim(
    "default",
    client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="py-data"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            storage_class_name="py-fast",
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
        ),
    ),
)
assert (claim.spec.volume_mode, claim.status.phase) == ("Filesystem", "Pending"), claim
try:
    v1.patch_namespaced_persistent_volume_claim("py-data", "default", {"spec": {"storageClassName": "other"}})
    raise SystemExit("changing a claim's class did not fail")
except client.ApiException as e:
    assert e.status == 422, e.status
assert [c.metadata.name for c in v1.list_persistent_volume_claim_for_all_namespaces().items] == ["py-data"]
print("storage ok")
