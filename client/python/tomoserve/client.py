"""Client: one tomod, over gRPC; NumPy arrays in and out.

Every call raises grpc.RpcError with tomod's status (INVALID_ARGUMENT naming the field,
NOT_FOUND, RESOURCE_EXHAUSTED naming the limit, ...) when tomod refuses, ConnectionError with
a sentence when tomod cannot be reached, JobFailed when a job it waited for did not succeed.
"""
import json
import os
import re
import zlib

import grpc
import numpy as np
from google.protobuf import json_format

from tomoserve.v1 import tomoserve_pb2 as pb
from tomoserve.v1 import tomoserve_pb2_grpc as pb_grpc

DEFAULT_PORT = 50051
CHUNK_BYTES = 1 << 20          # the data messages' size, as the C++ client sends
MAX_MESSAGE_BYTES = 16 << 20   # tomod's default message limit

FINAL_STATES = (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED)


class JobFailed(RuntimeError):
    """A job ended FAILED or CANCELLED; .job is the Job message."""

    def __init__(self, job):
        super().__init__(f"job {job.id} {pb.JobState.Name(job.state)}: {job.error}")
        self.job = job


def server_target(address):
    """The gRPC target of an address as users write it, as the tomo CLI takes it:
    "host" -> "host:50051", "http://host:7001" -> "host:7001" (grpc:// too), "[::1]" ->
    "[::1]:50051"; "unix:/path" as is."""
    address = address.strip()
    if re.match(r"^(unix|unix-abstract|dns|ipv4|ipv6):", address):
        return address
    if address.lower().startswith("https://"):
        raise ValueError(f"server address {address!r}: https:// asks for TLS; give host:port")
    address = re.sub(r"^(http|grpc)://", "", address, flags=re.IGNORECASE).rstrip("/")
    match = re.fullmatch(r"(\[[^\]]+\]|[^:\[\]/]+)(?::(\d+))?", address)
    if not match:
        raise ValueError(f"server address {address!r}: expected host[:port]")
    port = int(match.group(2) or DEFAULT_PORT)
    if not 1 <= port <= 65535:
        raise ValueError(f"server address {address!r}: port {port} not in [1, 65535]")
    return f"{match.group(1)}:{port}"


def _spec_message(spec):
    """A JobSpec from a message, a dict (protobuf's JSON mapping) or a JSON string."""
    if isinstance(spec, pb.JobSpec):
        message = pb.JobSpec()
        message.CopyFrom(spec)
        return message
    if isinstance(spec, str):
        spec = json.loads(spec)
    return json_format.ParseDict(spec, pb.JobSpec())


def _data_chunks(data):
    """The upload's bytes as chunks: a NumPy array (its bytes in C order; float32 arrays
    become little-endian), bytes, or a list of paths read back to back."""
    if isinstance(data, np.ndarray):
        array = data.astype("<f4") if data.dtype.kind == "f" else data
        view = memoryview(np.ascontiguousarray(array)).cast("B")
        for start in range(0, len(view), CHUNK_BYTES):
            yield bytes(view[start:start + CHUNK_BYTES])
    elif isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        for start in range(0, len(view), CHUNK_BYTES):
            yield bytes(view[start:start + CHUNK_BYTES])
    else:
        for path in ([data] if isinstance(data, (str, os.PathLike)) else data):
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    yield chunk


def _data_size(data):
    if isinstance(data, np.ndarray):
        return data.size * (4 if data.dtype.kind == "f" else data.dtype.itemsize)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return memoryview(data).nbytes
    paths = [data] if isinstance(data, (str, os.PathLike)) else data
    return sum(os.path.getsize(p) for p in paths)


