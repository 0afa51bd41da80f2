#!/usr/bin/env python3
"""The Python client (client/python/tomoserve) against a real tomod.

    PYTHONPATH=<build>/python python3 python_client_test.py TOMOD

A disk's exact parallel projections, laid out as scikit-image's radon lays them out (no
scikit-image needed: the disk's line integrals are analytic), go through
parallel_spec_from_skimage, the upload (chunked, checksummed), the watch and the fetch, and
come back where skimage's image has the disk; the fetch resumes a partial file and refuses
one whose bytes are wrong; tomod's refusals and an unreachable tomod raise what they should.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

import tomoserve
from tomoserve import pb

TOMOD = sys.argv.pop(1)


def disk_sinogram(size, centre_col, centre_row, radius, theta_deg):
    """skimage.transform.radon's layout (bins, angles) of a disk of value 1: bin k of angle t
    integrates along s = x cos t + y sin t, x = col - N//2, y = N//2 - row, s = k - N//2."""
    x0, y0 = centre_col - size // 2, size // 2 - centre_row
    s = np.arange(size)[:, None] - size // 2
    t = np.deg2rad(np.asarray(theta_deg))[None, :]
    d = s - (x0 * np.cos(t) + y0 * np.sin(t))
    return 2 * np.sqrt(np.clip(radius ** 2 - d ** 2, 0, None))


def centroid(image):
    """(column, row) of the image's mass above half its maximum."""
    mask = image > 0.5 * image.max()
    rows, cols = np.nonzero(mask)
    weights = image[mask]
    return (np.average(cols, weights=weights), np.average(rows, weights=weights))


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tomo-python-")
        port_file = os.path.join(cls.dir, "port")
        cls.log = open(os.path.join(cls.dir, "tomod.log"), "w")
        cls.tomod = subprocess.Popen(
            [TOMOD, "--listen=127.0.0.1:0", "--port_file=" + port_file, "--metrics_port=0",
             "--spool_dir=" + os.path.join(cls.dir, "spool")],
            stdout=cls.log, stderr=subprocess.STDOUT)
        port = ""
        for _ in range(200):
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
            if port:
                break
            time.sleep(0.05)
        cls.client = tomoserve.Client("http://127.0.0.1:" + port)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.tomod.send_signal(signal.SIGTERM)
        cls.tomod.wait(60)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_skimage_sinogram_comes_back_where_skimage_has_the_disk(self):
        size, col, row, radius = 64, 41.0, 19.0, 7.0
        theta = np.arange(0, 180, 1.0)
        sinogram = disk_sinogram(size, col, row, radius, theta)
        for pixel_mm in (1.0, 0.35):
            spec, projections = tomoserve.parallel_spec_from_skimage(
                sinogram, theta, size, pixel_mm=pixel_mm)
            job = self.client.submit(spec, projections)
            self.assertEqual(job.state, pb.JOB_STATE_QUEUED)
            events = list(self.client.watch(job.id))
            self.assertEqual(events[-1].state, pb.JOB_STATE_SUCCEEDED)
            volume = self.client.fetch_volume(job.id, os.path.join(self.dir, job.id))
            self.assertEqual(volume.shape, (1, size, size))
            image = tomoserve.volume_to_skimage(volume[0])
            got_col, got_row = centroid(image)
            # The pixel grid is skimage's: the disk's centre to a tenth of a pixel (a half
            # pixel shift or a flip would be caught), its value 1 (per pixel of the image).
            self.assertAlmostEqual(got_col, col, delta=0.1)
            self.assertAlmostEqual(got_row, row, delta=0.1)
            inside = image[int(row) - 3:int(row) + 4, int(col) - 3:int(col) + 4]
            self.assertAlmostEqual(float(inside.mean()), 1.0, delta=0.05)
            # Without the flip the disk is elsewhere: the check above can fail.
            _, unflipped_row = centroid(volume[0])
            self.assertGreater(abs(unflipped_row - row), 10)

    def test_jobs_list_info_and_errors(self):
        info = self.client.info()
        self.assertIn("fbp", info.algorithms)
        spec, projections = tomoserve.parallel_spec_from_skimage(
            disk_sinogram(32, 16, 16, 5, np.arange(0, 180, 4.0)), np.arange(0, 180, 4.0), 32)
        done = self.client.reconstruct(spec, projections, os.path.join(self.dir, "r"))
        self.assertEqual(done.shape, (1, 32, 32))
        self.assertTrue(self.client.jobs([pb.JOB_STATE_SUCCEEDED]))
        spec["geometry"]["parallel2d"]["detectorSpacingMm"] = 0
        with self.assertRaises(grpc.RpcError) as refused:
            self.client.submit(spec, projections)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("geometry.parallel_2d.detector_spacing_mm", refused.exception.details())
        with self.assertRaises(ConnectionError) as unreachable:
            tomoserve.Client("127.0.0.1:1").info()
        self.assertIn("cannot reach tomod at 127.0.0.1:1", str(unreachable.exception))
        with self.assertRaises(ValueError):
            tomoserve.Client("https://example.org")

    def test_fetch_resumes_and_checks_the_whole_file(self):
        theta = np.arange(0, 180, 2.0)
        spec, projections = tomoserve.parallel_spec_from_skimage(
            disk_sinogram(48, 20, 30, 6, theta), theta, 48)
        job = self.client.submit(spec, projections)
        self.client.wait(job.id)
        whole = self.client.fetch(job.id, "volume.raw", os.path.join(self.dir, "whole.raw"))
        with open(whole, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), 48 * 48 * 4)
        # A partial file holding a true prefix is resumed...
        target = os.path.join(self.dir, "resumed.raw")
        with open(target + ".partial", "wb") as f:
            f.write(data[:1000])
        self.client.fetch(job.id, "volume.raw", target)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), data)
        # ... and one holding wrong bytes is refused by the whole file's CRC-32.
        with open(target + ".partial", "wb") as f:
            f.write(b"\0" * 1000)
        with self.assertRaises(IOError):
            self.client.fetch(job.id, "volume.raw", target)
        self.assertFalse(os.path.exists(target + ".partial"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
