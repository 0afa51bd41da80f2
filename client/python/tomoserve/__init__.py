"""tomoserve: a Python client of tomod, the tomoserve reconstruction daemon.

    import numpy as np
    import tomoserve

    client = tomoserve.Client("localhost")          # port 50051 when none is given
    job = client.submit(spec, projections)          # a JobSpec (message or dict), an array
    for event in client.watch(job.id):              # JobEvents until the job ends
        print(event.state, event.progress.fraction)
    volume = client.fetch_volume(job.id)            # float32 (z, y, x)

Messages are those of tomoserve.v1 (tomoserve.v1.tomoserve_pb2, generated from
proto/tomoserve/v1/tomoserve.proto by the build). docs/python.md has the conventions, with
scikit-image's and ASTRA's beside ours.
"""
from tomoserve.client import Client, JobFailed, server_target
from tomoserve.conventions import parallel_spec_from_skimage, volume_to_skimage
from tomoserve.v1 import tomoserve_pb2 as pb

__all__ = ["Client", "JobFailed", "server_target", "parallel_spec_from_skimage",
           "volume_to_skimage", "pb"]