class Client:
    """A connection to one tomod. address: "host[:port]" (see server_target)."""

    def __init__(self, address="127.0.0.1:50051", timeout=60.0, channel=None):
        self.target = server_target(address)
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        self._channel = channel or grpc.insecure_channel(self.target, options=options)
        self._stub = pb_grpc.ReconstructionStub(self._channel)
        self._timeout = timeout

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, **kwargs):
        try:
            return method(request, **kwargs)
        except grpc.RpcError as error:
            self._raise_unreachable(error)
            raise

    def _raise_unreachable(self, error):
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) \
                and "tomod" not in (error.details() or ""):
            raise ConnectionError(
                f"cannot reach tomod at {self.target}: is tomod running there?") from error

    # ---------------------------------------------------------------- jobs

    def submit(self, spec, data):
        """Uploads a job: spec (JobSpec message, dict or JSON) and its data (a NumPy array,
        bytes or file paths). input.size_bytes is filled in from the data; a float32 array
        sets input.encoding FLOAT32_LE when the spec leaves it unset. The upload ends with
        the byte count and the CRC-32 of every byte; returns the Job once tomod has
        committed it (QUEUED)."""
        message = _spec_message(spec)
        size = _data_size(data)
        if message.input.size_bytes == 0:
            message.input.size_bytes = size
        if (isinstance(data, np.ndarray) and data.dtype.kind == "f"
                and message.input.encoding == pb.DATA_ENCODING_UNSPECIFIED):
            message.input.encoding = pb.DATA_ENCODING_FLOAT32_LE
        checksum = [0, 0]  # crc32, bytes

        def requests():
            yield pb.SubmitRequest(spec=message)
            for chunk in _data_chunks(data):
                checksum[0] = zlib.crc32(chunk, checksum[0])
                checksum[1] += len(chunk)
                yield pb.SubmitRequest(data=chunk)
            yield pb.SubmitRequest(upload_end=pb.UploadEnd(total_bytes=checksum[1],
                                                           crc32=checksum[0]))

        return self._call(self._stub.Submit, requests()).job

    def job(self, job_id):
        return self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id),
                          timeout=self._timeout)

    def jobs(self, states=()):
        """Every job (oldest first), or those in the given JobStates."""
        jobs, token = [], ""
        while True:
            page = self._call(self._stub.ListJobs,
                              pb.ListJobsRequest(states=list(states), page_token=token),
                              timeout=self._timeout)
            jobs.extend(page.jobs)
            token = page.next_page_token
            if not token:
                return jobs

    def watch(self, job_id):
        """Yields the job's JobEvents until it ends."""
        try:
            yield from self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id))
        except grpc.RpcError as error:
            self._raise_unreachable(error)
            raise

    def wait(self, job_id):
        """Watches the job to its end; returns the Job, raises JobFailed unless SUCCEEDED."""
        for _ in self.watch(job_id):
            pass
        job = self.job(job_id)
        if job.state != pb.JOB_STATE_SUCCEEDED:
            raise JobFailed(job)
        return job

    def cancel(self, job_id):
        return self._call(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id),
                          timeout=self._timeout)

    def delete(self, job_id):
        self._call(self._stub.DeleteJob, pb.DeleteJobRequest(job_id=job_id),
                   timeout=self._timeout)

    def info(self):
        return self._call(self._stub.GetServerInfo, pb.GetServerInfoRequest(),
                          timeout=self._timeout)

    # ---------------------------------------------------------------- results

    def fetch(self, job_id, name="", path=None, resume=True):
        """Downloads a result (default: the first) into path (default: its name), through
        path + ".partial", resuming from that file's size; the whole file's size and CRC-32
        are checked against tomod's last message (IOError on a mismatch, the partial file
        removed). Returns the path."""
        if not name:
            name = self.job(job_id).results[0].name
        path = path or name
        partial = path + ".partial"
        offset = os.path.getsize(partial) if resume and os.path.exists(partial) else 0
        crc = 0
        if offset:
            with open(partial, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    crc = zlib.crc32(chunk, crc)
        last = None
        with open(partial, "ab" if offset else "wb") as out:
            try:
                for message in self._stub.FetchResult(
                        pb.FetchResultRequest(job_id=job_id, name=name, offset=offset)):
                    if message.data:
                        if message.offset != out.tell():
                            raise IOError(f"{name}: data at {message.offset}, expected "
                                          f"{out.tell()}")
                        out.write(message.data)
                        crc = zlib.crc32(message.data, crc)
                    if message.last:
                        last = message
            except grpc.RpcError as error:
                self._raise_unreachable(error)
                raise
            size = out.tell()
        if last is None or last.total_bytes != size or last.crc32 != crc:
            os.remove(partial)
            raise IOError(f"{name}: {size} bytes with CRC-32 {crc:08x}, tomod says "
                          f"{last.total_bytes if last else '?'} bytes, "
                          f"{last.crc32 if last else 0:08x}")
        os.replace(partial, path)
        return path

    def fetch_volume(self, job_id, directory="."):
        """The job's raw volume as a float32 array (z, y, x), read with its sidecar
        (volume.raw, volume.json fetched into directory)."""
        os.makedirs(directory, exist_ok=True)
        raw = self.fetch(job_id, "volume.raw", os.path.join(directory, "volume.raw"))
        sidecar = self.fetch(job_id, "volume.json", os.path.join(directory, "volume.json"))
        with open(sidecar) as f:
            nx, ny, nz = json.load(f)["size"]
        return np.fromfile(raw, dtype="<f4").reshape(nz, ny, nx)

    def reconstruct(self, spec, data, directory="."):
        """submit, wait, fetch_volume in one call."""
        job = self.submit(spec, data)
        self.wait(job.id)
        return self.fetch_volume(job.id, directory)
