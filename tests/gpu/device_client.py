"""The client setup of the device scripts' Python checks (cuda_shm_check.py, device_conv_client.py): a
tritonclient gRPC client on a server that is still starting, returned once the server says it is ready.
It travels beside them (device_bundle_plan.sh copies it next to its client.py)."""
import sys
import time

import tritonclient.grpc as grpcclient


def ready_client(url, timeout_s=60):
    """A client on url once the server there is ready; exits 1 naming url if it is not within timeout_s."""
    c = grpcclient.InferenceServerClient(url)
    deadline, last = time.monotonic() + timeout_s, None
    while True:
        try:
            if c.is_server_ready():
                return c
            last = "not ready"
        except Exception as e:  # not listening yet
            last = e
        if time.monotonic() >= deadline:
            sys.exit("server at %s not ready after %d s: %s" % (url, timeout_s, last))
        time.sleep(0.1)  # readiness has no push notice: poll it
